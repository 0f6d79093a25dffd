package hook

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/agent/binding"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// TestSessionStart_BindsAndInjects: startup binds the Claude process
// (binding file 0600 with its fields, CLAUDE_ENV_FILE exports), registers
// epoch 1 and injects identity, brief, the mail waiting and the how-to.
func TestSessionStart_BindsAndInjects(t *testing.T) {
	r := newRig(t)
	seq := r.send("tm2", "tm1", "the schema is in db/001.sql")
	envFile := filepath.Join(t.TempDir(), "sessionstart-hook-0.sh")
	r.env["CLAUDE_ENV_FILE"] = envFile
	ctx := r.bind()
	for _, want := range []string{
		fmt.Sprintf("this session is member tm1 of team alpha (epoch 1, session cc-%s-p%d)", r.session, r.pid()),
		"You are tm1 in team alpha, incarnation 1; your teambus sidecar runs beside this session.",
		fmt.Sprintf("[#%d ", seq), "  the schema is in db/001.sql", "How to work with teambus",
	} {
		if !strings.Contains(ctx, want) {
			t.Errorf("context lacks %q:\n%s", want, ctx)
		}
	}
	for _, bad := range []string{"replacing an earlier session", "start `teambus teammate`"} {
		if strings.Contains(ctx, bad) {
			t.Errorf("hook brief says %q:\n%s", bad, ctx)
		}
	}
	if n := Chars(ctx); n > MaxSessionStart {
		t.Errorf("SessionStart context %d characters, cap %d", n, MaxSessionStart)
	}
	b := r.binding()
	if b.Epoch != 1 || b.Session != binding.SessionID(r.session, r.pid()) || !b.HasSession(r.session) || b.ClaudeStart == 0 || b.Role != binding.RoleTeammate {
		t.Fatalf("binding %+v", b)
	}
	fi, err := os.Stat(binding.Path(r.state, r.pid()))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("binding file mode: %v %v", fi.Mode(), err)
	}
	m, _, err := r.svc.Store().Member(context.Background(), "alpha", "tm1")
	if err != nil || m.Epoch != 1 || m.Session != b.Session {
		t.Fatalf("member %+v %v", m, err)
	}
	exp, _ := os.ReadFile(envFile)
	if want := fmt.Sprintf("export TEAMBUS_TEAM='alpha' TEAMBUS_MEMBER='tm1' TEAMBUS_SESSION='%s' TEAMBUS_DIR='%s'\n", b.Session, r.state); string(exp) != want {
		t.Fatalf("env file %q, want %q", exp, want)
	}
	if got := r.unread("tm1"); len(got) != 0 {
		t.Fatalf("unread after SessionStart: %v", got)
	}
	// Resolve finds the identity from a child of the Claude process.
	id, ok, err := binding.Resolve(r.state, func(k string) string { return r.env[k] })
	if err != nil || !ok || id.Member != "tm1" || id.Epoch != 1 || id.Session != b.Session {
		t.Fatalf("Resolve: %+v %v %v", id, ok, err)
	}
}

