package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/agent/initclaude"
	"github.com/teambus/teambus/proc"
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
			"or --settings FILE (a standalone file for `claude --settings FILE`). The identity (--team/--member)\n" +
			"and the bus location (--bus: the state directory, or the --server URL without credentials) are baked\n" +
			"into the handlers, and the --mcp registration, only for --settings and for local in a repository with\n" +
			"one worktree; otherwise sessions take them from TEAMBUS_TEAM/TEAMBUS_MEMBER and TEAMBUS_DIR/\n" +
			"TEAMBUS_SERVER (the MCP server also from the session's hook binding). An install for a team or\n" +
			"member the bus does not have warns. --check exits 0 (current), 1 (outdated, or the bus does not\n" +
			"answer) or 2 (missing, or the team or member is not on the bus); --remove also removes the MCP\n" +
			"server init registered. Claude Code is found as $TEAMBUS_CLAUDE_BIN, else claude on PATH;\n" +
			"$TEAMBUS_CLAUDE_VERSION stands in for `claude --version`.",
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
			jsonFlag(),
		}, connFlags()),
		Action: initClaude,
	}
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

// initReport is what `init claude --json` prints.
type initReport struct {
	Action    string            `json:"action"` // install, remove, dry-run, check
	Scope     string            `json:"scope"`
	Settings  string            `json:"settings"`
	Identity  string            `json:"identity,omitempty"` // team/member when baked
	Files     []initFile        `json:"files"`
	Commands  []string          `json:"commands,omitempty"` // to run by hand
	Ran       []string          `json:"ran,omitempty"`      // claude commands run
	Launch    string            `json:"launch,omitempty"`
	Claude    string            `json:"claude_version,omitempty"`
	Warnings  []string          `json:"warnings"`
	Locations []checkLocation   `json:"locations,omitempty"`
	Status    initclaude.Status `json:"status,omitempty"`
	Bus       *checkBus         `json:"bus,omitempty"`
	// Problem is what keeps --check from exiting 0 besides the handlers:
	// the bus does not answer, or the team or member is not on it.
	Problem string             `json:"problem,omitempty"`
	MCP     []checkMCP         `json:"mcp,omitempty"`
	Options initclaude.Options `json:"-"`
}

type initFile struct {
	Path   string `json:"path"`
	Action string `json:"action"`
	Diff   string `json:"diff,omitempty"`
}

// initRun is one `init claude` run once its flags are read.
type initRun struct {
	c       *cli.Context
	env     initclaude.Env
	target  initclaude.Target
	opts    initclaude.Options
	claude  string // the claude binary, "" when not found
	version initclaude.Version
	known   bool // version was found
	rep     initReport
}

func initClaude(c *cli.Context) error {
	if err := exactArgs(c, 0); err != nil {
		return err
	}
	r := &initRun{c: c}
	if err := r.setup(); err != nil {
		return err
	}
	switch {
	case c.Bool("check"):
		return r.check()
	case c.Bool("remove"):
		return r.remove()
	default:
		return r.install()
	}
}

