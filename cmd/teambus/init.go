package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/agent/initclaude"
	"github.com/teambus/teambus/bus"
)

// initCommand is `teambus init`: wiring agent sessions into teambus.
func initCommand() *cli.Command {
	return &cli.Command{
		Name:        "init",
		Usage:       "wire agent sessions into teambus (init claude)",
		Subcommands: []*cli.Command{initClaudeCommand()},
	}
}

// initClaudeCommand is `teambus init claude` (spec agent-wiring.md §12.2).
// Its own flags have no environment variables on purpose: an installer's
// choices are explicit, and TEAMBUS_TEAM/TEAMBUS_MEMBER set in an agent's
// shell must never be baked into a settings file unasked.
func initClaudeCommand() *cli.Command {
	return &cli.Command{
		Name:  "claude",
		Usage: "install the teambus hooks into Claude Code settings (or a plugin), check or remove them",
		Description: "Writes teambus's hook handlers as its own matcher groups into a Claude Code settings file,\n" +
			"keeping every other byte. Scopes: local (.claude/settings.local.json at the repository root,\n" +
			"the default), project (.claude/settings.json), user (~/.claude/settings.json), plugin (--out DIR),\n" +
			"or --settings FILE (a standalone file for `claude --settings FILE`). With --team/--member (or --lead)\n" +
			"the identity is baked into the handlers (and the --mcp registration) only for --settings and for local\n" +
			"in a repository with one worktree; otherwise sessions take it from TEAMBUS_TEAM and TEAMBUS_MEMBER.\n" +
			"With --credential, run by the operator (who holds the node token), it issues the member's credential\n" +
			"into $XDG_CONFIG_HOME/teambus/creds/<team>/<member>.creds (mode 0600, directory 0700; default\n" +
			"~/.config), or reuses the file there while the node accepts it, and the handlers connect with that\n" +
			"credential (--creds PATH: a path, no secret; or TEAMBUS_CREDS where the identity is not baked), never\n" +
			"the token. --check says which credential each location's handlers use; it exits 2 with the fix for a\n" +
			"secret on a handler's command line or in a settings file's \"env\", and, with --credential, where a\n" +
			"session would hold the node token; else 0 (current), 1 (outdated, or the bus does not answer) or 2\n" +
			"(missing, the team or member not on the bus, a credential the node refuses).\n" +
			"--remove also removes the MCP server init registered, and keeps the credential unless --revoke.\n" +
			"Without --credential (for now the default) the handlers reach the bus with the node token, as the\n" +
			"sessions' sidecars (heartbeats, crash detection, zombie mode, the relay) do not run on a credential yet;\n" +
			"--check then warns where a session would hold the token, and with --credential refuses it. Claude Code is\n" +
			"found as $TEAMBUS_CLAUDE_BIN, else claude on PATH; $TEAMBUS_CLAUDE_VERSION stands in for\n" +
			"`claude --version`.",
		Flags: flags([]cli.Flag{
			&cli.StringFlag{Name: "team", Usage: "team id of the member (with --member, or --lead)"},
			&cli.StringFlag{Name: "member", Usage: "member id the session acts as"},
			&cli.BoolFlag{Name: "lead", Usage: "install for the team lead: member lead, plus TeammateIdle, TaskCreated, TaskCompleted"},
			&cli.StringFlag{Name: "scope", Usage: "local, project, user or plugin", Value: "local"},
			&cli.StringFlag{Name: "settings", Usage: "write a standalone settings `FILE` to start claude --settings FILE (identity baked in)"},
			&cli.StringFlag{Name: "out", Usage: "write the plugin into `DIR` (--scope plugin)"},
			&cli.BoolFlag{Name: "mcp", Usage: "also add the teambus MCP server (project: .mcp.json; other scopes: claude mcp add)"},
			newWakeFlag(),
			&cli.BoolFlag{Name: "no-wake", Usage: "no 'hook wait' handler: new mail does not wake an idle session"},
			&cli.BoolFlag{Name: "autonomous", Usage: "the Stop hook keeps a teammate working while it holds an unfinished task"},
			&cli.BoolFlag{Name: "claude-md", Usage: "add a short teambus block to CLAUDE.md"},
			&cli.BoolFlag{Name: "skill", Usage: "write the teambus skill (.claude/skills/teambus/SKILL.md)"},
			&cli.StringFlag{Name: "bin", Usage: "teambus binary the handlers run (default for local and --settings: teambus-client beside this binary if installed, else this binary; teambus on PATH otherwise)"},
			&cli.BoolFlag{Name: "shell-form", Usage: "write shell-form commands, exec '<bin>' hook … (Claude Code < 2.1.139)"},
			&cli.BoolFlag{Name: "dry-run", Usage: "print the change as a diff (or the new file) and write nothing"},
			&cli.BoolFlag{Name: "check", Usage: "report what is installed where and what is wrong; exit 0 current, 1 outdated or bus silent, 2 missing or team/member not on the bus"},
			&cli.BoolFlag{Name: "remove", Usage: "take out everything teambus wrote, giving back the original file"},
			&cli.BoolFlag{Name: "force", Usage: "bake the identity with several worktrees, accept Claude Code < 2.1.101, replace edited blocks"},
			&cli.BoolFlag{Name: "revoke", Usage: "with --remove: also revoke the member's credential on the node and delete its file"},
			&cli.BoolFlag{Name: "credential", Usage: "issue or reuse the member's (or lead's) own credential and write handlers that use it, never the node token (the hooks, MCP server and commands run on it; the sidecar does not yet); with --check: refuse (exit 2) a location whose sessions would hold the token"},
			jsonFlag(),
		}, initConnFlags()),
		Action: initClaude,
	}
}

