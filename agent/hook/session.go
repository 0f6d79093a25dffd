package hook

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/agent/binding"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// sessionStart is SessionStart (§12.3.6): bind and register on startup or
// resume in a new process, re-brief on clear/resume/compact in a bound
// one, never bind a fork; then mail.
func (h *hook) sessionStart(ctx context.Context) int {
	binding.Cleanup(h.cfg.StateDir)
	if h.p.Source == "fork" {
		h.rec.Outcome = "fork"
		return h.say(fmt.Sprintf("teambus: forked session, not bound to %s; the original session keeps that identity.\n", h.cfg.Member))
	}
	if h.p.SessionID == "" || teambus.ValidateSession(h.p.SessionID) != nil || len(h.p.SessionID) > 100 {
		return h.fail(teambus.Invalidf("SessionStart payload without a usable session_id"))
	}
	b, err := binding.Load(h.cfg.StateDir, h.pid)
	switch {
	case err == nil && b.Alive() && b.Team == h.cfg.Team && b.Member == h.cfg.Member:
		h.b = b
		if b.Fenced {
			h.rec.Outcome = "fenced"
			return 0
		}
		return h.rebrief(ctx)
	case err != nil && !errors.Is(err, binding.ErrNoBinding):
		h.rec.Error = Clean(err.Error())
	}
	return h.bind(ctx)
}

// say emits a SessionStart context of one or more lines, nothing else.
func (h *hook) say(text string) int {
	if err := h.emit("SessionStart", text); err != nil {
		h.rec.Outcome = "write-failed"
	}
	return 0
}

// bind runs the checks of §12.1.6, registers the member and writes the
// binding; then spawns the sidecar and injects the brief and mail.
func (h *hook) bind(ctx context.Context) int {
	member := h.cfg.Member
	if binding.PaneTeammate(binding.Argv(h.pid)) {
		h.rec.Outcome = "pane-teammate"
		return h.say(fmt.Sprintf("teambus: this is a teammate pane of Claude's own agent team; not bound to %s.\n", member))
	}
	start, err := binding.StartTime(h.pid)
	if err != nil {
		return h.fail(err)
	}
	if !h.cfg.Force {
		for _, o := range binding.All(h.cfg.StateDir) {
			if o.ClaudePID != h.pid && o.Team == h.cfg.Team && o.Member == member && o.Alive() && !o.CleanExit && !o.Fenced {
				h.rec.Outcome = "second-terminal"
				return h.say(fmt.Sprintf("teambus: not bound: %s of team %s is already bound to the live Claude process %d on this host (a second terminal?). Set TEAMBUS_FORCE=1 to take over (the other session is fenced), or use another member.\n", member, h.cfg.Team, o.ClaudePID))
			}
		}
	}
	if err := h.connect(ctx); err != nil {
		h.fail(err)
		return h.say(fmt.Sprintf("teambus: not bound to %s: the bus is unreachable (%s); the next session start tries again.\n", member, Clean(clipChars(err.Error(), 200))))
	}
	session := h.cfg.Getenv("TEAMBUS_SESSION")
	if session == "" {
		session = binding.SessionID(h.p.SessionID, h.pid)
	}
	b := &binding.Binding{Team: h.cfg.Team, Member: member, Role: binding.RoleTeammate, Session: session,
		ClaudePID: h.pid, ClaudeStart: start, ClaudeSessions: []string{h.p.SessionID}, Cwd: h.p.Cwd,
		BoundAt: h.cfg.Now().UTC(), Notices: map[string]string{}, Recent: []uint64{}}
	var lead *team.Report
	if member == teambus.Lead {
		b.Role = binding.RoleLead
		rep, err := h.api.Resume(ctx, teamapi.ResumeRequest{Actor: teamapi.Actor{Team: h.cfg.Team, Member: teambus.Lead, Session: session}, Force: h.cfg.Force, AsLead: true})
		if err != nil {
			h.fail(err)
			if held := (*team.LeadHeldError)(nil); errors.As(err, &held) {
				// Here the switch is the environment, not --force.
				return h.say(fmt.Sprintf("teambus: not bound as the lead of team %s: %s: %s\n", h.cfg.Team, Clean(held.Why()), held.When("start claude with TEAMBUS_FORCE=1 set")))
			}
			if werr := (*teamapi.Error)(nil); errors.As(err, &werr) && errors.Is(err, teambus.ErrUnavailable) {
				// The service said why in its words; the switch here is
				// the environment.
				return h.say(fmt.Sprintf("teambus: not bound as the lead of team %s: %s (to take over now, start claude with TEAMBUS_FORCE=1 set)\n", h.cfg.Team, Clean(err.Error())))
			}
			return h.say(fmt.Sprintf("teambus: not bound as the lead of team %s: %s\n", h.cfg.Team, Clean(err.Error())))
		}
		b.Epoch, lead = rep.LeadEpoch, rep
	} else {
		m, err := h.api.Join(ctx, teamapi.JoinRequest{Actor: teamapi.Actor{Team: h.cfg.Team, Member: member, Session: session}})
		if err != nil {
			h.fail(err)
			return h.say(fmt.Sprintf("teambus: not bound to %s of team %s: %s\n", member, h.cfg.Team, Clean(err.Error())))
		}
		b.Epoch = m.Epoch
	}
	if err := binding.Save(h.cfg.StateDir, b); err != nil {
		return h.fail(err)
	}
	h.b = b
	h.exportEnv()
	h.spawnSidecar(ctx)
	h.rec.Outcome = "bound"
	var brief string
	if lead != nil {
		brief = leadSummary(lead)
	} else {
		brief = h.brief(ctx, false)
	}
	return h.startContext(ctx, h.identityLine(), brief)
}

