package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
)

// Flags are built by functions, never shared: urfave writes into a flag
// while parsing (its value from the environment, whether it was set), so
// every app gets its own.

// flags concatenates flag groups for a command:
// flags(connFlags(), memberFlags(), []cli.Flag{jsonFlag()}).
func flags(groups ...[]cli.Flag) []cli.Flag {
	var out []cli.Flag
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// dirFlag is --dir, the state directory of the local node.
func dirFlag() cli.Flag {
	return &cli.StringFlag{
		Name:    "dir",
		Usage:   "state directory of the local bus node (its store and discovery file)",
		EnvVars: []string{"TEAMBUS_DIR"},
		Value:   defaultDir(),
	}
}

// defaultDir is $XDG_STATE_HOME/teambus, else ~/.local/state/teambus, else
// empty (then --dir is required).
func defaultDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "teambus")
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return ""
	}
	return filepath.Join(home, ".local", "state", "teambus")
}

// timeoutFlag is --timeout, the limit of a one-shot command.
func timeoutFlag() cli.Flag {
	return &cli.DurationFlag{
		Name:    "timeout",
		Usage:   "give up after this long (connect and every request of a one-shot command)",
		EnvVars: []string{"TEAMBUS_TIMEOUT"},
		Value:   10 * time.Second,
	}
}

// connFlags are the flags of every command that talks to the bus: where it
// is and how to authenticate, and --timeout.
func connFlags() []cli.Flag {
	return []cli.Flag{
		dirFlag(),
		&cli.StringFlag{Name: "server", Usage: "NATS URL(s) of an external bus, comma separated (default: the local node found in --dir)", EnvVars: []string{"TEAMBUS_SERVER"}},
		&cli.StringFlag{Name: "creds", Usage: "credentials `FILE`: a member's from teambus team creds (it also sets --team and --member), or a NATS .creds file", EnvVars: []string{"TEAMBUS_CREDS"}},
		&cli.StringFlag{Name: "token", Usage: "auth token (default: the local node's, from its discovery file)", EnvVars: []string{"TEAMBUS_TOKEN"}},
		&cli.StringFlag{Name: "user", Usage: "NATS user name", EnvVars: []string{"TEAMBUS_USER"}},
		&cli.StringFlag{Name: "password", Usage: "NATS password", EnvVars: []string{"TEAMBUS_PASSWORD"}},
		&cli.StringFlag{Name: "inbox-prefix", Usage: "reply subject prefix (default: _INBOX; a member credential sets its own)", EnvVars: []string{"TEAMBUS_INBOX_PREFIX"}},
		&cli.StringFlag{Name: "tls-ca", Usage: "CA certificate file to verify the server", EnvVars: []string{"TEAMBUS_TLS_CA"}},
		&cli.StringFlag{Name: "tls-cert", Usage: "client certificate file", EnvVars: []string{"TEAMBUS_TLS_CERT"}},
		&cli.StringFlag{Name: "tls-key", Usage: "client key file", EnvVars: []string{"TEAMBUS_TLS_KEY"}},
		timeoutFlag(),
	}
}

// teamFlag is --team, the team a member command acts in.
func teamFlag() cli.Flag {
	return &cli.StringFlag{Name: "team", Usage: "team id", EnvVars: []string{"TEAMBUS_TEAM"}}
}

// memberFlag is --member, the member a command acts as.
func memberFlag() cli.Flag {
	return &cli.StringFlag{Name: "member", Usage: "member id (lead for the lead)", EnvVars: []string{"TEAMBUS_MEMBER"}}
}

// sessionFlag is --session, the agent session of the member; a session that
// is not the member's current one is fenced (exit 3).
func sessionFlag() cli.Flag {
	return &cli.StringFlag{Name: "session", Usage: "agent session id of this incarnation", EnvVars: []string{"TEAMBUS_SESSION"}}
}

// memberFlags are --team, --member and --session: an agent session sets
// TEAMBUS_TEAM, TEAMBUS_MEMBER and TEAMBUS_SESSION once.
func memberFlags() []cli.Flag {
	return []cli.Flag{teamFlag(), memberFlag(), sessionFlag()}
}

// jsonFlag is --json: machine-readable output on stdout.
func jsonFlag() cli.Flag {
	return &cli.BoolFlag{Name: "json", Usage: "print JSON (one object, or JSON Lines for lists and streams)", EnvVars: []string{"TEAMBUS_JSON"}}
}

// logFlags are --log-level and --log-format for foreground processes (the
// bus node, the sidecars); logs go to stderr.
func logFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "log-level", Usage: "debug, info, warn or error", EnvVars: []string{"TEAMBUS_LOG_LEVEL"}, Value: "info"},
		&cli.StringFlag{Name: "log-format", Usage: "text or json", EnvVars: []string{"TEAMBUS_LOG_FORMAT"}, Value: "text"},
	}
}

