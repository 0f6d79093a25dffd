package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/agent/initclaude"
)

// checkLocation is one place teambus hooks may be installed, as --check
// reports it.
type checkLocation struct {
	Scope    string            `json:"scope"`
	Path     string            `json:"path"`
	Status   initclaude.Status `json:"status"`
	Detail   string            `json:"detail,omitempty"`
	Identity string            `json:"identity,omitempty"`
	Bin      string            `json:"bin,omitempty"`
	// Bus is the bus location baked into the handlers (--bus); empty: the
	// handlers reach the bus of the terminal claude is started from.
	Bus string `json:"bus,omitempty"`
	sig []string
}

// checkBus is the bus part of --check.
type checkBus struct {
	Answers      bool   `json:"answers"`
	Team         string `json:"team,omitempty"`
	TeamExists   bool   `json:"team_exists"`
	Member       string `json:"member,omitempty"`
	MemberExists bool   `json:"member_exists"`
	Error        string `json:"error,omitempty"`
}

// check implements --check (§12.2.6).
func (r *initRun) check() error {
	c := r.c
	r.rep.Action = "check"
	var locs []checkLocation
	add := func(scope initclaude.Scope, path string, plugin bool) {
		locs = append(locs, r.inspect(scope, path, plugin))
	}
	for _, s := range []initclaude.Scope{initclaude.ScopeUser, initclaude.ScopeProject, initclaude.ScopeLocal} {
		t, err := initclaude.Resolve(c.Context, r.env, s, "", "")
		if err == nil {
			add(s, t.Settings, false)
		}
	}
	if r.target.Scope == initclaude.ScopeSettings {
		add(initclaude.ScopeSettings, r.target.Settings, false)
	}
	plugins := initclaude.FindPlugins(filepath.Join(r.env.ClaudeDir, "plugins"))
	if r.target.Scope == initclaude.ScopePlugin {
		plugins = append([]string{r.target.Dir}, plugins...)
	}
	seen := map[string]bool{}
	for _, d := range plugins {
		if !seen[d] {
			seen[d] = true
			add(initclaude.ScopePlugin, d, true)
		}
	}
	r.rep.Locations = locs

	// Handlers that would fire twice.
	var settings, plugs []checkLocation
	for _, l := range locs {
		if l.Status == initclaude.StatusMissing || l.Status == "" {
			continue
		}
		if l.Scope == string(initclaude.ScopePlugin) {
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
	case r.known && r.version.Less(initclaude.MinClaude):
		r.warn("Claude Code %s ignores a whole settings file naming an event it does not know (before 2.1.101): upgrade", r.version)
	case r.known && r.version.Less(initclaude.PidClaude):
		r.warn("Claude Code %s predates 2.1.214 (no CLAUDE_PID, no SessionStart fork): upgrade for reliable identity", r.version)
	}
	bare := false
	for _, l := range locs {
		bare = bare || l.Bin == "teambus" || (l.Scope == string(initclaude.ScopePlugin) && l.Status != initclaude.StatusMissing)
	}
	if _, err := exec.LookPath("teambus"); err != nil && bare {
		r.warn("teambus is not on PATH, and installed hooks run the bare `teambus`")
	}

	r.checkMCP(locs)
	r.checkBus(locs)
	r.checkReach(locs)

	// The status: the one asked for, else the worst installed one.
	status := initclaude.StatusMissing
	detail := "teambus hooks are not installed anywhere (run `teambus init claude`)"
	explicit := c.IsSet("scope") || c.IsSet("settings") || c.IsSet("out")
	for _, l := range locs {
		if explicit {
			if l.Path == r.rep.Settings {
				status, detail = l.Status, l.Path+": "+l.Detail
			}
			continue
		}
		switch {
		case l.Status == initclaude.StatusOutdated:
			status, detail = l.Status, l.Path+": "+l.Detail
		case l.Status == initclaude.StatusCurrent && status == initclaude.StatusMissing:
			status, detail = l.Status, ""
		}
	}
	r.rep.Status = status
	code := teambus.ExitOK
	if status != initclaude.StatusMissing {
		// Handlers that are there but would not bind are not current.
		code, r.rep.Problem = r.rep.Bus.problem()
	}
	if err := r.print(); err != nil {
		return err
	}
	switch {
	case status == initclaude.StatusMissing:
		return cli.Exit("init claude --check: missing: "+detail, teambus.ExitPermanent)
	case code != teambus.ExitOK:
		return cli.Exit("init claude --check: "+r.rep.Problem, code)
	case status == initclaude.StatusOutdated:
		return cli.Exit("init claude --check: outdated: "+detail+" (rerun `teambus init claude` with the same flags)", teambus.ExitTransient)
	}
	return nil
}

// problem is why hooks that are installed would not bind, with the exit
// code of --check: 1 when the bus does not answer (start it, then check
// again), 2 when the team or member is not on it (create it, or fix the
// identity); 0 and "" when neither, or when there is no team to check.
func (b *checkBus) problem() (int, string) {
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
func (r *initRun) inspect(scope initclaude.Scope, path string, plugin bool) checkLocation {
	l := checkLocation{Scope: string(scope), Path: path}
	file := path
	if plugin {
		file = filepath.Join(path, initclaude.PluginHooks)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		l.Status, l.Detail = initclaude.StatusMissing, "no file"
		if !errors.Is(err, os.ErrNotExist) {
			l.Detail = err.Error()
		}
		return l
	}
	inst, err := initclaude.FindInstalled(data)
	if err != nil {
		l.Status, l.Detail = initclaude.StatusOutdated, err.Error()
		r.warn("%s: %v (Claude Code may ignore it)", file, err)
		return l
	}
	if len(inst) == 0 {
		l.Status, l.Detail = initclaude.StatusMissing, "no teambus handlers"
		return l
	}
	l.sig = initclaude.Signature(inst)
	want := r.expected(scope, initclaude.Infer(inst))
	l.Bin, l.Bus = initclaude.Infer(inst).Bin, initclaude.Infer(inst).Bus
	if want.Team != "" {
		l.Identity = want.Team + "/" + want.Member
	}
	st, detail, err := initclaude.Compare(data, initclaude.Handlers(want))
	if err != nil {
		l.Status, l.Detail = initclaude.StatusOutdated, err.Error()
		return l
	}
	l.Status, l.Detail = st, detail
	if have := initclaude.Infer(inst); have.Bin != "teambus" {
		if fi, err := os.Stat(have.Bin); err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			r.warn("%s: the hooks run %s, which is not an executable file", file, have.Bin)
			if l.Status == initclaude.StatusCurrent {
				l.Status, l.Detail = initclaude.StatusOutdated, have.Bin+" is not an executable file: rerun init claude (or pass --bin)"
			}
		}
	}
	return l
}

// expected is what init would write at a location of scope, given what is
// installed there: for the scope asked for, flags given to --check win; the
// rest is inferred (the binary too: a binary that does not exist makes the
// location outdated).
func (r *initRun) expected(scope initclaude.Scope, have initclaude.Options) initclaude.Options {
	c := r.c
	o := have
	if scope != r.target.Scope {
		// Flags describe the scope asked for (--scope, default local);
		// other locations are judged by what they hold.
		if r.known {
			o.PostToolUse = r.opts.PostToolUse
		}
		return o
	}
	if c.IsSet("bin") {
		o.Bin = r.opts.Bin
	}
	if c.IsSet("team") || c.IsSet("lead") {
		mayBake := scope == initclaude.ScopeSettings || (scope == initclaude.ScopeLocal && (r.localMayBake() || c.Bool("force")))
		o.Team, o.Member, o.Bus, o.Lead = "", "", "", r.opts.Lead
		if mayBake {
			o.Team, o.Member, o.Bus = c.String("team"), c.String("member"), r.opts.Bus
			if r.opts.Lead {
				o.Member = teambus.Lead
			}
		}
	}
	if c.IsSet("wake") || c.IsSet("no-wake") {
		o.Wake = r.opts.Wake
	}
	if c.IsSet("autonomous") {
		o.Autonomous = r.opts.Autonomous
	}
	if c.IsSet("shell-form") || r.known {
		o.ShellForm = r.opts.ShellForm
	}
	if r.known {
		o.PostToolUse = r.opts.PostToolUse
	}
	if scope == initclaude.ScopePlugin {
		o.Bin, o.Team, o.Member, o.Bus = "teambus", "", "", ""
	}
	return o
}

// localMayBake reports whether the local scope may bake an identity here.
func (r *initRun) localMayBake() bool {
	t, err := initclaude.Resolve(r.c.Context, r.env, initclaude.ScopeLocal, "", "")
	return err == nil && t.MayBake
}

// checkBus checks that the bus answers and that the team and member exist:
// from the flags, else the identity installed, else TEAMBUS_TEAM/MEMBER.
func (r *initRun) checkBus(locs []checkLocation) {
	team, member := r.c.String("team"), r.c.String("member")
	if r.c.Bool("lead") {
		member = teambus.Lead
	}
	for _, l := range locs {
		if team == "" && l.Identity != "" {
			team, member, _ = strings.Cut(l.Identity, "/")
		}
	}
	if team == "" {
		team, member = os.Getenv("TEAMBUS_TEAM"), os.Getenv("TEAMBUS_MEMBER")
	}
	b := &checkBus{Team: team, Member: member}
	r.rep.Bus = b
	s, err := open(r.c)
	if err != nil {
		b.Error = teambus.OneLine(errorLine(r.c.Context, err), 300)
		r.warn("the bus does not answer: %s", b.Error)
		return
	}
	defer s.close()
	b.Answers = true
	if team == "" {
		return
	}
	if err := teambus.ValidateID("team", team); err != nil {
		b.Error = err.Error()
		r.warn("%s", err.Error())
		return
	}
	if _, err := s.svc.Team(s.ctx, team); err != nil {
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
	if _, err := s.svc.Member(s.ctx, team, member); err != nil {
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
func (r *initRun) checkReach(locs []checkLocation) {
	here, err := bakedBus(r.c)
	if err != nil {
		return
	}
	for _, l := range locs {
		if l.Status == initclaude.StatusMissing || l.Status == "" || l.Bus != "" {
			continue
		}
		if (r.c.IsSet("dir") || r.c.IsSet("server")) && here != defaultDir() {
			r.warn("the hooks in %s carry no bus location: a claude started from a terminal without TEAMBUS_DIR or TEAMBUS_SERVER naming %s uses %s instead and does not reach this bus", l.Path, here, defaultDir())
		}
	}
}

// checkMCP is one MCP server named teambus registered with Claude Code
// (`claude mcp add`), as --check reports it.
type checkMCP struct {
	Scope   string   `json:"scope"`
	Project string   `json:"project,omitempty"`
	Command string   `json:"command"`
	Args    []string `json:"args"`
	Owned   bool     `json:"owned"`
	// Identity is the team/member baked into it; empty: the server takes
	// the session's hook binding.
	Identity string `json:"identity,omitempty"`
}

// checkMCP reports the teambus MCP servers Claude Code has registered at
// the user scope and for this project, and warns when one acts for
// another member than the hooks installed here.
func (r *initRun) checkMCP(locs []checkLocation) {
	data, err := os.ReadFile(initclaude.ClaudeJSON(r.env))
	if err != nil {
		return
	}
	local, _ := initclaude.Resolve(r.c.Context, r.env, initclaude.ScopeLocal, "", "")
	projects := []string{local.ProjectRoot, filepath.Dir(filepath.Dir(local.Settings))}
	for _, scope := range []initclaude.Scope{initclaude.ScopeUser, initclaude.ScopeLocal} {
		reg, ok := initclaude.FindRegistration(data, scope, projects...)
		if !ok {
			continue
		}
		m := checkMCP{Scope: string(scope), Project: reg.Project, Command: reg.Command, Args: reg.Args, Owned: reg.Owned()}
		var team, member string
		for i, a := range reg.Args {
			switch {
			case a == "--team" && i+1 < len(reg.Args):
				team = reg.Args[i+1]
			case a == "--member" && i+1 < len(reg.Args):
				member = reg.Args[i+1]
			}
		}
		if team != "" {
			m.Identity = team + "/" + member
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

// printCheck writes the --check report as text.
func (r *initRun) printCheck(w io.Writer) error {
	for _, l := range r.rep.Locations {
		line := fmt.Sprintf("%-8s %s: %s", l.Scope, l.Path, l.Status)
		if l.Status == initclaude.StatusMissing {
			line = fmt.Sprintf("%-8s %s: not installed", l.Scope, l.Path)
		} else if l.Detail != "" {
			line += " (" + l.Detail + ")"
		}
		if l.Identity != "" {
			line += ", identity " + l.Identity
		}
		if l.Bin != "" {
			line += ", runs " + l.Bin
		}
		if l.Bus != "" {
			line += ", bus " + l.Bus
		} else if l.Status != initclaude.StatusMissing {
			line += ", bus of the terminal (TEAMBUS_DIR/TEAMBUS_SERVER)"
		}
		fmt.Fprintln(w, line)
	}
	for _, m := range r.rep.MCP {
		where := m.Scope
		if m.Project != "" {
			where += " (" + m.Project + ")"
		}
		who := "identity from the session's hook binding"
		if m.Identity != "" {
			who = "identity " + m.Identity
		}
		if !m.Owned {
			who = "not registered by teambus"
		}
		fmt.Fprintf(w, "mcp      %s: %s, runs %s\n", where, who, strings.Join(append([]string{m.Command}, m.Args...), " "))
	}
	if r.rep.Claude != "" {
		fmt.Fprintf(w, "claude   %s\n", r.rep.Claude)
	}
	if b := r.rep.Bus; b != nil {
		switch {
		case !b.Answers:
			fmt.Fprintln(w, "bus      does not answer")
		case b.Team == "":
			fmt.Fprintln(w, "bus      answers (no team to check: pass --team)")
		case !b.TeamExists:
			fmt.Fprintf(w, "bus      answers; team %s not found\n", b.Team)
		case b.Member != "" && !b.MemberExists:
			fmt.Fprintf(w, "bus      answers; team %s exists; member %s not found\n", b.Team, b.Member)
		default:
			fmt.Fprintf(w, "bus      answers; team %s exists%s\n", b.Team, map[bool]string{true: "; member " + b.Member + " exists", false: ""}[b.Member != ""])
		}
	}
	if r.rep.Problem != "" {
		fmt.Fprintf(w, "status   %s handlers, but %s\n", r.rep.Status, r.rep.Problem)
		return nil
	}
	fmt.Fprintf(w, "status   %s\n", r.rep.Status)
	return nil
}