// rebrief is SessionStart in a bound process: /clear, /resume, compaction.
func (h *hook) rebrief(ctx context.Context) int {
	if h.b.AddSession(h.p.SessionID) {
		id := h.p.SessionID
		h.later(func(b *binding.Binding) bool { b.AddSession(id); return true })
	}
	if err := h.connect(ctx); err != nil {
		h.flush(ctx)
		return h.fail(err)
	}
	if !h.sidecarAlive() {
		h.spawnSidecar(ctx)
	}
	notes := h.notices(ctx)
	if h.b.Fenced {
		h.flush(ctx)
		return h.say(notes)
	}
	var brief string
	switch {
	case h.b.Lead():
		if rep, err := h.api.Probe(ctx, teamapi.ProbeRequest{Actor: h.actor()}); err == nil {
			// The probe speaks of a new session; this one is the lead.
			rep.Decision, rep.Why = team.DecisionAlreadyLead, ""
			brief = leadSummary(rep)
		}
	case h.p.Source == "compact":
		brief = h.brief(ctx, true)
	default:
		brief = h.brief(ctx, false)
	}
	h.rec.Outcome = "rebrief-" + Clean(clipChars(h.p.Source, 20))
	return h.startContext(ctx, joinText(h.identityLine(), notes), brief)
}

// startContext writes identity, brief, mail and the how-to, within
// MaxSessionStart characters (the brief within MaxBrief).
func (h *hook) startContext(ctx context.Context, head, brief string) int {
	brief = cleanLines(brief)
	if Chars(brief) > MaxBrief {
		brief = clipChars(brief, MaxBrief-60) + "\n(brief shortened: `teambus brief` prints all of it)\n"
	}
	how := howTo(h.b.Lead())
	room := min(h.cfg.MaxContext, MaxSessionStart-Chars(head)-Chars(brief)-Chars(how)-10)
	var d *drained
	if room > 500 && h.drainLock(ctx) {
		var err error
		if d, err = h.drain(ctx, room); err != nil {
			h.rec.Error = Clean(clipChars(err.Error(), 300))
		}
	}
	mail := ""
	if d != nil {
		mail = d.mail.Text
	}
	h.flush(ctx)
	err := h.emit("SessionStart", joinText(head, brief, mail, how))
	if err != nil {
		h.rec.Outcome = "write-failed"
	}
	h.settle(ctx, d, err == nil)
	return 0
}

func (h *hook) identityLine() string {
	who := "member " + h.b.Member
	if h.b.Lead() {
		who = "the lead" // the lead's member id is "lead": say it once
	}
	return fmt.Sprintf("teambus: this session is %s of team %s (epoch %d, session %s). Its teambus sidecar runs beside it; mail for %s appears here after tool batches and when you stop.\n",
		who, h.b.Team, h.b.Epoch, h.b.Session, h.b.Member)
}

func howTo(lead bool) string {
	s := "How to work with teambus: `teambus task next` takes work; `teambus checkpoint --done … --remaining … --last-action …` records progress; `teambus task complete ID` finishes it.\n" +
		"`teambus send --to <member|lead> \"…\"` sends mail, `teambus inbox` reads it (MCP: task_next, checkpoint, task_complete, send, inbox).\n" +
		"Mail is acknowledged when it is shown here; processing a message twice must be harmless.\n"
	if lead {
		s = "How to lead with teambus: `teambus team show` (state), `teambus task add|reassign|reopen` (the queue), `teambus send --to <member|all> \"…\"` (mail), `teambus team complete` (finish).\n" +
			"Crashed teammates are detected by the sidecars and their tasks requeued with checkpoints; crash notices arrive as mail here.\n" +
			"Mail is acknowledged when it is shown here; processing a message twice must be harmless.\n"
	}
	return s
}

