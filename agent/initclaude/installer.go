package initclaude

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/proc"
)

// InstallOptions is one `init claude` run once the command line is read
// and checked: where to install, for whom, and which choices were given.
// Install, Check and Remove take it.
type InstallOptions struct {
	// Env is where the user is: working directory, home, Claude Code's
	// configuration directory.
	Env Env
	// Scope is the scope to act on; ScopeSettings with Settings, the file,
	// and ScopePlugin with Out, the plugin's directory.
	Scope    Scope
	Settings string
	Out      string
	// Team and Member are the identity to install for (Member is
	// teambus.Lead with Lead); empty when the session takes it from its
	// environment. Both are valid ids.
	Team, Member string
	Lead         bool
	// Wake is the wake mode; "" is WakeAll.
	Wake       Wake
	Autonomous bool
	ShellForm  bool
	// MCP also registers the teambus MCP server; ClaudeMD and Skill also
	// write the CLAUDE.md block and the skill.
	MCP, ClaudeMD, Skill bool
	// Force bakes the identity with several worktrees, accepts an old
	// Claude Code and replaces edited blocks.
	Force  bool
	DryRun bool
	// Bin is the binary the handlers run: an absolute path, the bare
	// teambus, or "" for the default of the scope.
	Bin string
	// Version is teambus's version (the plugin's version).
	Version string
	// Given reports whether a choice was given explicitly, by its flag
	// name (bin, team, lead, wake, no-wake, autonomous, shell-form, scope,
	// settings, out); Check judges the scope asked for by the choices
	// given. Nil: none was.
	Given func(name string) bool
	// BakedBus returns the bus location baked into the handlers with the
	// identity: the state directory, or the server URL without
	// credentials.
	BakedBus func() (string, error)
	// BusNamed says the bus location was named explicitly (not the
	// default); DefaultBus is the default state directory.
	BusNamed   bool
	DefaultBus string
	// OpenBus connects to the bus as the operator (the node token) to
	// check that the team and member exist and to issue, check and revoke
	// credentials; the returned func closes the connection. Nil: the bus
	// is not asked.
	OpenBus func(ctx context.Context) (Bus, func(), error)
	// TokenHandlers writes handlers that reach the bus with the node
	// token (the bus location baked with the identity, no credential
	// issued): every session they start holds operator rights. It is
	// what `init claude` writes unless --credential is given, because a
	// session's sidecar (heartbeats, crash detection, zombie mode, the
	// relay) does not run on a credential yet. False: an install with an
	// identity issues or reuses the member's (or lead's) credential under
	// CredsDir and the handlers name that file.
	TokenHandlers bool
	// Strict refuses in Check (exit 2, with the fix) a location whose
	// sessions would hold the node token; otherwise that is a warning.
	Strict bool
	// CredsDir is where credentials are kept, one file per member:
	// CredsPath(CredsDir, team, member). See CredsDir.
	CredsDir string
	// Revoke, with Remove, also revokes the member's credential on the
	// node and deletes its file; without it both are left.
	Revoke bool
	// ConnectCreds connects to the bus with the credential file at path
	// and closes the connection: how an install run without the node
	// token (OpenBus fails) checks that the node accepts the file the
	// operator handed out. An error wrapping teambus.ErrInvalid says the
	// node refuses it. Nil: not available.
	ConnectCreds func(ctx context.Context, path string) error
}

// Bus is what Install, Check and Remove ask the bus. An error of Team or
// Member that wraps teambus.ErrNotFound says it does not exist; any other
// is no answer.
type Bus interface {
	Team(ctx context.Context, team string) error
	Member(ctx context.Context, team, member string) error
	// Servers are the bus URLs a credential issued now names (without
	// user or password).
	Servers() []string
	// Accepts reports whether the node accepts cr (its credential record
	// holds cr's password).
	Accepts(ctx context.Context, cr *bus.Creds) (bool, error)
	// Issue issues a new credential of member (replacing its password).
	Issue(ctx context.Context, team, member string, servers []string) (*bus.Creds, error)
	// Revoke revokes member's credential; revoking none is not an error.
	Revoke(ctx context.Context, team, member string) error
}

// Result is the report of a run, as `init claude --json` prints it.
type Result struct {
	Action    string     `json:"action"` // install, remove, dry-run …, check
	Scope     string     `json:"scope"`
	Settings  string     `json:"settings"`
	Identity  string     `json:"identity,omitempty"` // team/member when baked
	Files     []File     `json:"files"`
	Commands  []string   `json:"commands,omitempty"` // to run by hand
	Ran       []string   `json:"ran,omitempty"`      // claude commands run
	Launch    string     `json:"launch,omitempty"`
	Claude    string     `json:"claude_version,omitempty"`
	Warnings  []string   `json:"warnings"`
	Locations []Location `json:"locations,omitempty"`
	Status    Status     `json:"status,omitempty"`
	Bus       *BusCheck  `json:"bus,omitempty"`
	// Credential is the credential provisioned (install), kept or
	// revoked (remove).
	Credential *Credential `json:"credential,omitempty"`
	// Problem is what keeps Check from exiting 0 besides the handlers:
	// the bus does not answer, or the team or member is not on it;
	// ProblemExit is its exit code.
	Problem     string      `json:"problem,omitempty"`
	MCP         []MCPServer `json:"mcp,omitempty"`
	Options     Options     `json:"-"`
	ProblemExit int         `json:"-"`
	Detail      string      `json:"-"` // why Status, for Check
}

