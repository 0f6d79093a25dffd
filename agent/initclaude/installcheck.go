package initclaude

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/teambus/teambus"
)

// Location is one place teambus hooks may be installed, as Check reports
// it.
type Location struct {
	Scope    string `json:"scope"`
	Path     string `json:"path"`
	Status   Status `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Identity string `json:"identity,omitempty"`
	Bin      string `json:"bin,omitempty"`
	// Bus is the bus location baked into the handlers (--bus); empty: the
	// handlers reach the bus of the terminal claude is started from.
	Bus string `json:"bus,omitempty"`
	// Credential is what the handlers connect with, and what is wrong
	// with it; nil where there are none.
	Credential *CredUse `json:"credential,omitempty"`
	sig        []string
}

// BusCheck is the bus part of Check.
type BusCheck struct {
	Answers      bool   `json:"answers"`
	Team         string `json:"team,omitempty"`
	TeamExists   bool   `json:"team_exists"`
	Member       string `json:"member,omitempty"`
	MemberExists bool   `json:"member_exists"`
	Error        string `json:"error,omitempty"`
}

// MCPServer is one MCP server named teambus registered with Claude Code
// (`claude mcp add`), as Check reports it.
type MCPServer struct {
	Scope   string   `json:"scope"`
	Project string   `json:"project,omitempty"`
	Command string   `json:"command"`
	Args    []string `json:"args"`
	Owned   bool     `json:"owned"`
	// Identity is the team/member baked into it; empty: the server takes
	// the session's hook binding.
	Identity string `json:"identity,omitempty"`
	// Creds is the credential file baked into it (--creds).
	Creds string `json:"creds,omitempty"`
}

// Check reports what is installed where and what is wrong: Result.Status
// is the status of the scope asked for (a Scope, Settings or Out given),
// else the worst installed one, with Result.Detail; Result.Problem and
// Result.ProblemExit say why handlers that are there would not bind.
func Check(ctx context.Context, o InstallOptions) (Result, error) {
	r, err := newRun(ctx, o, modeCheck)
	if err != nil {
		return Result{}, err
	}
	r.check()
	return r.rep, nil
}

// check implements Check.
func (r *run) check() {
	r.rep.Action = "check"
	var locs []Location
	add := func(scope Scope, path string, plugin bool) {
		locs = append(locs, r.inspect(scope, path, plugin))
	}
	for _, s := range []Scope{ScopeUser, ScopeProject, ScopeLocal} {
		t, err := Resolve(r.ctx, r.in.Env, s, "", "")
		if err == nil {
			add(s, t.Settings, false)
		}
	}
	if r.target.Scope == ScopeSettings {
		add(ScopeSettings, r.target.Settings, false)
	}
	plugins := FindPlugins(filepath.Join(r.in.Env.ClaudeDir, "plugins"))
	if r.target.Scope == ScopePlugin {
		plugins = append([]string{r.target.Dir}, plugins...)
	}
	seen := map[string]bool{}
	for _, d := range plugins {
		if !seen[d] {
			seen[d] = true
			add(ScopePlugin, d, true)
		}
	}
	r.rep.Locations = locs

	// Handlers that would fire twice.
	var settings, plugs []Location
	for _, l := range locs {
		if l.Status == StatusMissing || l.Status == "" {
			continue
		}
		if l.Scope == string(ScopePlugin) {
			plugs = append(plugs, l)
		} else {
			settings = append(settings, l)
		}
	}
	for i := 0; i < len(settings); i++ {
		for j := i + 1; j < len(settings); j++ {
			a, b := settings[i], settings[j]
			if strings.Join(a.sig, "\n") != strings.Join(b.sig, "\n") {
				r.warn("teambus hooks in %s and %s differ: a session that loads both runs both (double delivery, two sidecars); keep one (`init claude --scope %s --remove`)", a.Path, b.Path, b.Scope)
			}
		}
	}
	if len(plugs) > 0 && len(settings) > 0 {
		r.warn("a teambus plugin (%s) and teambus hooks in %s both fire: a plugin's copy is not merged with settings; remove one", plugs[0].Path, settings[0].Path)
	}
	if len(plugs) > 1 {
		r.warn("%d teambus plugins found: each fires its own hooks", len(plugs))
	}

	// Claude Code itself.
	switch {
	case r.claude == "" && !r.known:
		r.warn("claude is not on PATH: version not checked")
	case r.known && r.version.Less(MinClaude):
		r.warn("Claude Code %s ignores a whole settings file naming an event it does not know (before 2.1.101): upgrade", r.version)
	case r.known && r.version.Less(PidClaude):
		r.warn("Claude Code %s predates 2.1.214 (no CLAUDE_PID, no SessionStart fork): upgrade for reliable identity", r.version)
	}
	bare := false
	for _, l := range locs {
		bare = bare || l.Bin == "teambus" || (l.Scope == string(ScopePlugin) && l.Status != StatusMissing)
	}
	if _, err := exec.LookPath("teambus"); err != nil && bare {
		r.warn("teambus is not on PATH, and installed hooks run the bare `teambus`")
	}

	r.checkMCP(locs)
	r.checkBus(locs)
	r.checkReach(locs)

	// The status: the one asked for, else the worst installed one.
	status := StatusMissing
	detail := "teambus hooks are not installed anywhere (run `teambus init claude`)"
	explicit := r.given("scope") || r.given("settings") || r.given("out")
	for _, l := range locs {
		if explicit {
			if l.Path == r.rep.Settings {
				status, detail = l.Status, l.Path+": "+l.Detail
			}
			continue
		}
		switch {
		case l.Status == StatusOutdated:
			status, detail = l.Status, l.Path+": "+l.Detail
		case l.Status == StatusCurrent && status == StatusMissing:
			status, detail = l.Status, ""
		}
	}
	r.rep.Status, r.rep.Detail = status, detail
	r.rep.ProblemExit = teambus.ExitOK
	if status != StatusMissing {
		// Handlers that are there but would not bind are not current.
		r.rep.ProblemExit, r.rep.Problem = r.rep.Bus.problem()
	}
	// A session that would hold the node token is refused whatever the
	// rest says: the first such location, with its fix.
	for _, l := range locs {
		if u := l.Credential; u != nil && u.Problem != "" {
			r.rep.ProblemExit, r.rep.Problem = teambus.ExitPermanent, u.Problem+"; fix: "+u.Fix
			break
		}
	}
	if r.rep.Problem == "" && r.tokenMCP != "" {
		r.rep.ProblemExit, r.rep.Problem = teambus.ExitPermanent, r.tokenMCP
	}
	if p := r.tokenInEnv(); p != "" && status != StatusMissing && r.rep.ProblemExit != teambus.ExitPermanent {
		r.rep.ProblemExit, r.rep.Problem = teambus.ExitPermanent, p
	}
}

// problem is why hooks that are installed would not bind, with the exit
// code of Check: 1 when the bus does not answer (start it, then check
// again), 2 when the team or member is not on it (create it, or fix the
// identity); 0 and "" when neither, or when there is no team to check.
func (b *BusCheck) problem() (int, string) {
	switch {
	case b == nil:
		return teambus.ExitOK, ""
	case !b.Answers:
		return teambus.ExitTransient, fmt.Sprintf("the bus does not answer (%s): sessions would not bind; start it (`teambus bus start`) or point TEAMBUS_DIR/TEAMBUS_SERVER at it", b.Error)
	case b.Team == "":
		return teambus.ExitOK, ""
	case !b.TeamExists:
		return teambus.ExitPermanent, fmt.Sprintf("team %s is not on the bus: sessions would not bind; create it (`teambus team create %s --member ...`) or fix --team", b.Team, b.Team)
	case b.Member != "" && !b.MemberExists:
		return teambus.ExitPermanent, fmt.Sprintf("team %s has no member %s: sessions would not bind; add the member or fix --member", b.Team, b.Member)
	}
	return teambus.ExitOK, ""
}

// inspect reads one location and compares its teambus handlers with what
// init would write there.
func (r *run) inspect(scope Scope, path string, plugin bool) Location {
	l := Location{Scope: string(scope), Path: path}
	file := path
	if plugin {
		file = filepath.Join(path, PluginHooks)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		l.Status, l.Detail = StatusMissing, "no file"
		if !errors.Is(err, os.ErrNotExist) {
			l.Detail = err.Error()
		}
		return l
	}
	inst, err := FindInstalled(data)
	if err != nil {
		l.Status, l.Detail = StatusOutdated, err.Error()
		r.warn("%s: %v (Claude Code may ignore it)", file, err)
		return l
	}
	if len(inst) == 0 {
		l.Status, l.Detail = StatusMissing, "no teambus handlers"
		return l
	}
	l.sig = Signature(inst)
	want := r.expected(scope, Infer(inst))
	l.Bin, l.Bus = Infer(inst).Bin, Infer(inst).Bus
	if want.Team != "" {
		l.Identity = want.Team + "/" + want.Member
	}
	st, detail, err := Compare(data, Handlers(want))
	if err != nil {
		l.Status, l.Detail = StatusOutdated, err.Error()
		return l
	}
	l.Status, l.Detail = st, detail
	l.Credential = r.judgeCreds(scope, path, file, inst, settingsEnv(data))
	if have := Infer(inst); have.Bin != "teambus" {
		if fi, err := os.Stat(have.Bin); err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			r.warn("%s: the hooks run %s, which is not an executable file", file, have.Bin)
			if l.Status == StatusCurrent {
				l.Status, l.Detail = StatusOutdated, have.Bin+" is not an executable file: rerun init claude (or pass --bin)"
			}
		}
	}
	return l
}

// expected is what init would write at a location of scope, given what is
// installed there: for the scope asked for, choices given to Check win;
// the rest is inferred (the binary too: a binary that does not exist makes
// the location outdated).
func (r *run) expected(scope Scope, have Options) Options {
	o := have
	if scope != r.target.Scope {
		// The choices describe the scope asked for (default local);
		// other locations are judged by what they hold.
		if r.known {
			o.PostToolUse = r.opts.PostToolUse
		}
		return o
	}
	if r.given("bin") {
		o.Bin = r.opts.Bin
	}
	if r.given("team") || r.given("lead") {
		mayBake := scope == ScopeSettings || (scope == ScopeLocal && (r.localMayBake() || r.in.Force))
		o.Team, o.Member, o.Bus, o.Creds, o.Lead = "", "", "", "", r.opts.Lead
		if mayBake {
			o.Team, o.Member, o.Bus, o.Creds = r.in.Team, r.in.Member, r.opts.Bus, r.opts.Creds
		}
	}
	if r.given("wake") || r.given("no-wake") {
		o.Wake = r.opts.Wake
	}
	if r.given("autonomous") {
		o.Autonomous = r.opts.Autonomous
	}
	if r.given("shell-form") || r.known {
		o.ShellForm = r.opts.ShellForm
	}
	if r.known {
		o.PostToolUse = r.opts.PostToolUse
	}
	if scope == ScopePlugin {
		o.Bin, o.Team, o.Member, o.Bus, o.Creds = "teambus", "", "", "", ""
	}
	return o
}

// localMayBake reports whether the local scope may bake an identity here.
func (r *run) localMayBake() bool {
	t, err := Resolve(r.ctx, r.in.Env, ScopeLocal, "", "")
	return err == nil && t.MayBake
}

// checkBus checks that the bus answers and that the team and member exist:
// from the options, else the identity installed, else
// TEAMBUS_TEAM/MEMBER.
func (r *run) checkBus(locs []Location) {
	team, member := r.in.Team, r.in.Member
	for _, l := range locs {
		if team == "" && l.Identity != "" {
			team, member, _ = strings.Cut(l.Identity, "/")
		}
	}
	if team == "" {
		team, member = os.Getenv("TEAMBUS_TEAM"), os.Getenv("TEAMBUS_MEMBER")
	}
	for _, l := range locs {
		if u := l.Credential; team == "" && u != nil && u.Team != "" {
			team, member = u.Team, u.Member
		}
	}
	b := &BusCheck{Team: team, Member: member}
	r.rep.Bus = b
	if r.in.OpenBus == nil {
		b.Error = "no bus to ask"
		r.warn("the bus does not answer: %s", b.Error)
		return
	}
	bus, done, err := r.in.OpenBus(r.ctx)
	if err != nil {
		b.Error = teambus.OneLine(err.Error(), 300)
		if r.checkByConnecting(b, locs) {
			return
		}
		r.warn("the bus does not answer: %s", b.Error)
		return
	}
	defer done()
	b.Answers = true
	r.checkAccepted(bus, locs)
	if team == "" {
		return
	}
	if err := teambus.ValidateID("team", team); err != nil {
		b.Error = err.Error()
		r.warn("%s", err.Error())
		return
	}
	if err := bus.Team(r.ctx, team); err != nil {
		b.Error = teambus.OneLine(err.Error(), 300)
		if !errors.Is(err, teambus.ErrNotFound) {
			// Not an answer about the team: count it as no answer.
			b.Answers = false
			r.warn("the bus does not answer about team %s: %s", team, b.Error)
			return
		}
		r.warn("team %s is not on the bus (%s): sessions would not bind; create it with `teambus team create %s` or fix --team", team, b.Error, team)
		return
	}
	b.TeamExists = true
	if member == "" || member == teambus.Lead {
		b.MemberExists = member == teambus.Lead
		return
	}
	if err := bus.Member(r.ctx, team, member); err != nil {
		b.Error = teambus.OneLine(err.Error(), 300)
		if !errors.Is(err, teambus.ErrNotFound) {
			b.Answers = false
			r.warn("the bus does not answer about member %s: %s", member, b.Error)
			return
		}
		r.warn("team %s has no member %s (%s): sessions would not bind; add the member or fix --member", team, member, b.Error)
		return
	}
	b.MemberExists = true
}

// checkReach says which terminals the installed hooks will not reach the
// bus from: handlers without a baked bus location use the TEAMBUS_DIR or
// TEAMBUS_SERVER of the terminal claude is started from.
func (r *run) checkReach(locs []Location) {
	if r.in.BakedBus == nil {
		return
	}
	here, err := r.in.BakedBus()
	if err != nil {
		return
	}
	for _, l := range locs {
		if l.Status == StatusMissing || l.Status == "" || l.Bus != "" {
			continue
		}
		if u := l.Credential; u != nil && u.creds != nil && len(u.creds.Servers) > 0 {
			continue // the credential names the bus
		}
		if r.in.BusNamed && here != r.in.DefaultBus {
			r.warn("the hooks in %s carry no bus location: a claude started from a terminal without TEAMBUS_DIR or TEAMBUS_SERVER naming %s uses %s instead and does not reach this bus", l.Path, here, r.in.DefaultBus)
		}
	}
}

// checkMCP reports the teambus MCP servers Claude Code has registered at
// the user scope and for this project, and warns when one acts for
// another member than the hooks installed here.
func (r *run) checkMCP(locs []Location) {
	data, err := os.ReadFile(ClaudeJSON(r.in.Env))
	if err != nil {
		return
	}
	local, _ := Resolve(r.ctx, r.in.Env, ScopeLocal, "", "")
	projects := []string{local.ProjectRoot, filepath.Dir(filepath.Dir(local.Settings))}
	for _, scope := range []Scope{ScopeUser, ScopeLocal} {
		reg, ok := FindRegistration(data, scope, projects...)
		if !ok {
			continue
		}
		m := MCPServer{Scope: string(scope), Project: reg.Project, Command: reg.Command, Args: reg.Args, Owned: reg.Owned()}
		var team, member, secret string
		for i, a := range reg.Args {
			switch {
			case a == "--team" && i+1 < len(reg.Args):
				team = reg.Args[i+1]
			case a == "--member" && i+1 < len(reg.Args):
				member = reg.Args[i+1]
			case a == "--creds" && i+1 < len(reg.Args):
				m.Creds = reg.Args[i+1]
			case a == "--token" || strings.HasPrefix(a, "--token=") || a == "--password" || strings.HasPrefix(a, "--password="):
				secret = strings.SplitN(a, "=", 2)[0]
			}
		}
		if team != "" {
			m.Identity = team + "/" + member
		}
		fix := fmt.Sprintf("`teambus init claude --credential --team %s --member %s --mcp` (at the %s scope: `claude mcp remove --scope %s teambus` first)", orPlaceholder(team, "<team>"), orPlaceholder(member, "<member>"), scope, scope)
		switch {
		case !m.Owned || r.tokenMCP != "":
		case secret != "":
			r.tokenMCP = fmt.Sprintf("the teambus MCP server at the %s scope carries a secret on its command line (%s); fix: %s", scope, secret, fix)
		case team != "" && m.Creds == "" && !r.in.Strict:
			r.warn("the teambus MCP server at the %s scope acts as %s/%s with the node token (with --credential: %s)", scope, team, member, strings.Trim(fix, "`"))
		case team != "" && m.Creds == "":
			r.tokenMCP = fmt.Sprintf("the teambus MCP server at the %s scope acts as %s/%s with the node token: every session holds the operator's rights; fix: %s", scope, team, member, fix)
		}
		if !m.Owned {
			r.warn("the MCP server named teambus at the %s scope runs %s, not teambus mcp", scope, reg.Command)
		} else if _, err := os.Stat(reg.Command); err != nil && reg.Command != "teambus" {
			r.warn("the teambus MCP server at the %s scope runs %s, which is not there: rerun init claude --mcp", scope, reg.Command)
		}
		for _, l := range locs {
			if m.Owned && m.Identity != "" && l.Identity != "" && l.Identity != m.Identity {
				r.warn("the teambus MCP server at the %s scope acts as %s, the hooks in %s as %s: rerun init claude --mcp with the same identity", scope, m.Identity, l.Path, l.Identity)
			}
		}
		r.rep.MCP = append(r.rep.MCP, m)
	}
}