// brief is the member's brief for a hook-bound session; compact is the
// short form after compaction.
func (h *hook) brief(ctx context.Context, compact bool) string {
	b, err := teamapi.As[team.Brief](h.api.Brief(ctx, teamapi.BriefRequest{Actor: h.actor(), Mail: 10}))
	if err != nil {
		h.rec.Error = Clean(clipChars(err.Error(), 300))
		return ""
	}
	if b.Task != nil && b.Task.AssignedTo == h.b.Member && b.Task.Active() {
		id := b.Task.ID
		h.later(func(bb *binding.Binding) bool { bb.Notice("task", id); return true })
	}
	if !compact {
		return b.HookText(h.b.Epoch)
	}
	var w strings.Builder
	fmt.Fprintf(&w, "teambus after compaction: you are %s of team %s.\n", h.b.Member, h.b.Team)
	if t := b.Task; t != nil {
		fmt.Fprintf(&w, "TASK %s (%s): %s\n", t.ID, t.Status, t.Description)
		if cp := t.Checkpoint; cp != nil {
			fmt.Fprintf(&w, "Latest checkpoint #%d: done %s; remaining %s; last action %s — do not re-execute completed work.\n", cp.Seq, strings.Join(cp.TasksCompleted, "; "), strings.Join(cp.TasksRemaining, "; "), cp.LastAction)
		}
	} else {
		w.WriteString("You hold no task: `teambus task next`.\n")
	}
	mail := b.RecentMail
	if len(mail) > 5 {
		mail = mail[len(mail)-5:]
	}
	for _, m := range mail {
		fmt.Fprintf(&w, "  #%d %s -> %s [%s] (delivered before compaction) %s\n", m.Seq, m.From, m.To, m.Type, clipChars(strings.Join(strings.Fields(m.Body), " "), 200))
	}
	return w.String()
}

// cleanLines removes control characters from every line of s.
func cleanLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = Clean(l)
	}
	return strings.Join(lines, "\n")
}

// leadSummary is the resume summary injected into the lead's session.
func leadSummary(r *team.Report) string {
	var w strings.Builder
	fmt.Fprintf(&w, "Team %s is %s (%s, lead epoch %d), %d%% done. Tasks:", r.Team, r.Status, r.Decision, r.LeadEpoch, r.Progress)
	for _, st := range teambus.TaskStatuses {
		if n := r.Tasks[string(st)]; n > 0 {
			fmt.Fprintf(&w, " %d %s", n, st)
		}
	}
	w.WriteString(".\nTeammates:")
	if len(r.Members) == 0 {
		w.WriteString(" none")
	}
	for _, m := range r.Members {
		task := ""
		if m.Task != nil {
			task = ", task " + *m.Task
		}
		fmt.Fprintf(&w, " %s %s (%s%s);", m.ID, m.State, m.Status, task)
	}
	w.WriteString("\n")
	for _, warn := range r.Warnings {
		fmt.Fprintf(&w, "Warning: %s\n", warn)
	}
	if len(r.MailboxTail) > 0 {
		w.WriteString("Last messages:\n")
		for _, m := range r.MailboxTail {
			fmt.Fprintf(&w, "  #%d %s -> %s [%s] %s\n", m.Seq, m.From, m.To, m.Type, clipChars(strings.Join(strings.Fields(m.Body), " "), 160))
		}
	}
	return w.String()
}

// exportEnv appends the identity to $CLAUDE_ENV_FILE, so the Bash tool's
// commands see it directly.
func (h *hook) exportEnv() {
	path := h.cfg.Getenv("CLAUDE_ENV_FILE")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		h.rec.Error = Clean(err.Error())
		return
	}
	defer f.Close()
	if dir := h.shim(); dir != "" {
		// Once, first: the shell may source the file more than once.
		q := shellQuote(dir)
		fmt.Fprintf(f, "case \":$PATH:\" in :%s:*) ;; *) export PATH=%s\"${PATH:+:$PATH}\" ;; esac\n", q, q)
	}
	// The identity is the file's last line.
	fmt.Fprintf(f, "export TEAMBUS_TEAM=%s TEAMBUS_MEMBER=%s TEAMBUS_SESSION=%s TEAMBUS_DIR=%s\n",
		shellQuote(h.b.Team), shellQuote(h.b.Member), shellQuote(h.b.Session), shellQuote(h.cfg.StateDir))
}

