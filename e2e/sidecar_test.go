package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// The lead dies: teammates enter zombie mode, hold their mail, a new lead
// takes over, they leave zombie mode, the held mail is delivered once and
// in order, and the old lead is fenced.
func TestLead_Killed_ZombieThenResume(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.createTeam("zt", fastPolicy(), "tm1", "tm2")
	e.addTask("zt", "a")
	leadAgent, leadSide := e.startLead("zt", "L1")
	e.startTeammate("zt", "tm1", "s1")
	e.startTeammate("zt", "tm2", "s2")
	if _, err := e.svc.Claim(ctx, actor("zt", "tm1", "s1"), "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Checkpoint(ctx, teamapi.CheckpointRequest{Actor: actor("zt", "tm1", "s1"), Done: []string{"step1"}, Remaining: []string{"step2"}, LastAction: "wrote schema"}); err != nil {
		t.Fatal(err)
	}

	leadAgent.kill(t) // the lead sidecar stops heartbeating
	e.waitMemberStatus("zt", "tm1", teambus.MemberZombie, 15*time.Second)
	e.waitMemberStatus("zt", "tm2", teambus.MemberZombie, 15*time.Second)
	// The member's zombie status is written first, the team's record of
	// the lead timeout right after it.
	e.waitFor(10*time.Second, "lead_timeout_detected_at", func() error {
		if tm, _, _ := e.svc.Store().Team(ctx, "zt"); tm == nil || tm.LeadTimeoutDetectedAt == nil {
			return fmt.Errorf("team did not record lead_timeout_detected_at")
		}
		return nil
	})
	if code := leadSide.exitCode(t, 5*time.Second); code != 0 {
		t.Fatalf("lead sidecar exit %d after its agent died", code)
	}
	// Mail from a zombie is held, not delivered.
	for i := 1; i <= 3; i++ {
		res, err := e.svc.Send(ctx, teamapi.SendRequest{Actor: actor("zt", "tm2", "s2"), To: teambus.Lead, Body: fmt.Sprintf("held %d", i), ID: fmt.Sprintf("h%d", i)})
		if err != nil || !res.Held {
			t.Fatalf("send while zombie: %+v %v", res, err)
		}
	}
	if n := count(e.mail("zt"), teambus.MsgInfo, "held "); n != 0 {
		t.Fatalf("held mail delivered while zombie: %d", n)
	}
	// The checkpoint survives zombie mode's automatic checkpoints.
	if cp := e.task("zt", "a").Checkpoint; cp == nil || strings.Join(cp.TasksCompleted, ",") != "step1" {
		t.Fatalf("checkpoint after zombie mode: %+v", cp)
	}

	// A new lead session takes over (takeover-after has passed).
	e.startLead("zt", "L2")
	e.waitMemberStatus("zt", "tm1", teambus.MemberInProgress, 15*time.Second)
	e.waitMemberStatus("zt", "tm2", teambus.MemberIdle, 15*time.Second)
	e.waitFor(10*time.Second, "held mail released", func() error {
		if n := count(e.mail("zt"), teambus.MsgInfo, "held "); n != 3 {
			return fmt.Errorf("%d released", n)
		}
		return nil
	})
	var bodies []string
	for _, m := range e.mail("zt") {
		if strings.HasPrefix(m.Body, "held ") {
			bodies = append(bodies, m.Body)
		}
	}
	if got, want := strings.Join(bodies, ","), "held 1,held 2,held 3"; got != want {
		t.Fatalf("released mail order: got %s, want %s", got, want)
	}
	e.waitFor(10*time.Second, "lead told", func() error {
		if n := count(e.mail("zt"), teambus.MsgSystem, "left zombie mode"); n != 2 {
			return fmt.Errorf("%d notices", n)
		}
		return nil
	})
	// Releasing again delivers nothing more.
	if again, err := e.svc.Mailbox("zt").ReleaseHeld(ctx, "tm2"); err != nil || len(again) != 0 {
		t.Fatalf("second release: %d %v", len(again), err)
	}
	// The old lead session is fenced.
	_, stderr, code := e.run("send", "--team", "zt", "--member", "lead", "--session", "L1", "--to", "tm1", "from the old lead")
	if code != teambus.ExitConflict {
		t.Fatalf("old lead send: exit %d, want 3: %s", code, stderr)
	}
	tm, _, _ := e.svc.Store().Team(ctx, "zt")
	if tm.LeadEpoch != 2 || tm.LeadSession != "L2" || tm.LeadTimeoutDetectedAt != nil {
		t.Fatalf("team after takeover: epoch %d session %s detected %v", tm.LeadEpoch, tm.LeadSession, tm.LeadTimeoutDetectedAt)
	}
}