// orPlaceholder is s, or p when s is empty.
func orPlaceholder(s, p string) string {
	if s == "" {
		return p
	}
	return s
}

// checkAccepted asks the node whether it accepts the credential each
// location's handlers use; one it refuses (revoked, or issued again since)
// is a problem with the fix of its location.
func (r *run) checkAccepted(b Bus, locs []Location) {
	for _, l := range locs {
		u := l.Credential
		if u == nil || u.creds == nil || u.Problem != "" || l.Status == StatusMissing {
			continue
		}
		ok, err := b.Accepts(r.ctx, u.creds)
		switch {
		case err != nil:
			r.warn("the bus does not answer whether it accepts the credential %s: %s", u.Path, teambus.OneLine(err.Error(), 300))
		case !ok:
			u.Problem, u.Fix = fmt.Sprintf("the node does not accept the credential %s of %s/%s (revoked, or issued again since): sessions would not bind", u.Path, u.Team, u.Member), u.fix
		}
	}
}

// checkByConnecting is the bus part of Check for a member without the node
// token (the operator's connection failed): the node is asked with the
// credential the handlers use, by connecting with it. A node that accepts
// it answers, and its team and member exist (deleting a team revokes its
// credentials); one that refuses it makes the location's problem. It
// reports whether the bus answered.
func (r *run) checkByConnecting(b *BusCheck, locs []Location) bool {
	if r.in.ConnectCreds == nil {
		return false
	}
	for _, l := range locs {
		u := l.Credential
		if u == nil || u.creds == nil || u.Problem != "" || l.Status == StatusMissing {
			continue
		}
		if b.Team != "" && (u.Team != b.Team || (b.Member != "" && u.Member != b.Member)) {
			continue
		}
		err := r.in.ConnectCreds(r.ctx, u.Path)
		switch {
		case errors.Is(err, teambus.ErrInvalid):
			u.Problem, u.Fix = fmt.Sprintf("the node refuses the credential %s of %s/%s (revoked, or issued again since): sessions would not bind", u.Path, u.Team, u.Member), u.fix
			// Whether the team is still there is not known here.
			b.Answers, b.Error, b.Team, b.Member = true, "", "", ""
			return true
		case err != nil:
			continue
		}
		b.Answers, b.Error = true, ""
		b.Team, b.Member, b.TeamExists, b.MemberExists = u.Team, u.Member, true, true
		r.warn("checked with the credential %s (the node token is not at hand): the node accepts it", u.Path)
		return true
	}
	return false
}