// setup reads and checks the flags and resolves the target.
func (r *initRun) setup() error {
	c := r.c
	for _, pair := range [][2]string{{"check", "remove"}, {"check", "dry-run"}, {"wake", "no-wake"}} {
		if c.IsSet(pair[0]) && c.IsSet(pair[1]) {
			return usageError(c, "--%s and --%s exclude each other", pair[0], pair[1])
		}
	}
	scope := initclaude.Scope(c.String("scope"))
	if c.IsSet("settings") {
		if c.IsSet("scope") {
			return usageError(c, "--settings FILE is a scope of its own: drop --scope")
		}
		scope = initclaude.ScopeSettings
	}
	switch scope {
	case initclaude.ScopeLocal, initclaude.ScopeProject, initclaude.ScopeUser, initclaude.ScopePlugin:
	case initclaude.ScopeSettings:
		if !c.IsSet("settings") {
			return usageError(c, "invalid --scope %q: use --settings FILE", c.String("scope"))
		}
	default:
		return usageError(c, "invalid --scope %q: local, project, user or plugin", c.String("scope"))
	}
	if scope == initclaude.ScopePlugin && c.String("out") == "" {
		return usageError(c, "--scope plugin needs --out DIR")
	}
	if scope != initclaude.ScopePlugin && c.IsSet("out") {
		return usageError(c, "--out is for --scope plugin")
	}
	if scope == initclaude.ScopePlugin && c.Bool("claude-md") {
		return usageError(c, "--claude-md is not for a plugin (the plugin has the skill)")
	}
	team, member := c.String("team"), c.String("member")
	if c.Bool("lead") {
		if member != "" && member != teambus.Lead {
			return usageError(c, "--lead is member %s: drop --member %s", teambus.Lead, member)
		}
		if team == "" {
			return usageError(c, "--lead needs --team")
		}
		member = teambus.Lead
	}
	if (team == "") != (member == "") {
		return usageError(c, "--team and --member go together (or --lead --team T)")
	}
	if team != "" {
		if err := teambus.ValidateID("team", team); err != nil {
			return err
		}
		if err := teambus.ValidateID("member", member); err != nil {
			return err
		}
	}
	lead := member == teambus.Lead
	wake := initclaude.WakeAll
	if v, ok := c.Value("wake").(initclaude.Wake); ok && v != "" {
		wake = v
	}
	if c.Bool("no-wake") {
		wake = initclaude.WakeOff
	}
	if wake == initclaude.WakeAll {
		wake = ""
	}
	cwd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	home, _ := os.UserHomeDir()
	claudeDir := os.Getenv("CLAUDE_CONFIG_DIR")
	if claudeDir == "" {
		if home == "" {
			return usageError(c, "no home directory: set HOME or CLAUDE_CONFIG_DIR")
		}
		claudeDir = filepath.Join(home, ".claude")
	}
	r.env = initclaude.Env{Cwd: cwd, Home: home, ClaudeDir: claudeDir}
	r.target, err = initclaude.Resolve(c.Context, r.env, scope, c.String("settings"), c.String("out"))
	if err != nil {
		return teambus.Invalidf("init claude: %w", err)
	}
	r.detectClaude()
	o := initclaude.Options{
		Lead: lead, Wake: wake, Autonomous: c.Bool("autonomous"),
		ShellForm: c.Bool("shell-form"),
	}
	if r.known && r.version.Less(initclaude.ExecFormClaude) && !o.ShellForm {
		o.ShellForm = true
		r.warn("Claude Code %s has no exec form (2.1.139): writing the shell form", r.version)
	}
	if r.known && r.version.Less(initclaude.BatchClaude) {
		o.PostToolUse = true
	}
	if o.Autonomous && lead {
		o.Autonomous = false
		r.warn("--autonomous is for teammates: the lead's Stop hook never blocks")
	}
	if team != "" {
		switch {
		case r.target.MayBake:
			o.Team, o.Member = team, member
		case scope == initclaude.ScopeLocal && c.Bool("force"):
			o.Team, o.Member = team, member
			r.warn("%d worktrees share %s: every worktree's session is %s/%s (--force)", r.target.Worktrees, r.target.Settings, team, member)
		case scope == initclaude.ScopeLocal && !c.Bool("check") && !c.Bool("remove"):
			return teambus.Invalidf("init claude: the repository has %d worktrees and Claude Code reads %s from all of them, so a baked identity would be shared: use --scope project with TEAMBUS_TEAM=%s TEAMBUS_MEMBER=%s claude, or --settings FILE, or --force", r.target.Worktrees, r.target.Settings, team, member)
		}
	}
	if o.Team != "" {
		// The bus location goes with the identity: a claude started from
		// a terminal without this TEAMBUS_DIR (or TEAMBUS_SERVER) still
		// reaches the bus.
		if o.Bus, err = bakedBus(c); err != nil {
			return err
		}
	}
	bin, err := r.bin()
	if err != nil {
		if !c.Bool("remove") && !c.Bool("check") {
			return err
		}
		bin = "teambus" // remove and check need no binary of their own
	}
	o.Bin = bin
	if err := o.Validate(); err != nil {
		return teambus.Invalidf("init claude: %w", err)
	}
	r.opts = o
	r.rep = initReport{Scope: string(scope), Settings: r.target.Settings, Warnings: r.rep.Warnings, Options: o}
	if scope == initclaude.ScopePlugin {
		r.rep.Settings = r.target.Dir
	}
	if o.Team != "" {
		r.rep.Identity = o.Team + "/" + o.Member
	}
	if r.known {
		r.rep.Claude = r.version.String()
	}
	return nil
}