// File is one file a run wrote, would write (DryRun, with its diff) or
// backed up.
type File struct {
	Path   string `json:"path"`
	Action string `json:"action"`
	Diff   string `json:"diff,omitempty"`
}

// mode is what a run does.
type mode int

const (
	modeInstall mode = iota
	modeCheck
	modeRemove
)

// run is one Install, Check or Remove.
type run struct {
	ctx     context.Context
	in      InstallOptions
	mode    mode
	target  Target
	opts    Options
	claude  string // the claude binary, "" when not found
	version Version
	known   bool // version was found
	rep     Result
	// credsPath is the credential file of the identity given, when one
	// is provisioned (not TokenHandlers).
	credsPath string
	// tokenMCP is why a registered MCP server would hand the session the
	// node token (Check).
	tokenMCP string
}

// given reports whether the choice name was given explicitly.
func (r *run) given(name string) bool { return r.in.Given != nil && r.in.Given(name) }

// Install writes the teambus hooks (and with the options the MCP server,
// the CLAUDE.md block and the skill) into the target of o, or with DryRun
// shows the change. Result is what to report.
func Install(ctx context.Context, o InstallOptions) (Result, error) {
	r, err := newRun(ctx, o, modeInstall)
	if err != nil {
		return Result{}, err
	}
	if err := r.install(); err != nil {
		return Result{}, err
	}
	return r.rep, nil
}

// Remove takes out everything teambus wrote at the target of o, and the
// MCP server it registered, or with DryRun shows the change.
func Remove(ctx context.Context, o InstallOptions) (Result, error) {
	r, err := newRun(ctx, o, modeRemove)
	if err != nil {
		return Result{}, err
	}
	if err := r.remove(); err != nil {
		return Result{}, err
	}
	return r.rep, nil
}

// newRun resolves the target and the handler options of o.
func newRun(ctx context.Context, in InstallOptions, m mode) (*run, error) {
	r := &run{ctx: ctx, in: in, mode: m}
	scope := in.Scope
	var err error
	r.target, err = Resolve(ctx, in.Env, scope, in.Settings, in.Out)
	if err != nil {
		return nil, teambus.Invalidf("init claude: %w", err)
	}
	r.detectClaude()
	o := Options{
		Lead: in.Lead, Wake: in.Wake, Autonomous: in.Autonomous,
		ShellForm: in.ShellForm,
	}
	if o.Wake == WakeAll {
		o.Wake = ""
	}
	if r.known && r.version.Less(ExecFormClaude) && !o.ShellForm {
		o.ShellForm = true
		r.warn("Claude Code %s has no exec form (2.1.139): writing the shell form", r.version)
	}
	if r.known && r.version.Less(BatchClaude) {
		o.PostToolUse = true
	}
	if o.Autonomous && in.Lead {
		o.Autonomous = false
		r.warn("--autonomous is for teammates: the lead's Stop hook never blocks")
	}
	team, member := in.Team, in.Member
	if team != "" {
		switch {
		case r.target.MayBake:
			o.Team, o.Member = team, member
		case scope == ScopeLocal && in.Force:
			o.Team, o.Member = team, member
			r.warn("%d worktrees share %s: every worktree's session is %s/%s (--force)", r.target.Worktrees, r.target.Settings, team, member)
		case scope == ScopeLocal && m == modeInstall:
			return nil, teambus.Invalidf("init claude: the repository has %d worktrees and Claude Code reads %s from all of them, so a baked identity would be shared: use --scope project with TEAMBUS_TEAM=%s TEAMBUS_MEMBER=%s claude, or --settings FILE, or --force", r.target.Worktrees, r.target.Settings, team, member)
		}
	}
	if team != "" && !in.TokenHandlers {
		if in.CredsDir == "" || !filepath.IsAbs(in.CredsDir) {
			return nil, teambus.Invalidf("init claude: no directory for the credential: set XDG_CONFIG_HOME or HOME")
		}
		r.credsPath = CredsPath(in.CredsDir, team, member)
	}
	switch {
	case o.Team != "" && r.credsPath != "":
		// The credential file names the bus: a claude started from a
		// terminal without TEAMBUS_DIR (or TEAMBUS_SERVER) still
		// reaches it, and never with the node token.
		o.Creds = r.credsPath
	case o.Team != "" && in.BakedBus != nil:
		// Token handlers: the bus location goes with the identity.
		if o.Bus, err = in.BakedBus(); err != nil {
			return nil, err
		}
	}
	bin, err := r.bin()
	if err != nil {
		if m == modeInstall {
			return nil, err
		}
		bin = "teambus" // remove and check need no binary of their own
	}
	o.Bin = bin
	if err := o.Validate(); err != nil {
		return nil, teambus.Invalidf("init claude: %w", err)
	}
	r.opts = o
	r.rep = Result{Scope: string(scope), Settings: r.target.Settings, Warnings: r.rep.Warnings, Options: o}
	if scope == ScopePlugin {
		r.rep.Settings = r.target.Dir
	}
	if o.Team != "" {
		r.rep.Identity = o.Team + "/" + o.Member
	}
	if r.known {
		r.rep.Claude = r.version.String()
	}
	return r, nil
}