// TestHooks_Envelopes: every delivering event writes one envelope with its
// event name; Stop below 2.1.163 writes decision:block.
func TestHooks_Envelopes(t *testing.T) {
	r := newRig(t)
	r.bind()
	for _, tc := range []struct{ event, fixture string }{
		{"UserPromptSubmit", "UserPromptSubmit.real-2.1.330.json"},
		{"PostToolBatch", "PostToolBatch.real-2.1.330.json"},
		{"PostToolUse", "PostToolUse.real-2.1.330.json"},
		{"Stop", "Stop.real-2.1.330.json"},
	} {
		seq := r.send("tm2", "tm1", "note for "+tc.event)
		res := r.hook(tc.event, tc.fixture, nil)
		ctx := res.context(t, tc.event)
		if res.code != 0 || res.stderr != "" || !strings.Contains(ctx, fmt.Sprintf("[#%d ", seq)) || !strings.Contains(ctx, "  note for "+tc.event) {
			t.Fatalf("%s: code %d stderr %q context %q", tc.event, res.code, res.stderr, ctx)
		}
		// Nothing to say: no output at all.
		if res := r.hook(tc.event, tc.fixture, nil); res.stdout != "" || res.stderr != "" {
			t.Fatalf("%s with no mail wrote %q %q", tc.event, res.stdout, res.stderr)
		}
	}
	r.send("tm2", "tm1", "late mail")
	cfg := r.config("Stop")
	cfg.ClaudeVersion = "2.1.150"
	res := r.run(cfg, bytes.NewReader(r.payload("Stop.real-2.1.330.json", nil)))
	if !strings.HasPrefix(res.stdout, `{"decision":"block","reason":"teambus mail for tm1`) {
		t.Fatalf("old Stop envelope: %q", res.stdout)
	}
	if got := r.unread("tm1"); len(got) != 0 {
		t.Fatalf("unread: %v", got)
	}
}

// TestHooks_FailOpen: bus down, no identity, garbage, a payload over
// 1 MiB and stdin that never closes all exit 0 with empty stdout and
// stderr, quickly; errors go to hooks.log.
func TestHooks_FailOpen(t *testing.T) {
	r := newRig(t)
	r.bind()
	ok := func(name string, res result, within time.Duration) {
		t.Helper()
		if res.code != 0 || res.stdout != "" || res.stderr != "" {
			t.Fatalf("%s: code %d stdout %q stderr %q", name, res.code, res.stdout, res.stderr)
		}
		// Not a timing test: the bound only catches a hook that hangs
		// (the numbers are measured by teambus bench).
		if res.took > within {
			t.Fatalf("%s took %s, want < %s", name, res.took, within)
		}
	}
	ptb := r.payload("PostToolBatch.real-2.1.330.json", nil)
	cfg := r.config("PostToolBatch")
	ok("garbage", r.run(cfg, strings.NewReader("{not json")), DefaultBudget)
	ok("not an object", r.run(cfg, strings.NewReader(`["x"]`)), DefaultBudget)
	ok("empty", r.run(cfg, strings.NewReader("")), DefaultBudget)
	ok("huge", r.run(cfg, io.MultiReader(strings.NewReader(`{"session_id":"`), strings.NewReader(strings.Repeat("a", MaxPayload+10)), strings.NewReader(`"}`))), DefaultBudget)
	pr, pw := io.Pipe()
	defer pw.Close()
	ok("stdin never closed", r.run(cfg, pr), DefaultBudget)
	// A complete object on a stdin that stays open is read at once.
	pr2, pw2 := io.Pipe()
	defer pw2.Close()
	go pw2.Write(ptb)
	res := r.run(cfg, pr2)
	ok("object on open stdin", res, DefaultBudget)
	if !strings.Contains(r.hookLog(), "no payload on stdin") || !strings.Contains(r.hookLog(), "payload over") {
		t.Fatalf("hooks.log:\n%s", r.hookLog())
	}
	// No identity: nothing, not even a log line.
	before := r.hookLog()
	cfg.Team, cfg.Member = "", ""
	ok("no identity", r.run(cfg, bytes.NewReader(ptb)), DefaultBudget)
	if r.hookLog() != before {
		t.Fatal("a hook without identity logged")
	}
	// Bus down: no node in the directory. The failure is remembered: the
	// next hook does not try again.
	down := r.config("PostToolBatch")
	down.Connect = bus.ConnectConfig{Dir: t.TempDir()}
	ok("bus down", r.run(down, bytes.NewReader(ptb)), DefaultBudget)
	if b := r.binding(); b.BusDownUntil == nil {
		t.Fatal("failed connection not remembered")
	}
	ok("bus down again", r.run(down, bytes.NewReader(ptb)), DefaultBudget)
	if !strings.Contains(r.hookLog(), "remembered until") {
		t.Fatalf("hooks.log:\n%s", r.hookLog())
	}
	// SessionStart with the bus down says so in one line.
	r2 := newRig(t)
	ss := r2.config("SessionStart")
	ss.Connect = bus.ConnectConfig{Dir: t.TempDir()}
	res = r2.run(ss, bytes.NewReader(r2.payload("SessionStart.real-2.1.330.json", nil)))
	if c := res.context(t, "SessionStart"); !strings.Contains(c, "the bus is unreachable") || strings.Count(c, "\n") != 1 || res.stderr != "" {
		t.Fatalf("SessionStart bus down: %q %q", c, res.stderr)
	}
}