// bin is the binary the handlers run: --bin, else for local and --settings
// the absolute path of teambus-client beside this binary when it is there,
// else of this binary; else the bare teambus.
func (r *initRun) bin() (string, error) {
	if b := r.c.String("bin"); b != "" {
		if b != "teambus" && !filepath.IsAbs(b) {
			a, err := filepath.Abs(b)
			if err != nil {
				return "", usageError(r.c, "invalid --bin %q: %v", b, err)
			}
			b = a
		}
		return b, nil
	}
	switch r.target.Scope {
	case initclaude.ScopeLocal, initclaude.ScopeSettings:
	default:
		return "teambus", nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find this binary: %w (pass --bin)", err)
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	switch filepath.Base(exe) {
	case initclaude.ClientBinary:
		return exe, nil
	case "teambus":
		// The client build beside it starts faster and makes smaller
		// sidecars: the handlers run it when it is there.
		if c := filepath.Join(filepath.Dir(exe), initclaude.ClientBinary); proc.IsExecutable(c) {
			return c, nil
		}
		return exe, nil
	}
	return "", teambus.Invalidf("init claude: this binary is %s, not named teambus: pass --bin PATH of the teambus binary", exe)
}

// detectClaude finds the claude binary (TEAMBUS_CLAUDE_BIN, else claude on
// PATH) and its version (TEAMBUS_CLAUDE_VERSION, else `claude --version`).
func (r *initRun) detectClaude() {
	bin := os.Getenv("TEAMBUS_CLAUDE_BIN")
	if bin == "" {
		bin, _ = exec.LookPath("claude")
	} else if _, err := os.Stat(bin); err != nil {
		bin = ""
	}
	r.claude = bin
	if v := os.Getenv("TEAMBUS_CLAUDE_VERSION"); v != "" {
		r.version, r.known = initclaude.ParseVersion(v)
		return
	}
	if bin == "" || r.c.Bool("remove") {
		return // a removal does not depend on the version
	}
	ctx, cancel := context.WithTimeout(r.c.Context, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		r.warn("%s --version failed: %v", bin, err)
		return
	}
	r.version, r.known = initclaude.ParseVersion(string(out))
}

func (r *initRun) warn(format string, args ...any) {
	r.rep.Warnings = append(r.rep.Warnings, fmt.Sprintf(format, args...))
}

// install writes (or with --dry-run shows) the installation.
func (r *initRun) install() error {
	c := r.c
	if r.known && r.version.Less(initclaude.MinClaude) && !c.Bool("force") {
		return teambus.Invalidf("init claude: Claude Code %s ignores a whole settings file naming an event it does not know (before 2.1.101): upgrade Claude Code, or pass --force", r.version)
	}
	if r.known && r.version.Less(initclaude.PidClaude) {
		r.warn("Claude Code %s predates 2.1.214 (no CLAUDE_PID, no SessionStart fork): upgrade for reliable identity", r.version)
	}
	plan, err := initclaude.PlanInstall(initclaude.Config{
		Target: r.target, Options: r.opts, MCP: c.Bool("mcp"),
		ClaudeMD: c.Bool("claude-md"), Skill: c.Bool("skill"), Force: c.Bool("force"),
		Version: buildVersion(),
	})
	if err != nil {
		return planError(err)
	}
	r.rep.Action = "install"
	r.rep.Warnings = append(r.rep.Warnings, plan.Warnings...)
	r.binWarnings()
	if r.target.Scope == initclaude.ScopeLocal && len(plan.Changes) > 0 && plan.Changes[0].Old == nil && r.target.Worktrees > 0 &&
		!initclaude.GitIgnored(c.Context, r.target.Settings) {
		r.warn("%s is not ignored by git: add it to .gitignore (it is personal)", r.target.Settings)
	}
	if c.Bool("mcp") && r.mcpByClaude() {
		r.registerMCP()
	}
	if c.String("team") != "" {
		// A typo installs hooks that never bind: say so now.
		r.checkBus(nil)
	}
	r.rep.Launch = r.launch()
	return r.finish(plan)
}

// remove takes the installation out (or shows it with --dry-run).
func (r *initRun) remove() error {
	plan, err := initclaude.PlanRemove(r.target)
	if err != nil {
		return planError(err)
	}
	r.rep.Action = "remove"
	r.rep.Warnings = append(r.rep.Warnings, plan.Warnings...)
	// The MCP server teambus registered goes too, --mcp or not.
	if r.mcpByClaude() {
		if reg, ok := r.registration(); ok && reg.Owned() {
			r.mcpCommand([]string{"mcp", "remove", "--scope", mcpScope(r.target.Scope), "teambus"})
		} else if ok {
			r.warn("the MCP server named teambus (%s) was not registered by teambus: left as it is", reg.Command)
		}
	}
	return r.finish(plan)
}

// planError classifies a planning error: a file teambus will not edit is
// bad input (exit 2).
func planError(err error) error {
	if errors.Is(err, initclaude.ErrNotJSON) || errors.Is(err, initclaude.ErrForeignEntry) {
		return teambus.Invalidf("init claude: %w; nothing was written", err)
	}
	return err
}

// finish applies the plan (unless --dry-run) and prints the report.
func (r *initRun) finish(plan initclaude.Plan) error {
	dry := r.c.Bool("dry-run")
	if dry {
		r.rep.Action = "dry-run " + r.rep.Action
	}
	for _, ch := range plan.Changes {
		act := ch.Action()
		if act == initclaude.Unchanged && ch.Old == nil {
			continue // nothing there, nothing to do
		}
		f := initFile{Path: ch.Path, Action: string(act)}
		if dry && act != initclaude.Unchanged {
			f.Diff = initclaude.Diff(ch.Path, ch.Old, ch.New)
		}
		r.rep.Files = append(r.rep.Files, f)
	}
	if !dry {
		if err := plan.Apply(); err != nil {
			return err
		}
		for _, ch := range plan.Changes {
			if ch.Backup && ch.Old != nil && ch.Action() != initclaude.Unchanged {
				if _, err := os.Stat(ch.Path + initclaude.BackupSuffix); err == nil {
					r.rep.Files = append(r.rep.Files, initFile{Path: ch.Path + initclaude.BackupSuffix, Action: "backup"})
				}
			}
		}
		r.runCommands()
	}
	return r.print()
}

// mcpCommand records a claude command to run (or print).
func (r *initRun) mcpCommand(args []string) {
	r.rep.Commands = append(r.rep.Commands, strings.Join(append([]string{"claude"}, shellQuote(args)...), " "))
}

// runCommands runs the recorded claude commands when claude is installed;
// otherwise they stay in the report for the user to run.
func (r *initRun) runCommands() {
	if r.claude == "" || len(r.rep.Commands) == 0 {
		if len(r.rep.Commands) > 0 {
			r.warn("claude is not on PATH: run the command(s) below yourself")
		}
		return
	}
	var left []string
	for _, line := range r.rep.Commands {
		args := strings.Fields(line)[1:]
		for i, a := range args {
			args[i] = strings.Trim(a, "'")
		}
		ctx, cancel := context.WithTimeout(r.c.Context, 30*time.Second)
		out, err := exec.CommandContext(ctx, r.claude, args...).CombinedOutput()
		cancel()
		if err != nil && !bytes.Contains(out, []byte("already exists")) && !bytes.Contains(out, []byte("No MCP server")) {
			r.warn("%s failed: %v: %s", line, err, strings.TrimSpace(string(out)))
			left = append(left, line)
			continue
		}
		r.rep.Ran = append(r.rep.Ran, line)
	}
	r.rep.Commands = left
}

// mcpByClaude says whether the scope's MCP server is registered with
// `claude mcp add` (local, user, --settings) rather than written into a
// file (.mcp.json of the project, the plugin).
func (r *initRun) mcpByClaude() bool {
	return r.target.Scope != initclaude.ScopeProject && r.target.Scope != initclaude.ScopePlugin
}

// registration is the MCP server named teambus Claude Code has at the
// scope of the target, read from its state file.
func (r *initRun) registration() (initclaude.Registration, bool) {
	data, err := os.ReadFile(initclaude.ClaudeJSON(r.env))
	if err != nil {
		return initclaude.Registration{}, false
	}
	scope := initclaude.ScopeUser
	if mcpScope(r.target.Scope) == "local" {
		scope = initclaude.ScopeLocal
	}
	return initclaude.FindRegistration(data, scope, r.mcpProjects()...)
}

// mcpProjects are the project keys Claude Code may file a local-scope
// server under: the worktree's root and the repository's main root.
func (r *initRun) mcpProjects() []string {
	ps := []string{r.target.ProjectRoot}
	if main := filepath.Dir(filepath.Dir(r.target.Settings)); r.target.Scope == initclaude.ScopeLocal && main != r.target.ProjectRoot {
		ps = append(ps, main)
	}
	return ps
}

// registerMCP records the claude commands that make the teambus MCP
// server current at the scope: bound to the member and the bus the hooks
// are (MCPArgs); an older registration of teambus's is replaced, one of
// someone else is left alone.
func (r *initRun) registerMCP() {
	args := initclaude.MCPArgs(r.opts)
	scope := mcpScope(r.target.Scope)
	reg, ok := r.registration()
	switch {
	case ok && !reg.Owned():
		r.warn("an MCP server named teambus that teambus did not register is there (%s): left as it is; remove it with `claude mcp remove --scope %s teambus` and rerun", reg.Command, scope)
		return
	case ok && reg.Same(r.opts.Bin, args):
		return
	case ok:
		r.mcpCommand([]string{"mcp", "remove", "--scope", scope, "teambus"})
	}
	r.mcpCommand(append([]string{"mcp", "add", "--scope", scope, "teambus", "--", r.opts.Bin}, args...))
}

func mcpScope(s initclaude.Scope) string {
	if s == initclaude.ScopeUser {
		return "user"
	}
	return "local"
}

// shellQuote quotes args that a shell would split.
func shellQuote(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"$`\\|&;<>()*?[]#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return out
}

// binWarnings warns when the handlers' binary can not be run.
func (r *initRun) binWarnings() {
	bin := r.opts.Bin
	if bin == "teambus" {
		if _, err := exec.LookPath("teambus"); err != nil {
			r.warn("teambus is not on PATH: Claude Code runs the bare `teambus` in this scope; install it on PATH")
		}
		return
	}
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		r.warn("%s is not an executable file: the hooks would not run", bin)
	}
}