// bin is the binary the handlers run: InstallOptions.Bin, else for local
// and --settings the absolute path of teambus-client beside this binary
// when it is there, else of this binary; else the bare teambus.
func (r *run) bin() (string, error) {
	if b := r.in.Bin; b != "" {
		return b, nil
	}
	switch r.target.Scope {
	case ScopeLocal, ScopeSettings:
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
	case ClientBinary:
		return exe, nil
	case "teambus":
		// The client build beside it starts faster and makes smaller
		// sidecars: the handlers run it when it is there.
		if c := filepath.Join(filepath.Dir(exe), ClientBinary); proc.IsExecutable(c) {
			return c, nil
		}
		return exe, nil
	}
	return "", teambus.Invalidf("init claude: this binary is %s, not named teambus: pass --bin PATH of the teambus binary", exe)
}

// detectClaude finds the claude binary (TEAMBUS_CLAUDE_BIN, else claude on
// PATH) and its version (TEAMBUS_CLAUDE_VERSION, else `claude --version`).
func (r *run) detectClaude() {
	bin := os.Getenv("TEAMBUS_CLAUDE_BIN")
	if bin == "" {
		bin, _ = exec.LookPath("claude")
	} else if _, err := os.Stat(bin); err != nil {
		bin = ""
	}
	r.claude = bin
	if v := os.Getenv("TEAMBUS_CLAUDE_VERSION"); v != "" {
		r.version, r.known = ParseVersion(v)
		return
	}
	if bin == "" || r.mode == modeRemove {
		return // a removal does not depend on the version
	}
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		r.warn("%s --version failed: %v", bin, err)
		return
	}
	r.version, r.known = ParseVersion(string(out))
}

func (r *run) warn(format string, args ...any) {
	r.rep.Warnings = append(r.rep.Warnings, fmt.Sprintf(format, args...))
}

// install writes (or with DryRun shows) the installation.
func (r *run) install() error {
	if r.known && r.version.Less(MinClaude) && !r.in.Force {
		return teambus.Invalidf("init claude: Claude Code %s ignores a whole settings file naming an event it does not know (before 2.1.101): upgrade Claude Code, or pass --force", r.version)
	}
	if r.known && r.version.Less(PidClaude) {
		r.warn("Claude Code %s predates 2.1.214 (no CLAUDE_PID, no SessionStart fork): upgrade for reliable identity", r.version)
	}
	plan, err := PlanInstall(Config{
		Target: r.target, Options: r.opts, MCP: r.in.MCP,
		ClaudeMD: r.in.ClaudeMD, Skill: r.in.Skill, Force: r.in.Force,
		Version: r.in.Version,
	})
	if err != nil {
		return planError(err)
	}
	r.rep.Action = "install"
	r.rep.Warnings = append(r.rep.Warnings, plan.Warnings...)
	r.binWarnings()
	if r.target.Scope == ScopeLocal && len(plan.Changes) > 0 && plan.Changes[0].Old == nil && r.target.Worktrees > 0 &&
		!GitIgnored(r.ctx, r.target.Settings) {
		r.warn("%s is not ignored by git: add it to .gitignore (it is personal)", r.target.Settings)
	}
	if r.in.MCP && r.mcpByClaude() {
		r.registerMCP()
	}
	switch {
	case r.credsPath != "":
		// Checks the team and member, and issues or reuses the
		// credential the handlers name, before any file is written.
		if err := r.provision(); err != nil {
			return err
		}
	case r.in.Team != "":
		// A typo installs hooks that never bind: say so now.
		r.checkBus(nil)
	}
	if r.in.TokenHandlers && r.in.Team != "" {
		r.warn("the hooks reach the bus with the node token, so every session they start holds the operator's rights; --credential gives the sessions the credential of %s instead (its hooks, MCP server and commands run on it; its sidecar does not yet)", r.in.Member)
	}
	r.rep.Launch = r.launch()
	return r.finish(plan)
}