// A teammate's agent dies holding a task: the sidecar reports the crash at
// once, the task is back in the queue with its checkpoint, one notice
// reaches the lead, and a respawned incarnation fences the old session.
func TestTeammate_AgentKilled_CrashRequeueRespawn(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pol := fastPolicy()
	pol.MemberTimeout, pol.ProbeTimeout = time.Minute, 30*time.Second // the pid, not a timeout, must detect it
	e.createTeam("ct", pol, "tm1")
	e.addTask("ct", "a")
	e.addTask("ct", "b", "a")
	e.startLead("ct", "L1")
	agent, side := e.startTeammate("ct", "tm1", "s1")
	if _, err := e.svc.Claim(ctx, actor("ct", "tm1", "s1"), "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Checkpoint(ctx, teamapi.CheckpointRequest{Actor: actor("ct", "tm1", "s1"), Done: []string{"parse"}, Remaining: []string{"emit"}, LastAction: "parsed", Files: []string{"a.go"}}); err != nil {
		t.Fatal(err)
	}
	agent.kill(t)
	e.waitMemberStatus("ct", "tm1", teambus.MemberCrashed, 10*time.Second)
	if code := side.exitCode(t, 5*time.Second); code != 0 {
		t.Fatalf("sidecar exit %d", code)
	}
	ta := e.task("ct", "a")
	if ta.Status != teambus.TaskAvailable || ta.AssignedTo != "" || ta.Checkpoint == nil || ta.Checkpoint.LastAction != "parsed" {
		t.Fatalf("task after crash: %+v checkpoint %+v", ta, ta.Checkpoint)
	}
	m, _, _ := e.svc.Store().Member(ctx, "ct", "tm1")
	if m.CrashCount != 1 {
		t.Fatalf("crash count %d, want 1", m.CrashCount)
	}
	if n := count(e.mail("ct"), teambus.MsgSystem, "tm1 crashed"); n != 1 {
		t.Fatalf("%d crash notices, want 1", n)
	}
	// The old agent's session is fenced.
	if _, stderr, code := e.run("task", "claim", "a", "--team", "ct", "--member", "tm1", "--session", "s1"); code != teambus.ExitConflict {
		t.Fatalf("claim from crashed incarnation: exit %d: %s", code, stderr)
	}
	// The brief carries the checkpoint.
	out, _, code := e.run("brief", "--team", "ct", "--member", "tm1")
	if code != 0 || !strings.Contains(out, "DO NOT re-execute completed work") || !strings.Contains(out, "parse") || !strings.Contains(out, "TASK a") {
		t.Fatalf("brief (exit %d):\n%s", code, out)
	}
	// Respawn: a new incarnation continues the task.
	e.startTeammate("ct", "tm1", "s2")
	m, _, _ = e.svc.Store().Member(ctx, "ct", "tm1")
	if m.Epoch != 2 {
		t.Fatalf("epoch after respawn %d, want 2", m.Epoch)
	}
	if _, stderr, code := e.run("task", "claim", "a", "--team", "ct", "--member", "tm1", "--session", "s1"); code != teambus.ExitConflict {
		t.Fatalf("claim from the replaced session: exit %d: %s", code, stderr)
	}
	if _, stderr, code := e.run("task", "claim", "a", "--team", "ct", "--member", "tm1", "--session", "s2"); code != 0 {
		t.Fatalf("claim from the new session: exit %d: %s", code, stderr)
	}
	if _, stderr, code := e.run("task", "complete", "a", "--team", "ct", "--member", "tm1", "--session", "s2"); code != 0 {
		t.Fatalf("complete: exit %d: %s", code, stderr)
	}
	if got := e.task("ct", "b").Status; got != teambus.TaskAvailable {
		t.Fatalf("dependent after complete: %s", got)
	}
}