// newLogger builds the slog logger of --log-level and --log-format, writing
// to the app's stderr.
func newLogger(c *cli.Context) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return nil, usageError(c, "invalid --log-level %q: one of debug, info, warn, error", c.String("log-level"))
	}
	opts := &slog.HandlerOptions{Level: level}
	switch c.String("log-format") {
	case "text", "":
		return slog.New(slog.NewTextHandler(c.App.ErrWriter, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(c.App.ErrWriter, opts)), nil
	default:
		return nil, usageError(c, "invalid --log-format %q: text or json", c.String("log-format"))
	}
}

// stateDir returns --dir as an absolute path.
func stateDir(c *cli.Context) (string, error) {
	dir := c.String("dir")
	if dir == "" {
		return "", usageError(c, "no state directory: set --dir or TEAMBUS_DIR (HOME is not set)")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", usageError(c, "invalid --dir %q: %v", dir, err)
	}
	return abs, nil
}

// timeout returns --timeout, which must be positive.
func timeout(c *cli.Context) (time.Duration, error) {
	d := c.Duration("timeout")
	if d <= 0 {
		return 0, usageError(c, "invalid --timeout %s: must be positive", d)
	}
	return d, nil
}

// withTimeout returns the command's context limited by --timeout, for a
// one-shot command.
func withTimeout(c *cli.Context) (context.Context, context.CancelFunc, error) {
	d, err := timeout(c)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(c.Context, d)
	return ctx, cancel, nil
}

// connConfig builds the bus connection settings from connFlags.
func connConfig(c *cli.Context) (bus.ConnectConfig, error) {
	dir, err := stateDir(c)
	if err != nil {
		return bus.ConnectConfig{}, err
	}
	d, err := timeout(c)
	if err != nil {
		return bus.ConnectConfig{}, err
	}
	return bus.ConnectConfig{
		Dir:         dir,
		Server:      c.String("server"),
		Creds:       c.String("creds"),
		Token:       c.String("token"),
		User:        c.String("user"),
		Pass:        c.String("password"),
		TLSCA:       c.String("tls-ca"),
		TLSCert:     c.String("tls-cert"),
		TLSKey:      c.String("tls-key"),
		InboxPrefix: c.String("inbox-prefix"),
		Name:        strings.TrimSpace("teambus " + strings.TrimPrefix(c.Command.HelpName, "teambus")),
		Timeout:     d,
	}, nil
}

// connect opens a connection to the bus described by connFlags. The caller
// closes it.
func connect(c *cli.Context) (*bus.Conn, error) {
	cfg, err := connConfig(c)
	if err != nil {
		return nil, err
	}
	return bus.Connect(c.Context, cfg)
}

// teamID returns --team, checked against the id rule.
func teamID(c *cli.Context) (string, error) {
	return flagID(c, "team", "TEAMBUS_TEAM")
}

// memberID returns --member, checked against the id rule ("lead" passes;
// a command that needs a teammate checks teambus.ValidateMemberID).
func memberID(c *cli.Context) (string, error) {
	return flagID(c, "member", "TEAMBUS_MEMBER")
}

// sessionID returns --session, checked by teambus.ValidateSession.
func sessionID(c *cli.Context) (string, error) {
	s := c.String("session")
	if s == "" {
		return "", usageError(c, "missing --session (or TEAMBUS_SESSION)")
	}
	return s, teambus.ValidateSession(s)
}

func flagID(c *cli.Context, name, env string) (string, error) {
	id, err := credsID(c, name, c.String(name))
	if err != nil {
		return "", err
	}
	if id == "" {
		return "", usageError(c, "missing --%s (or %s)", name, env)
	}
	return id, teambus.ValidateID(name, id)
}

// exactArgs checks that the command got n positional arguments.
func exactArgs(c *cli.Context, n int) error {
	if got := c.NArg(); got != n {
		return argCountError(c, fmt.Sprintf("%d", n), got)
	}
	return nil
}

// minArgs checks that the command got at least n positional arguments.
func minArgs(c *cli.Context, n int) error {
	if got := c.NArg(); got < n {
		return argCountError(c, fmt.Sprintf("at least %d", n), got)
	}
	return nil
}

func argCountError(c *cli.Context, want string, got int) error {
	if want == "0" {
		return usageError(c, "unexpected argument %q: takes no arguments", c.Args().First())
	}
	if got == 0 {
		return usageError(c, "missing argument: expected %s (%s)", want, c.Command.ArgsUsage)
	}
	return usageError(c, "expected %s argument(s) (%s), got %d", want, c.Command.ArgsUsage, got)
}
