package main

import (
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus/agent/hook"
)

// hookCommand is `teambus hook <Event>`, the Claude Code hook handlers.
// It never fails: its exit code and output are the hook contract (package
// hook).
func hookCommand() *cli.Command {
	return &cli.Command{
		Name:      "hook",
		Usage:     "Claude Code hook handler: `teambus hook <Event>` (written by `teambus init claude`)",
		ArgsUsage: "EVENT",
		Description: "Reads the hook payload on stdin and writes at most one JSON envelope on stdout. Events:\n" +
			"SessionStart (bind the session, register, start the sidecar, brief and mail), UserPromptSubmit,\n" +
			"PostToolBatch, PostToolUse (mail), Stop (late mail), wait (the asyncRewake waiter: exit 2 wakes the\n" +
			"session), PreCompact, PostCompact (checkpoint), Notification, StopFailure (liveness condition),\n" +
			"SessionEnd (clean exit), TeammateIdle, TaskCreated, TaskCompleted (lead). Fail-open: any error\n" +
			"exits 0 with empty output and a line in $TEAMBUS_DIR/logs/hooks.log. Identity: TEAMBUS_TEAM and\n" +
			"TEAMBUS_MEMBER, else --team and --member; with neither the hook does nothing. The bus: TEAMBUS_DIR or\n" +
			"TEAMBUS_SERVER (or --dir/--server), else --bus. SessionStart passes the connection to the sidecar in\n" +
			"its environment, never its arguments, and puts $TEAMBUS_DIR/bin (its teambus: the client build) first\n" +
			"on the PATH of the session's shell.",
		Flags: flags(connFlags(), []cli.Flag{
			// No EnvVars: the environment is read first, the flags (baked
			// into the handler) are the fallback.
			&cli.StringFlag{Name: "team", Usage: "team id, when TEAMBUS_TEAM is not set"},
			&cli.StringFlag{Name: "member", Usage: "member id (lead for the lead), when TEAMBUS_MEMBER is not set"},
			busFlag(),
			&cli.DurationFlag{Name: "budget", Usage: "the whole hook finishes within this", Value: hook.DefaultBudget, EnvVars: []string{"TEAMBUS_HOOK_BUDGET"}},
			&cli.IntFlag{Name: "max-context", Usage: "most characters of mail injected by one hook", Value: hook.DefaultMaxContext, EnvVars: []string{"TEAMBUS_HOOK_MAX_CONTEXT"}},
			&cli.StringFlag{Name: "payload", Usage: "read the payload from this file instead of stdin"},
			&cli.BoolFlag{Name: "dry-run", Usage: "print what would be injected; ack nothing"},
			&cli.BoolFlag{Name: "autonomous", Usage: "Stop continues a turn that holds an in-progress task without a checkpoint", EnvVars: []string{"TEAMBUS_AUTONOMOUS"}},
			&cli.DurationFlag{Name: "max-wait", Usage: "wait: give up after this (the handler timeout less 30s)", Value: hook.DefaultMaxWait, EnvVars: []string{"TEAMBUS_HOOK_MAX_WAIT"}},
		}),
		Action: runHook,
	}
}