// A sidecar that dies with its agent goes silent: its heartbeat expires,
// the lead probes, nobody answers, the crash is confirmed.
func TestLead_SilentMember_ProbedThenCrashed(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.createTeam("st", fastPolicy(), "tm1", "tm2")
	e.addTask("st", "a")
	e.startLead("st", "L1")
	agent, side := e.startTeammate("st", "tm1", "s1")
	e.startTeammate("st", "tm2", "s2")
	if _, err := e.svc.Claim(ctx, actor("st", "tm1", "s1"), "a"); err != nil {
		t.Fatal(err)
	}
	side.kill(t) // the sidecar first, so nobody reports the agent's exit
	agent.kill(t)
	e.waitMemberStatus("st", "tm1", teambus.MemberCrashed, 20*time.Second)
	// The crash record comes first, the requeue right after it.
	e.waitFor(10*time.Second, "the crashed member's task requeued", func() error {
		if got := e.task("st", "a").Status; got != teambus.TaskAvailable {
			return fmt.Errorf("task after confirmed crash: %s", got)
		}
		return nil
	})
	// The notice follows the crash record.
	e.waitFor(10*time.Second, "one crash notice", func() error {
		if n := count(e.mail("st"), teambus.MsgSystem, "tm1 crashed"); n != 1 {
			return fmt.Errorf("%d crash notices", n)
		}
		return nil
	})
	if n := count(e.mail("st"), teambus.MsgStatusCheck, ""); n < 1 {
		t.Fatal("no status_check was sent before the crash was confirmed")
	}
	// The live member was never declared crashed.
	if got := e.memberStatus("st", "tm2"); got != teambus.MemberIdle {
		t.Fatalf("live member tm2: %s", got)
	}
}