// initConnFlags are connFlags for the operator's own connection: --creds
// reads no TEAMBUS_CREDS, which in the installer's terminal is the
// credential sessions started there use (what --check judges), not the
// operator's.
func initConnFlags() []cli.Flag {
	fs := connFlags()
	for i, f := range fs {
		if sf, ok := f.(*cli.StringFlag); ok && sf.Name == "creds" {
			c := *sf
			c.EnvVars = nil
			c.Usage = "the operator's NATS credentials `FILE` for an external bus (TEAMBUS_CREDS is not read here: it is the sessions' credential)"
			fs[i] = &c
		}
	}
	return fs
}

// wakeValue is the value of --wake: all (also --wake alone), directed, off.
type wakeValue struct{ mode initclaude.Wake }

func (w *wakeValue) String() string {
	if w == nil || w.mode == "" {
		return string(initclaude.WakeAll)
	}
	return string(w.mode)
}

func (w *wakeValue) Set(s string) error {
	switch s {
	case "true", "all":
		w.mode = initclaude.WakeAll
	case "directed":
		w.mode = initclaude.WakeDirected
	case "false", "off":
		w.mode = initclaude.WakeOff
	default:
		return fmt.Errorf("all, directed or off")
	}
	return nil
}

func (w *wakeValue) IsBoolFlag() bool { return true }
func (w *wakeValue) Get() any         { return w.mode }

// wakeFlag is --wake[=all|directed|off]: a flag that may stand alone like a
// bool (spec §12.2 `--wake|--no-wake`) and may carry a mode (§12.5.4
// `--wake=directed`).
type wakeFlag struct {
	*cli.BoolFlag
	val *wakeValue
}

func newWakeFlag() cli.Flag {
	return &wakeFlag{
		BoolFlag: &cli.BoolFlag{Name: "wake", Usage: "wake an idle session on new mail: --wake (all mail) or --wake=directed (mail to the member, not broadcasts)", DefaultText: "all"},
		val:      &wakeValue{},
	}
}

// Apply registers the flag with its own value.
func (f *wakeFlag) Apply(set *flag.FlagSet) error {
	for _, n := range f.Names() {
		set.Var(f.val, n, f.Usage)
	}
	return nil
}

func initClaude(c *cli.Context) error {
	if err := exactArgs(c, 0); err != nil {
		return err
	}
	o, err := initOptions(c)
	if err != nil {
		return err
	}
	var rep initclaude.Result
	switch {
	case c.Bool("check"):
		if rep, err = initclaude.Check(c.Context, o); err != nil {
			return err
		}
		if err := printInit(c, &rep); err != nil {
			return err
		}
		return checkExit(&rep)
	case c.Bool("remove"):
		rep, err = initclaude.Remove(c.Context, o)
	default:
		rep, err = initclaude.Install(c.Context, o)
	}
	if err != nil {
		return err
	}
	return printInit(c, &rep)
}