// TestHooks_Budget: a hook past budget − 500 ms after its write acks
// nothing; the mail comes back on the next hook marked as a repeat.
func TestHooks_Budget(t *testing.T) {
	r := newRig(t)
	r.bind()
	seq := r.send("tm2", "tm1", "important")
	cfg := r.config("PostToolBatch")
	cfg.Budget = 400 * time.Millisecond // less than the ack margin
	res := r.run(cfg, bytes.NewReader(r.payload("PostToolBatch.real-2.1.330.json", nil)))
	if c := res.context(t, "PostToolBatch"); !strings.Contains(c, "important") || strings.Contains(c, "repeat") {
		t.Fatalf("first: %q", c)
	}
	if got := r.unread("tm1"); fmt.Sprint(got) != fmt.Sprint([]uint64{seq}) {
		t.Fatalf("unread %v, want [%d]: nothing acked past the budget", got, seq)
	}
	res = r.hook("PostToolBatch", "PostToolBatch.real-2.1.330.json", nil)
	if c := res.context(t, "PostToolBatch"); !strings.Contains(c, fmt.Sprintf("[#%d ", seq)) || !strings.Contains(c, "(repeat: may have been shown before)") {
		t.Fatalf("second: %q", c)
	}
	if got := r.unread("tm1"); len(got) != 0 {
		t.Fatalf("unread %v", got)
	}
	if !strings.Contains(r.hookLog(), `"outcome":"ack-deadline"`) {
		t.Fatalf("hooks.log:\n%s", r.hookLog())
	}
}

// TestHooks_SessionGating: a hook whose session_id is not the binding's
// (an in-process agent-team teammate) does nothing; /clear adds the new
// id without a new epoch.
func TestHooks_SessionGating(t *testing.T) {
	r := newRig(t)
	r.bind()
	seq := r.send("tm2", "tm1", "for the member")
	res := r.hook("PostToolBatch", "PostToolBatch.real-2.1.330.json", map[string]any{"session_id": "other-session"})
	if res.stdout != "" || res.code != 0 {
		t.Fatalf("gated hook wrote %q", res.stdout)
	}
	if got := r.unread("tm1"); fmt.Sprint(got) != fmt.Sprint([]uint64{seq}) {
		t.Fatalf("unread %v", got)
	}
	res = r.hook("SessionStart", "SessionStart.real-2.1.330.json", map[string]any{"session_id": "after-clear", "source": "clear"})
	if c := res.context(t, "SessionStart"); !strings.Contains(c, "You are tm1") || !strings.Contains(c, "for the member") {
		t.Fatalf("clear: %q", c)
	}
	if b := r.binding(); b.Epoch != 1 || !b.HasSession("after-clear") || !b.HasSession(r.session) {
		t.Fatalf("binding after clear %+v", b)
	}
	m, _, _ := r.svc.Store().Member(context.Background(), "alpha", "tm1")
	if m.Epoch != 1 {
		t.Fatalf("clear registered epoch %d", m.Epoch)
	}
}