// A member with a fresh heartbeat but no activity for stuck-timeout is
// probed; its sidecar answers, so it is not crashed.
func TestLead_StuckMember_AnswersProbe_NotCrashed(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pol := fastPolicy()
	pol.StuckTimeout = 2 * time.Second
	e.createTeam("wt", pol, "tm1")
	e.addTask("wt", "a")
	e.startLead("wt", "L1")
	e.startTeammate("wt", "tm1", "s1")
	if _, err := e.svc.Claim(ctx, actor("wt", "tm1", "s1"), "a"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(15*time.Second, "a status reply to a stuck probe", func() error {
		if n := count(e.mail("wt"), teambus.MsgStatus, "tm1 alive"); n < 1 {
			return fmt.Errorf("no status reply yet")
		}
		return nil
	})
	// Well past probe-timeout after the reply: still not crashed.
	deadline := time.Now().Add(2 * pol.ProbeTimeout)
	for time.Now().Before(deadline) {
		if got := e.memberStatus("wt", "tm1"); got != teambus.MemberInProgress {
			t.Fatalf("member that answered the probe is %s", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := count(e.mail("wt"), teambus.MsgSystem, "crashed"); n != 0 {
		t.Fatalf("%d crash notices for a live member", n)
	}
}

// Past the crash limit the task and member are paused and exactly one
// escalation reaches the lead's inbox, however often the lead restarts.
func TestLead_CrashLimit_OneEscalation(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pol := fastPolicy()
	pol.CrashLimit = 1
	e.createTeam("el", pol, "tm1")
	e.addTask("el", "a")
	_, leadSide := e.startLead("el", "L1")
	for i, s := range []string{"s1", "s2"} {
		agent, side := e.startTeammate("el", "tm1", s)
		if _, err := e.svc.Claim(ctx, actor("el", "tm1", s), "a"); err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
		agent.kill(t)
		side.exitCode(t, 10*time.Second)
	}
	e.waitMemberStatus("el", "tm1", teambus.MemberPaused, 10*time.Second)
	e.waitFor(10*time.Second, "the task paused", func() error {
		if got := e.task("el", "a").Status; got != teambus.TaskPaused {
			return fmt.Errorf("task past the crash limit: %s", got)
		}
		return nil
	})
	escalations := func() int { return count(e.mail("el"), teambus.MsgEscalation, "tm1") }
	e.waitFor(10*time.Second, "an escalation", func() error {
		if n := escalations(); n != 1 {
			return fmt.Errorf("%d escalations", n)
		}
		return nil
	})
	// Restart the lead twice (kill -9, same session): still one.
	for i := 0; i < 2; i++ {
		leadSide.kill(t)
		_, leadSide = e.startLead("el", "L1")
		e.waitLeadBeats("el", 2) // each persisted beat is followed by a reconcile
	}
	if n := escalations(); n != 1 {
		t.Fatalf("%d escalations after lead restarts, want 1", n)
	}
	m, _, _ := e.svc.Store().Member(ctx, "el", "tm1")
	if m.EscalatePending {
		t.Fatal("escalation still pending after it was sent")
	}
	// A paused member can not re-register.
	if _, stderr, code := e.run("join", "--team", "el", "--member", "tm1", "--session", "s3"); code != teambus.ExitPermanent {
		t.Fatalf("join of a paused member: exit %d: %s", code, stderr)
	}
}

// shutdown_request: a busy member answers approve:false; an idle one
// approves and its sidecar exits cleanly.
func TestTeammate_ShutdownHandshake(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.createTeam("sh", fastPolicy(), "tm1", "tm2")
	e.addTask("sh", "a")
	e.startLead("sh", "L1")
	e.startTeammate("sh", "tm1", "s1")
	_, idleSide := e.startTeammate("sh", "tm2", "s2")
	if _, err := e.svc.Claim(ctx, actor("sh", "tm1", "s1"), "a"); err != nil {
		t.Fatal(err)
	}
	tm, _, _ := e.svc.Store().Team(ctx, "sh")
	lead := actor("sh", teambus.Lead, tm.LeadSession)
	for _, to := range []string{"tm1", "tm2"} {
		if _, err := e.svc.Send(ctx, teamapi.SendRequest{Actor: lead, To: to, Type: teambus.MsgShutdownRequest, Body: "done for today"}); err != nil {
			t.Fatal(err)
		}
	}
	responses := func() map[string]bool {
		out := map[string]bool{}
		_ = e.svc.Mailbox("sh").Replay(ctx, mailbox.ReplayFilter{Type: teambus.MsgShutdownResponse}, func(m teambus.Message) error {
			var d struct{ Approve bool }
			_ = json.Unmarshal(m.Data, &d)
			out[m.From] = d.Approve
			return nil
		})
		return out
	}
	e.waitFor(10*time.Second, "two shutdown responses", func() error {
		if r := responses(); len(r) != 2 {
			return fmt.Errorf("%v", r)
		}
		return nil
	})
	if r := responses(); r["tm1"] || !r["tm2"] {
		t.Fatalf("responses %v: want tm1 false (busy), tm2 true (idle)", r)
	}
	if code := idleSide.exitCode(t, 10*time.Second); code != 0 {
		t.Fatalf("idle sidecar exit %d", code)
	}
	if got := e.memberStatus("sh", "tm2"); got != teambus.MemberShutdown {
		t.Fatalf("tm2 after approved shutdown: %s", got)
	}
	if got := e.memberStatus("sh", "tm1"); got != teambus.MemberInProgress {
		t.Fatalf("tm1 after refused shutdown: %s", got)
	}
}

// SIGTERM is a clean shutdown, not a crash: the task goes back with its
// checkpoint, the crash count stays 0.
func TestTeammate_SIGTERM_CleanShutdown(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.createTeam("tt", fastPolicy(), "tm1")
	e.addTask("tt", "a")
	e.startLead("tt", "L1")
	_, side := e.startTeammate("tt", "tm1", "s1")
	if _, err := e.svc.Claim(ctx, actor("tt", "tm1", "s1"), "a"); err != nil {
		t.Fatal(err)
	}
	_ = side.cmd.Process.Signal(sigterm)
	if code := side.exitCode(t, 10*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
	m, _, _ := e.svc.Store().Member(ctx, "tt", "tm1")
	if m.Status != teambus.MemberShutdown || m.CrashCount != 0 {
		t.Fatalf("member after SIGTERM: %s crashes %d", m.Status, m.CrashCount)
	}
	if got := e.task("tt", "a").Status; got != teambus.TaskAvailable {
		t.Fatalf("task after clean shutdown: %s", got)
	}
}

// After zombie-max a zombie releases its task with its checkpoint and
// exits.
func TestTeammate_ZombieMax_ReleasesAndExits(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pol := fastPolicy()
	pol.ZombieMax = 2 * time.Second
	e.createTeam("zm", pol, "tm1")
	e.addTask("zm", "a")
	leadAgent, _ := e.startLead("zm", "L1")
	_, side := e.startTeammate("zm", "tm1", "s1")
	if _, err := e.svc.Claim(ctx, actor("zm", "tm1", "s1"), "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Checkpoint(ctx, teamapi.CheckpointRequest{Actor: actor("zm", "tm1", "s1"), Done: []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	leadAgent.kill(t)
	if code := side.exitCode(t, 20*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(side.output(), "zombie_max") {
		t.Fatalf("sidecar did not stop for zombie-max:\n%s", side.output())
	}
	ta := e.task("zm", "a")
	if ta.Status != teambus.TaskAvailable || ta.Checkpoint == nil || len(ta.Checkpoint.TasksCompleted) != 1 {
		t.Fatalf("task after zombie-max: %s %+v", ta.Status, ta.Checkpoint)
	}
}

// A blocked task with no decision for blocked-timeout goes back to the
// queue.
func TestTeammate_BlockedTimeout_Requeues(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pol := fastPolicy()
	pol.BlockedTimeout = time.Second
	e.createTeam("bt", pol, "tm1")
	e.addTask("bt", "a")
	e.startLead("bt", "L1")
	e.startTeammate("bt", "tm1", "s1")
	if _, err := e.svc.Claim(ctx, actor("bt", "tm1", "s1"), "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Block(ctx, actor("bt", "tm1", "s1"), "a", "", "waiting for an API key"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(10*time.Second, "blocked task requeued", func() error {
		if got := e.task("bt", "a").Status; got != teambus.TaskAvailable {
			return fmt.Errorf("status %s", got)
		}
		return nil
	})
}

// The resume validation sequence and its exit codes.
func TestResume_Validation_ExitCodes(t *testing.T) {
	e := newEnv(t)
	pol := fastPolicy()
	pol.TakeoverAfter = time.Hour
	e.createTeam("rv", pol, "tm1")
	cases := []struct {
		name string
		args []string
		want int
	}{
		{"unknown team", []string{"team", "resume", "nope", "--session", "x"}, 2},
		{"bad team id", []string{"team", "resume", "a.b", "--session", "x"}, 2},
		{"pending team", []string{"team", "resume", "rv", "--session", "x"}, 2},
	}
	for _, c := range cases {
		if _, stderr, code := e.run(c.args...); code != c.want {
			t.Errorf("%s: exit %d, want %d: %s", c.name, code, c.want, stderr)
		}
	}
	e.startLead("rv", "L1")
	// already_lead needs the lead's heartbeat, written just after it
	// attached: wait for one.
	e.waitLeadBeats("rv", 1)
	if out, stderr, code := e.run("team", "resume", "rv", "--session", "L1", "--json"); code != 0 || !strings.Contains(out, `"already_lead"`) { // issue 12 item 9
		t.Errorf("same session: exit %d: %s %s", code, out, stderr)
	}
	if _, stderr, code := e.run("team", "resume", "rv", "--session", "L2"); code != 1 || !strings.Contains(stderr, "has a live lead") || !strings.Contains(stderr, "--force") {
		t.Errorf("live lead, other session: exit %d, want 1: %s", code, stderr)
	}
	if out, stderr, code := e.run("team", "resume", "rv", "--session", "L2", "--force", "--json"); code != 0 || !strings.Contains(out, `"takeover"`) {
		t.Errorf("forced takeover: exit %d: %s %s", code, out, stderr)
	}
	// L2 attached without a sidecar and never releases: another session
	// waits for takeover-after, and probe says so (not "resumable").
	if p, _, code := e.probeThenResume("rv", "L3"); code != 1 || p.Decision == team.DecisionResumable || p.Why == "" {
		t.Errorf("probe %q (%s), resume by another session exit %d: want refused and probe saying why", p.Decision, p.Why, code)
	}
	if _, _, code := e.run("team", "complete", "rv"); code != 0 {
		t.Fatalf("complete: exit %d", code)
	}
	if _, stderr, code := e.run("team", "resume", "rv", "--session", "L3"); code != 2 || !strings.Contains(stderr, "team review") {
		t.Errorf("complete team: exit %d, want 2: %s", code, stderr)
	}
	if _, _, code := e.run("team", "review", "rv"); code != 0 {
		t.Errorf("review: exit %d", code)
	}
}