// ShimDir is the directory, inside the state directory, whose `teambus`
// the SessionStart hook puts first on the PATH of the session's shell.
const ShimDir = "bin"

// clientBinary is the client build's name (-tags teambus_client).
const clientBinary = "teambus-client"

// agentBinary is the lean agent build's name (cmd/teambus-agent): it runs
// `teambus send` through the sidecar's relay itself and hands every other
// command to the client build beside it.
const agentBinary = "teambus-agent"

// shim makes $TEAMBUS_DIR/bin/teambus a symbolic link to the fastest
// teambus build there is — the lean agent build (teambus-agent) beside the
// hook's binary, else the client build (teambus-client) the hook runs
// from or that lies beside it, else the hook's own binary — and returns
// that directory; "" when there is none to link. The agent's one-shot
// `teambus send` then starts the smallest build, whatever `teambus` the
// user's PATH holds (or none: handlers run an absolute path). The agent
// and client builds hand the commands they lack to the builds beside
// their real path.
func (h *hook) shim() string {
	exe := h.cfg.Exe
	if exe == "" {
		return ""
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	target := exe
	for _, name := range []string{agentBinary, clientBinary} {
		if filepath.Base(exe) == name {
			break
		}
		c := filepath.Join(filepath.Dir(exe), name)
		if fi, err := os.Stat(c); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			target = c
			break
		}
	}
	dir := filepath.Join(h.cfg.StateDir, ShimDir)
	link := filepath.Join(dir, "teambus")
	if cur, err := os.Readlink(link); err == nil && cur == target {
		return dir
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		h.rec.Error = Clean(err.Error())
		return ""
	}
	// A new link renamed over the old one: a concurrent session sees one
	// or the other, never none.
	tmp := fmt.Sprintf("%s.%d.tmp", link, os.Getpid())
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		h.rec.Error = Clean(err.Error())
		return ""
	}
	if err := os.Rename(tmp, link); err != nil {
		_ = os.Remove(tmp)
		h.rec.Error = Clean(err.Error())
		return ""
	}
	return dir
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// sidecarAlive reports whether the binding's sidecar still runs.
func (h *hook) sidecarAlive() bool {
	if h.b.SidecarPID <= 0 {
		return false
	}
	st, err := binding.StartTime(h.b.SidecarPID)
	return err == nil && (h.b.SidecarStart == 0 || st == h.b.SidecarStart)
}

// spawnSidecar starts `teambus teammate|lead … --adopt` detached (§12.4.1):
// its own session, stdin /dev/null, stdout and stderr to its log file, no
// other descriptor — never the hook's stdout, or Claude would wait for it
// and the sidecar would later die of SIGPIPE. It is never waited for.
func (h *hook) spawnSidecar(ctx context.Context) {
	if h.cfg.Exe == "" || h.cfg.Getenv("TEAMBUS_NO_SIDECAR") == "1" {
		return
	}
	var args []string
	if h.b.Lead() {
		args = []string{"lead", "--team", h.b.Team, "--session", h.b.Session, "--pid", strconv.Itoa(h.pid), "--adopt"}
	} else {
		args = []string{"teammate", "--team", h.b.Team, "--member", h.b.Member, "--session", h.b.Session, "--pid", strconv.Itoa(h.pid), "--adopt"}
		if h.b.Cwd != "" {
			args = append(args, "--workdir", h.b.Cwd)
		}
	}
	args = append(args, "--dir", h.cfg.StateDir)
	logDir := filepath.Join(h.cfg.StateDir, "logs", h.b.Team)
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		h.rec.Error = Clean(err.Error())
		return
	}
	logf, err := os.OpenFile(filepath.Join(logDir, fmt.Sprintf("%s-e%d.log", h.b.Member, h.b.Epoch)), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		h.rec.Error = Clean(err.Error())
		return
	}
	defer logf.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		h.rec.Error = Clean(err.Error())
		return
	}
	defer null.Close()
	cmd := exec.Command(h.cfg.Exe, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, logf, logf
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// The sidecar's identity is its flags: drop a session that names the
	// hook's environment. The connection settings go in the environment,
	// never in argv (the process list is readable by every local user).
	cmd.Env = append(append(os.Environ(), h.cfg.SidecarEnv...), "TEAMBUS_SESSION="+h.b.Session)
	if err := cmd.Start(); err != nil {
		h.rec.Error = Clean(err.Error())
		return
	}
	pid := cmd.Process.Pid
	st, _ := binding.StartTime(pid)
	_ = cmd.Process.Release() // only frees the handle; the waiter runs on
	h.later(func(b *binding.Binding) bool { b.SidecarPID, b.SidecarStart = pid, st; return true })
	h.flush(ctx)
}