// initOptions reads and checks the flags of `init claude`.
func initOptions(c *cli.Context) (initclaude.InstallOptions, error) {
	var o initclaude.InstallOptions
	for _, pair := range [][2]string{{"check", "remove"}, {"check", "dry-run"}, {"wake", "no-wake"}, {"remove", "credential"}} {
		if c.IsSet(pair[0]) && c.IsSet(pair[1]) {
			return o, usageError(c, "--%s and --%s exclude each other", pair[0], pair[1])
		}
	}
	scope := initclaude.Scope(c.String("scope"))
	if c.IsSet("settings") {
		if c.IsSet("scope") {
			return o, usageError(c, "--settings FILE is a scope of its own: drop --scope")
		}
		scope = initclaude.ScopeSettings
	}
	switch scope {
	case initclaude.ScopeLocal, initclaude.ScopeProject, initclaude.ScopeUser, initclaude.ScopePlugin:
	case initclaude.ScopeSettings:
		if !c.IsSet("settings") {
			return o, usageError(c, "invalid --scope %q: use --settings FILE", c.String("scope"))
		}
	default:
		return o, usageError(c, "invalid --scope %q: local, project, user or plugin", c.String("scope"))
	}
	if c.Bool("revoke") && !c.Bool("remove") {
		return o, usageError(c, "--revoke goes with --remove")
	}
	if scope == initclaude.ScopePlugin && c.String("out") == "" {
		return o, usageError(c, "--scope plugin needs --out DIR")
	}
	if scope != initclaude.ScopePlugin && c.IsSet("out") {
		return o, usageError(c, "--out is for --scope plugin")
	}
	if scope == initclaude.ScopePlugin && c.Bool("claude-md") {
		return o, usageError(c, "--claude-md is not for a plugin (the plugin has the skill)")
	}
	team, member := c.String("team"), c.String("member")
	if c.Bool("lead") {
		if member != "" && member != teambus.Lead {
			return o, usageError(c, "--lead is member %s: drop --member %s", teambus.Lead, member)
		}
		if team == "" {
			return o, usageError(c, "--lead needs --team")
		}
		member = teambus.Lead
	}
	if (team == "") != (member == "") {
		return o, usageError(c, "--team and --member go together (or --lead --team T)")
	}
	if team != "" {
		if err := teambus.ValidateID("team", team); err != nil {
			return o, err
		}
		if err := teambus.ValidateID("member", member); err != nil {
			return o, err
		}
	}
	wake := initclaude.WakeAll
	if v, ok := c.Value("wake").(initclaude.Wake); ok && v != "" {
		wake = v
	}
	if c.Bool("no-wake") {
		wake = initclaude.WakeOff
	}
	cwd, err := os.Getwd()
	if err != nil {
		return o, fmt.Errorf("working directory: %w", err)
	}
	home, _ := os.UserHomeDir()
	claudeDir := os.Getenv("CLAUDE_CONFIG_DIR")
	if claudeDir == "" {
		if home == "" {
			return o, usageError(c, "no home directory: set HOME or CLAUDE_CONFIG_DIR")
		}
		claudeDir = filepath.Join(home, ".claude")
	}
	bin := c.String("bin")
	if bin != "" && bin != "teambus" && !filepath.IsAbs(bin) {
		a, err := filepath.Abs(bin)
		if err != nil {
			return o, usageError(c, "invalid --bin %q: %v", bin, err)
		}
		bin = a
	}
	return initclaude.InstallOptions{
		Env:   initclaude.Env{Cwd: cwd, Home: home, ClaudeDir: claudeDir},
		Scope: scope, Settings: c.String("settings"), Out: c.String("out"),
		Team: team, Member: member, Lead: member == teambus.Lead,
		Wake: wake, Autonomous: c.Bool("autonomous"), ShellForm: c.Bool("shell-form"),
		MCP: c.Bool("mcp"), ClaudeMD: c.Bool("claude-md"), Skill: c.Bool("skill"),
		Force: c.Bool("force"), DryRun: c.Bool("dry-run"),
		Bin: bin, Version: buildVersion(),
		Given:      c.IsSet,
		BakedBus:   func() (string, error) { return bakedBus(c) },
		BusNamed:   c.IsSet("dir") || c.IsSet("server"),
		DefaultBus: defaultDir(),
		OpenBus:    func(ctx context.Context) (initclaude.Bus, func(), error) { return openInitBus(c) },
		// A credential only when asked for: a session's sidecar does not
		// run on one yet.
		TokenHandlers: !c.Bool("credential"),
		Strict:        c.Bool("credential"),
		CredsDir:      initclaude.CredsDir(os.Getenv("XDG_CONFIG_HOME"), home),
		Revoke:        c.Bool("revoke"),
		ConnectCreds:  func(ctx context.Context, path string) error { return connectCreds(c, path) },
	}, nil
}