// launch is the command line that starts a member session after install.
func (r *initRun) launch() string {
	team, member := r.c.String("team"), r.c.String("member")
	if r.opts.Lead {
		member = teambus.Lead
	}
	env := ""
	if team != "" && r.opts.Team == "" {
		env = "TEAMBUS_TEAM=" + team + " TEAMBUS_MEMBER=" + member + " "
	} else if r.opts.Team == "" {
		env = "TEAMBUS_TEAM=<team> TEAMBUS_MEMBER=<member> "
	}
	switch r.target.Scope {
	case initclaude.ScopeSettings:
		return env + "claude --settings " + shellQuote([]string{r.target.Settings})[0]
	case initclaude.ScopePlugin:
		return env + "claude --plugin-dir " + shellQuote([]string{r.target.Dir})[0]
	default:
		return env + "claude"
	}
}

// print writes the report: JSON with --json, else lines.
func (r *initRun) print() error {
	w := r.c.App.Writer
	if r.c.Bool("json") {
		if r.rep.Files == nil {
			r.rep.Files = []initFile{}
		}
		if r.rep.Warnings == nil {
			r.rep.Warnings = []string{}
		}
		return printJSON(w, r.rep)
	}
	for _, warn := range r.rep.Warnings {
		fmt.Fprintf(r.c.App.ErrWriter, "teambus: warning: %s\n", teambus.OneLine(warn, 400))
	}
	if r.rep.Action == "check" {
		return r.printCheck(w)
	}
	who := "identity from TEAMBUS_TEAM/TEAMBUS_MEMBER"
	if r.rep.Identity != "" {
		who = "identity " + r.rep.Identity + " baked in"
	}
	if strings.HasSuffix(r.rep.Action, "remove") {
		who = "everything teambus wrote"
	}
	fmt.Fprintf(w, "teambus init claude (%s): %s scope, %s\n", r.rep.Action, r.rep.Scope, who)
	if len(r.rep.Files) == 0 {
		fmt.Fprintln(w, "  nothing to do")
	}
	for _, f := range r.rep.Files {
		fmt.Fprintf(w, "  %-9s %s\n", f.Action, f.Path)
		if f.Diff != "" {
			io.WriteString(w, indentLines(f.Diff, "    "))
		}
	}
	for _, cmd := range r.rep.Ran {
		fmt.Fprintf(w, "  ran       %s\n", cmd)
	}
	for _, cmd := range r.rep.Commands {
		fmt.Fprintf(w, "run: %s\n", cmd)
	}
	if r.rep.Launch != "" && !strings.HasPrefix(r.rep.Action, "dry-run") {
		fmt.Fprintf(w, "start a member session: %s\n", r.rep.Launch)
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