// remove takes the installation out (or shows it with DryRun).
func (r *run) remove() error {
	plan, err := PlanRemove(r.target)
	if err != nil {
		return planError(err)
	}
	r.rep.Action = "remove"
	r.rep.Warnings = append(r.rep.Warnings, plan.Warnings...)
	var have Options
	if data, err := os.ReadFile(r.target.Settings); err == nil {
		if inst, err := FindInstalled(data); err == nil {
			have = Infer(inst)
		}
	}
	if err := r.revokeCreds(have); err != nil {
		return err
	}
	// The MCP server teambus registered goes too, MCP or not.
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
	if errors.Is(err, ErrNotJSON) || errors.Is(err, ErrForeignEntry) {
		return teambus.Invalidf("init claude: %w; nothing was written", err)
	}
	return err
}

// finish applies the plan (unless DryRun) and completes the report.
func (r *run) finish(plan Plan) error {
	dry := r.in.DryRun
	if dry {
		r.rep.Action = "dry-run " + r.rep.Action
	}
	for _, ch := range plan.Changes {
		act := ch.Action()
		if act == Unchanged && ch.Old == nil {
			continue // nothing there, nothing to do
		}
		f := File{Path: ch.Path, Action: string(act)}
		if dry && act != Unchanged {
			f.Diff = Diff(ch.Path, ch.Old, ch.New)
		}
		r.rep.Files = append(r.rep.Files, f)
	}
	if !dry {
		if err := plan.Apply(); err != nil {
			return err
		}
		for _, ch := range plan.Changes {
			if ch.Backup && ch.Old != nil && ch.Action() != Unchanged {
				if _, err := os.Stat(ch.Path + BackupSuffix); err == nil {
					r.rep.Files = append(r.rep.Files, File{Path: ch.Path + BackupSuffix, Action: "backup"})
				}
			}
		}
		r.runCommands()
	}
	return nil
}

// mcpCommand records a claude command to run (or print).
func (r *run) mcpCommand(args []string) {
	r.rep.Commands = append(r.rep.Commands, strings.Join(append([]string{"claude"}, shellQuote(args)...), " "))
}

// runCommands runs the recorded claude commands when claude is installed;
// otherwise they stay in the report for the user to run.
func (r *run) runCommands() {
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
		ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
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
func (r *run) mcpByClaude() bool {
	return r.target.Scope != ScopeProject && r.target.Scope != ScopePlugin
}

// registration is the MCP server named teambus Claude Code has at the
// scope of the target, read from its state file.
func (r *run) registration() (Registration, bool) {
	data, err := os.ReadFile(ClaudeJSON(r.in.Env))
	if err != nil {
		return Registration{}, false
	}
	scope := ScopeUser
	if mcpScope(r.target.Scope) == "local" {
		scope = ScopeLocal
	}
	return FindRegistration(data, scope, r.mcpProjects()...)
}

// mcpProjects are the project keys Claude Code may file a local-scope
// server under: the worktree's root and the repository's main root.
func (r *run) mcpProjects() []string {
	ps := []string{r.target.ProjectRoot}
	if main := filepath.Dir(filepath.Dir(r.target.Settings)); r.target.Scope == ScopeLocal && main != r.target.ProjectRoot {
		ps = append(ps, main)
	}
	return ps
}

// registerMCP records the claude commands that make the teambus MCP
// server current at the scope: bound to the member and the bus the hooks
// are (MCPArgs); an older registration of teambus's is replaced, one of
// someone else is left alone.
func (r *run) registerMCP() {
	args := MCPArgs(r.opts)
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

func mcpScope(s Scope) string {
	if s == ScopeUser {
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
func (r *run) binWarnings() {
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
func (r *run) launch() string {
	team, member := r.in.Team, r.in.Member
	env := ""
	switch {
	case team != "" && r.opts.Team == "" && r.credsPath != "":
		env = "TEAMBUS_CREDS=" + shellQuote([]string{r.credsPath})[0] + " TEAMBUS_TEAM=" + team + " TEAMBUS_MEMBER=" + member + " "
	case team != "" && r.opts.Team == "":
		env = "TEAMBUS_TEAM=" + team + " TEAMBUS_MEMBER=" + member + " "
	case r.opts.Team == "":
		env = "TEAMBUS_CREDS=<file> TEAMBUS_TEAM=<team> TEAMBUS_MEMBER=<member> "
	}
	switch r.target.Scope {
	case ScopeSettings:
		return env + "claude --settings " + shellQuote([]string{r.target.Settings})[0]
	case ScopePlugin:
		return env + "claude --plugin-dir " + shellQuote([]string{r.target.Dir})[0]
	default:
		return env + "claude"
	}
}