// TestSessionStart_NoIdentityTheft: a fork and a second live terminal for
// the same member are not bound and fence nobody; TEAMBUS_FORCE takes
// over.
func TestSessionStart_NoIdentityTheft(t *testing.T) {
	r := newRig(t)
	r.bind()
	res := r.hook("SessionStart", "SessionStart.real-2.1.330.json", map[string]any{"source": "fork", "session_id": "forked"})
	if c := res.context(t, "SessionStart"); c != "teambus: forked session, not bound to tm1; the original session keeps that identity.\n" {
		t.Fatalf("fork: %q", c)
	}
	second := r.agent()
	cfg := r.config("SessionStart")
	env2 := map[string]string{"CLAUDE_PID": fmt.Sprint(second.Process.Pid), "TEAMBUS_TEAM": "alpha", "TEAMBUS_MEMBER": "tm1"}
	cfg.Getenv = func(k string) string { return env2[k] }
	res = r.run(cfg, bytes.NewReader(r.payload("SessionStart.real-2.1.330.json", map[string]any{"session_id": "second"})))
	if c := res.context(t, "SessionStart"); !strings.Contains(c, "already bound to the live Claude process") {
		t.Fatalf("second terminal: %q", c)
	}
	if _, err := binding.Load(r.state, second.Process.Pid); err == nil {
		t.Fatal("second terminal was bound")
	}
	m, _, _ := r.svc.Store().Member(context.Background(), "alpha", "tm1")
	if m.Epoch != 1 {
		t.Fatalf("member epoch %d after refusals", m.Epoch)
	}
	cfg.Force = true
	res = r.run(cfg, bytes.NewReader(r.payload("SessionStart.real-2.1.330.json", map[string]any{"session_id": "second"})))
	if c := res.context(t, "SessionStart"); !strings.Contains(c, "(epoch 2,") {
		t.Fatalf("forced: %q", c)
	}
	// The first session learns it was replaced, once, and then is quiet.
	// Mail waiting then (leased beside the notices) is not shown and goes
	// back to the inbox for the new incarnation.
	waiting := r.send("tm2", "tm1", "for the new incarnation")
	res = r.hook("PostToolBatch", "PostToolBatch.real-2.1.330.json", nil)
	if c := res.context(t, "PostToolBatch"); !strings.Contains(c, "was replaced by a newer incarnation") || strings.Contains(c, "for the new incarnation") {
		t.Fatalf("fenced notice: %q", c)
	}
	if got := r.unread("tm1"); !slices.Contains(got, waiting) {
		t.Fatalf("unread of tm1 after the fenced hook = %v, want %d back in the inbox", got, waiting)
	}
	r.send("tm2", "tm1", "for epoch 2")
	if res := r.hook("PostToolBatch", "PostToolBatch.real-2.1.330.json", nil); res.stdout != "" {
		t.Fatalf("fenced session delivered: %q", res.stdout)
	}
}