// printInit writes the report: JSON with --json, else lines.
func printInit(c *cli.Context, rep *initclaude.Result) error {
	w := c.App.Writer
	if c.Bool("json") {
		if rep.Files == nil {
			rep.Files = []initclaude.File{}
		}
		if rep.Warnings == nil {
			rep.Warnings = []string{}
		}
		return printJSON(w, rep)
	}
	for _, warn := range rep.Warnings {
		fmt.Fprintf(c.App.ErrWriter, "teambus: warning: %s\n", teambus.OneLine(warn, 400))
	}
	if rep.Action == "check" {
		return printCheck(w, rep)
	}
	who := "identity from TEAMBUS_TEAM/TEAMBUS_MEMBER"
	if rep.Identity != "" {
		who = "identity " + rep.Identity + " baked in"
	}
	if strings.HasSuffix(rep.Action, "remove") {
		who = "everything teambus wrote"
	}
	fmt.Fprintf(w, "teambus init claude (%s): %s scope, %s\n", rep.Action, rep.Scope, who)
	if cr := rep.Credential; cr != nil {
		line := fmt.Sprintf("  %-9s %s (credential of %s in team %s", cr.Action, cr.Path, cr.Member, cr.Team)
		switch {
		case cr.Reason != "":
			line += ": " + cr.Reason
		case cr.Action == "kept":
			line += ": --revoke also revokes it"
		}
		if strings.HasSuffix(cr.Action, "issued") || strings.HasSuffix(cr.Action, "reused") {
			if cr.Baked {
				line += "; the handlers name it"
			} else {
				line += "; sessions take it from TEAMBUS_CREDS"
			}
		}
		fmt.Fprintln(w, line+")")
	}
	if len(rep.Files) == 0 {
		fmt.Fprintln(w, "  nothing to do")
	}
	for _, f := range rep.Files {
		fmt.Fprintf(w, "  %-9s %s\n", f.Action, f.Path)
		if f.Diff != "" {
			io.WriteString(w, indentLines(f.Diff, "    "))
		}
	}
	for _, cmd := range rep.Ran {
		fmt.Fprintf(w, "  ran       %s\n", cmd)
	}
	for _, cmd := range rep.Commands {
		fmt.Fprintf(w, "run: %s\n", cmd)
	}
	if rep.Launch != "" && !strings.HasPrefix(rep.Action, "dry-run") {
		fmt.Fprintf(w, "start a member session: %s\n", rep.Launch)
	}
	return nil
}

// indentLines prefixes every line of s.
func indentLines(s, prefix string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			b.WriteString(prefix + l)
		}
	}
	return b.String()
}

// connectCreds connects with the member credential file at path (the bus
// it names, else the local node's URL) and closes the connection.
func connectCreds(c *cli.Context, path string) error {
	cfg, err := connConfig(c)
	if err != nil {
		return err
	}
	cfg.Creds, cfg.Token, cfg.User, cfg.Pass, cfg.InboxPrefix = path, "", "", "", ""
	cfg.Name = "teambus init claude (credential check)"
	ctx, cancel := context.WithTimeout(c.Context, cfg.Timeout)
	defer cancel()
	conn, err := bus.Connect(ctx, cfg)
	if err != nil {
		return err
	}
	conn.Close()
	return nil
}