func runHook(c *cli.Context) error {
	if c.NArg() != 1 {
		return nil // fail-open: a malformed handler must not show Claude an error
	}
	cfg := hook.Config{
		Event:         c.Args().First(),
		Team:          os.Getenv("TEAMBUS_TEAM"),
		Member:        os.Getenv("TEAMBUS_MEMBER"),
		Budget:        c.Duration("budget"),
		MaxContext:    c.Int("max-context"),
		Autonomous:    c.Bool("autonomous"),
		Force:         os.Getenv("TEAMBUS_FORCE") == "1",
		DryRun:        c.Bool("dry-run"),
		MaxWait:       c.Duration("max-wait"),
		ClaudeVersion: os.Getenv("TEAMBUS_CLAUDE_VERSION"),
	}
	if cfg.Team == "" {
		cfg.Team = c.String("team")
	}
	if cfg.Member == "" {
		cfg.Member = c.String("member")
	}
	if cfg.Team == "" || cfg.Member == "" {
		return nil
	}
	if applyBus(c) != nil {
		return nil
	}
	dir, err := stateDir(c)
	if err != nil {
		return nil
	}
	cfg.StateDir = dir
	if cfg.Connect, err = connConfig(c); err != nil {
		return nil
	}
	cfg.Connect.Timeout = time.Duration(0)
	if exe, err := os.Executable(); err == nil {
		cfg.Exe = exe
	}
	cfg.SidecarEnv = connEnv(c)
	var in io.Reader = c.App.Reader
	if p := c.String("payload"); p != "" {
		f, err := os.Open(p)
		if err != nil {
			return nil
		}
		defer f.Close()
		in = f
	}
	stdout, stderr := closer(c.App.Writer), closer(c.App.ErrWriter)
	if code := hook.Run(c.Context, cfg, in, stdout, stderr); code != 0 {
		return cli.Exit("", code)
	}
	return nil
}

// closer is w as an io.WriteCloser; closing a writer that is not one does
// nothing.
func closer(w io.Writer) io.WriteCloser {
	if wc, ok := w.(io.WriteCloser); ok {
		return wc
	}
	return nopCloser{w}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// connFlagEnv are the connection flags a spawned teambus process needs,
// with the variable each one reads.
var connFlagEnv = [][2]string{
	{"server", "TEAMBUS_SERVER"}, {"creds", "TEAMBUS_CREDS"}, {"token", "TEAMBUS_TOKEN"},
	{"user", "TEAMBUS_USER"}, {"password", "TEAMBUS_PASSWORD"}, {"inbox-prefix", "TEAMBUS_INBOX_PREFIX"},
	{"tls-ca", "TEAMBUS_TLS_CA"}, {"tls-cert", "TEAMBUS_TLS_CERT"}, {"tls-key", "TEAMBUS_TLS_KEY"},
}

// connEnv is the connection of c as environment entries (NAME=value) for
// a process teambus spawns: a token or password given as a flag reaches
// the child through its environment, never its argv, which every local
// user can read in the process list.
func connEnv(c *cli.Context) []string {
	var env []string
	for _, f := range connFlagEnv {
		if c.IsSet(f[0]) {
			env = append(env, f[1]+"="+c.String(f[0]))
		}
	}
	return env
}

// busFlag is --bus, the bus location `init claude` bakes into handlers
// and the MCP registration beside the identity. No environment variable:
// TEAMBUS_DIR and TEAMBUS_SERVER, when set, win over it.
func busFlag() cli.Flag {
	return &cli.StringFlag{Name: "bus", Usage: "bus `LOCATION` (a state directory or a nats:// URL) baked in by init claude: used when neither --dir/TEAMBUS_DIR nor --server/TEAMBUS_SERVER is set"}
}

// applyBus makes --bus the --dir or --server of c when neither is set.
func applyBus(c *cli.Context) error {
	b := c.String("bus")
	if b == "" || c.IsSet("dir") || c.IsSet("server") {
		return nil
	}
	if isBusURL(b) {
		return c.Set("server", b)
	}
	return c.Set("dir", b)
}

// isBusURL reports whether a bus location is a URL rather than a directory.
func isBusURL(s string) bool {
	return strings.Contains(s, "://")
}

// bakedBus is the bus location `init claude` bakes: the server URL (its
// first, without user and password) when one is given, else the state
// directory, absolute.
func bakedBus(c *cli.Context) (string, error) {
	if c.IsSet("server") {
		first, _, _ := strings.Cut(c.String("server"), ",")
		u, err := url.Parse(strings.TrimSpace(first))
		if err != nil || u.Host == "" {
			return "", usageError(c, "invalid --server %q: a nats://host:port URL", first)
		}
		u.User = nil
		return u.String(), nil
	}
	dir, err := stateDir(c)
	if err != nil {
		return "", err
	}
	return filepath.Abs(dir)
}