// TestHooks_CompactionAndEnd: PreCompact and PostCompact checkpoint the
// held task; SessionEnd records a clean exit and a final checkpoint.
func TestHooks_CompactionAndEnd(t *testing.T) {
	r := newRig(t)
	r.bind()
	b := r.binding()
	a := team.Actor{Team: "alpha", Member: "tm1", Session: b.Session}
	ctx := context.Background()
	if _, err := r.svc.Claim(ctx, a, "t1"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.Checkpoint(ctx, teamapi.CheckpointRequest{Actor: a, Done: []string{"lexer"}, Remaining: []string{"parser"}, LastAction: "wrote lexer"}); err != nil {
		t.Fatal(err)
	}
	if res := r.hook("PreCompact", "PreCompact.docs.json", nil); res.stdout != "" || res.code != 0 {
		t.Fatalf("PreCompact output %q", res.stdout)
	}
	cp := r.task("t1").Checkpoint
	if cp.LastAction != "context compaction (manual)" || fmt.Sprint(cp.TasksCompleted) != "[lexer]" || !strings.Contains(string(cp.Data), `"compaction":{"at"`) {
		t.Fatalf("PreCompact checkpoint %+v %s", cp, cp.Data)
	}
	r.hook("PostCompact", "PreCompact.docs.json", map[string]any{"hook_event_name": "PostCompact", "compact_summary": "was writing the parser\x1b]0;x"})
	cp = r.task("t1").Checkpoint
	if !strings.Contains(string(cp.Data), `"compact_summary":"was writing the parser`) || !strings.Contains(string(cp.Data), `"compaction"`) {
		t.Fatalf("PostCompact data %s", cp.Data)
	}
	res := r.hook("SessionStart", "SessionStart.real-2.1.330.json", map[string]any{"source": "compact"})
	if c := res.context(t, "SessionStart"); !strings.Contains(c, "after compaction") || !strings.Contains(c, "TASK t1") || !strings.Contains(c, "do not re-execute completed work") {
		t.Fatalf("compact brief: %q", c)
	}
	if res := r.hook("SessionEnd", "SessionEnd.real-2.1.330.json", map[string]any{"reason": "clear"}); res.stdout != "" || r.binding().CleanExit {
		t.Fatal("SessionEnd(clear) ended the session")
	}
	r.hook("SessionEnd", "SessionEnd.real-2.1.330.json", map[string]any{"reason": "prompt_input_exit"})
	if !r.binding().CleanExit {
		t.Fatal("clean_exit not recorded")
	}
	if cp := r.task("t1").Checkpoint; cp.LastAction != "session ended (prompt_input_exit)" {
		t.Fatalf("final checkpoint %+v", cp)
	}
}

// TestHooks_Conditions: Notification and StopFailure set the member's
// condition; the next tool batch clears it.
func TestHooks_Conditions(t *testing.T) {
	r := newRig(t)
	r.bind()
	cond := func() string {
		m, _, err := r.svc.Store().Member(context.Background(), "alpha", "tm1")
		if err != nil {
			t.Fatal(err)
		}
		return m.Condition
	}
	r.hook("Notification", "Stop.real-2.1.330.json", map[string]any{"hook_event_name": "Notification", "notification_type": "permission_prompt", "message": "Claude needs your permission"})
	if got := cond(); got != "approval" {
		t.Fatalf("condition %q", got)
	}
	r.hook("StopFailure", "Stop.real-2.1.330.json", map[string]any{"hook_event_name": "StopFailure", "error": "rate_limit"})
	if got := cond(); got != "rate_limit" {
		t.Fatalf("condition %q", got)
	}
	r.hook("PostToolBatch", "PostToolBatch.real-2.1.330.json", nil)
	if got := cond(); got != "" {
		t.Fatalf("condition %q after a tool batch", got)
	}
}

// TestHooks_ZombieNotice: the zombie notice is shown once per transition.
func TestHooks_ZombieNotice(t *testing.T) {
	r := newRig(t)
	r.bind()
	b := r.binding()
	ctx := context.Background()
	if err := r.svc.SetMemberStatus(ctx, "alpha", "tm1", b.Epoch, teambus.MemberZombie); err != nil {
		t.Fatal(err)
	}
	res := r.hook("PostToolBatch", "PostToolBatch.real-2.1.330.json", nil)
	if c := res.context(t, "PostToolBatch"); !strings.Contains(c, "zombie mode: keep working") {
		t.Fatalf("zombie notice: %q", c)
	}
	if res := r.hook("PostToolBatch", "PostToolBatch.real-2.1.330.json", nil); res.stdout != "" {
		t.Fatalf("zombie notice repeated: %q", res.stdout)
	}
	if err := r.svc.SetMemberStatus(ctx, "alpha", "tm1", b.Epoch, teambus.MemberIdle); err != nil {
		t.Fatal(err)
	}
	res = r.hook("UserPromptSubmit", "UserPromptSubmit.real-2.1.330.json", nil)
	if c := res.context(t, "UserPromptSubmit"); !strings.Contains(c, "a lead re-attached") {
		t.Fatalf("unzombie notice: %q", c)
	}
}

func (r *rig) task(id string) *teambus.Task {
	r.t.Helper()
	tk, _, err := r.svc.Store().Task(context.Background(), "alpha", id)
	if err != nil {
		r.t.Fatal(err)
	}
	return tk
}
