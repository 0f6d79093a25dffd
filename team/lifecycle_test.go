package team_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus/bustest"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

func TestService_Join_FencesOldSession(t *testing.T) {
	f := newFixture(t, team.Config{})
	ctx := testCtx(t)
	if _, err := f.svc.CreateTeam(ctx, "alpha", "L", []team.MemberSpec{{ID: "tm1"}}, testPolicy()); err != nil {
		t.Fatal(err)
	}
	f.addTask(t, "alpha", "x", 0)
	f.addTask(t, "alpha", "y", 0)

	m, err := f.svc.Join(ctx, "alpha", "tm1", "s1")
	if err != nil || m.Epoch != 1 || m.Session != "s1" {
		t.Fatalf("join s1 = %+v, %v", m, err)
	}
	s1 := team.Actor{Team: "alpha", Member: "tm1", Session: "s1"}
	if _, err := f.svc.Claim(ctx, s1, "x"); err != nil {
		t.Fatal(err)
	}
	m, err = f.svc.Join(ctx, "alpha", "tm1", "s2")
	if err != nil || m.Epoch != 2 || m.Session != "s2" {
		t.Fatalf("join s2 = %+v, %v", m, err)
	}
	s2 := team.Actor{Team: "alpha", Member: "tm1", Session: "s2"}

	before := f.msgCount(t, "alpha")
	for name, call := range map[string]func() error{
		"complete": func() error { _, _, err := f.svc.Complete(ctx, s1, "x", ""); return err },
		"claim":    func() error { _, err := f.svc.Claim(ctx, s1, "y"); return err },
		"next":     func() error { _, err := f.svc.Next(ctx, s1); return err },
		"release":  func() error { _, err := f.svc.Release(ctx, s1, "x"); return err },
		"checkpoint": func() error {
			_, err := f.svc.Checkpoint(ctx, teamapi.CheckpointRequest{Actor: s1, LastAction: "z"})
			return err
		},
		"send": func() error {
			_, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: s1, Body: "from the past"})
			return err
		},
		"inbox": func() error { _, err := f.svc.Inbox(ctx, s1, mailbox.InboxOptions{}); return err },
	} {
		err := call()
		if !errors.Is(err, teambus.ErrFenced) || teambus.ExitCode(err) != teambus.ExitConflict {
			t.Errorf("%s with the old session = %v, want ErrFenced (exit 3)", name, err)
		}
	}
	// No session at all is bad input, not a replaced incarnation.
	if _, err := f.svc.Claim(ctx, team.Actor{Team: "alpha", Member: "tm1"}, "y"); teambus.ExitCode(err) != teambus.ExitPermanent {
		t.Errorf("claim with no session = %v, want exit 2", err)
	}
	if got := f.msgCount(t, "alpha"); got != before {
		t.Errorf("fenced send stored mail (%d → %d)", before, got)
	}
	if tk := f.task(t, "alpha", "x"); tk.Status != teambus.TaskInProgress || tk.Checkpoint != nil {
		t.Errorf("fenced commands changed task x: %+v", tk)
	}
	// The new incarnation holds the member's task and may finish it.
	if _, _, err := f.svc.Complete(ctx, s2, "x", ""); err != nil {
		t.Errorf("complete with the new session: %v", err)
	}
	if _, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: s2, Body: "hello"}); err != nil {
		t.Errorf("send with the new session: %v", err)
	}
	for _, bad := range []string{"", strings.Repeat("s", 129), "a\nb"} {
		if _, err := f.svc.Join(ctx, "alpha", "tm1", bad); !errors.Is(err, teambus.ErrInvalid) {
			t.Errorf("join with session %q = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := f.svc.Join(ctx, "alpha", "tm9", "s"); !errors.Is(err, teambus.ErrNotFound) {
		t.Errorf("join as a non-member = %v, want ErrNotFound", err)
	}
}

func TestService_MarkCrashed(t *testing.T) {
	f := newFixture(t, team.Config{})
	pol := testPolicy()
	pol.CrashLimit = 1
	f.create(t, "alpha", "L", pol, "tm1")
	ctx := testCtx(t)
	f.addTask(t, "alpha", "x", 0)
	tm1 := actorOf("alpha", "tm1")
	if _, err := f.svc.Claim(ctx, tm1, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Checkpoint(ctx, teamapi.CheckpointRequest{Actor: tm1, Done: []string{"step1"}, Remaining: []string{"step2"}, LastAction: "halfway"}); err != nil {
		t.Fatal(err)
	}

	// First crash: counted once however often it is reported.
	res, err := f.svc.MarkCrashed(ctx, "alpha", "tm1", 1, "pid exited")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Counted || res.Paused || res.Crashes != 1 || !reflect.DeepEqual(res.Tasks, []string{"x"}) {
		t.Fatalf("first crash = %+v", res)
	}
	for i := 0; i < 2; i++ {
		again, err := f.svc.MarkCrashed(ctx, "alpha", "tm1", 1, "lead re-check")
		if err != nil || again.Counted || again.Crashes != 1 {
			t.Fatalf("repeated report %d = %+v, %v; want not counted, 1 crash", i, again, err)
		}
	}
	m := f.member(t, "alpha", "tm1")
	if m.Status != teambus.MemberCrashed || m.CrashCount != 1 || m.EscalatePending {
		t.Fatalf("member after the first crash = %+v", m)
	}
	tk := f.task(t, "alpha", "x")
	if tk.Status != teambus.TaskAvailable || tk.AssignedTo != "" || tk.Crashes != 1 {
		t.Fatalf("task after the first crash = %+v, want back in the queue", tk)
	}
	if tk.Checkpoint == nil || tk.Checkpoint.LastAction != "halfway" || !reflect.DeepEqual(tk.Checkpoint.TasksRemaining, []string{"step2"}) {
		t.Errorf("requeued task lost its checkpoint: %+v", tk.Checkpoint)
	}
	// The crashed incarnation is fenced.
	if _, err := f.svc.Claim(ctx, tm1, "x"); !errors.Is(err, teambus.ErrFenced) {
		t.Errorf("claim by the crashed incarnation = %v, want ErrFenced", err)
	}

	// Respawn: the next epoch continues from the checkpoint.
	if _, err := f.svc.Join(ctx, "alpha", "tm1", "s-respawn"); err != nil {
		t.Fatal(err)
	}
	tm1b := team.Actor{Team: "alpha", Member: "tm1", Session: "s-respawn"}
	tk, err = f.svc.Claim(ctx, tm1b, "x")
	if err != nil || tk.Attempts != 2 || tk.Checkpoint == nil {
		t.Fatalf("claim by the respawn = %+v, %v", tk, err)
	}
	// A late report about the old epoch changes nothing.
	if late, err := f.svc.MarkCrashed(ctx, "alpha", "tm1", 1, "late"); err != nil || late.Counted {
		t.Errorf("report about a replaced epoch = %+v, %v; want not counted", late, err)
	}
	if tk := f.task(t, "alpha", "x"); tk.Status != teambus.TaskInProgress || tk.AssignedTo != "tm1" {
		t.Errorf("a stale crash report requeued the respawn's task: %+v", tk)
	}

	// Second crash passes crash-limit 1: paused and escalated, once.
	res, err = f.svc.MarkCrashed(ctx, "alpha", "tm1", 2, "pid exited again")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Counted || !res.Paused || res.Crashes != 2 {
		t.Fatalf("second crash = %+v, want counted and paused", res)
	}
	if again, err := f.svc.MarkCrashed(ctx, "alpha", "tm1", 2, "again"); err != nil || again.Counted || again.Paused {
		t.Errorf("repeated second report = %+v, %v", again, err)
	}
	m = f.member(t, "alpha", "tm1")
	if m.Status != teambus.MemberPaused || !m.EscalatePending || m.CrashCount != 2 {
		t.Errorf("member after the second crash = %+v, want paused with an escalation pending", m)
	}
	tk = f.task(t, "alpha", "x")
	if tk.Status != teambus.TaskPaused || tk.AssignedTo != "" || tk.Checkpoint == nil {
		t.Errorf("task after the second crash = %+v, want paused with its checkpoint", tk)
	}
	if _, err := f.svc.Join(ctx, "alpha", "tm1", "s3"); !errors.Is(err, teambus.ErrState) {
		t.Errorf("join of a paused member = %v, want ErrState", err)
	}
}

func TestService_MarkCrashed_CrashLimitZero(t *testing.T) {
	f := newFixture(t, team.Config{})
	pol := testPolicy()
	pol.CrashLimit = 0
	f.create(t, "alpha", "L", pol, "tm1")
	ctx := testCtx(t)
	f.addTask(t, "alpha", "x", 0)
	if _, err := f.svc.Claim(ctx, actorOf("alpha", "tm1"), "x"); err != nil {
		t.Fatal(err)
	}
	res, err := f.svc.MarkCrashed(ctx, "alpha", "tm1", 1, "gone")
	if err != nil || !res.Paused {
		t.Fatalf("crash with crash-limit 0 = %+v, %v; want paused at once", res, err)
	}
	if tk := f.task(t, "alpha", "x"); tk.Status != teambus.TaskPaused {
		t.Errorf("task = %s, want paused", tk.Status)
	}
}

func TestService_MarkCrashed_Concurrent(t *testing.T) {
	f := newFixture(t, team.Config{})
	f.create(t, "alpha", "L", testPolicy(), "tm1")
	ctx := testCtx(t)
	f.addTask(t, "alpha", "x", 0)
	if _, err := f.svc.Claim(ctx, actorOf("alpha", "tm1"), "x"); err != nil {
		t.Fatal(err)
	}
	// The lead, a restarted lead and the teammate sidecar report the same
	// crash at once: it is counted once.
	const reporters = 4
	results := make(chan team.CrashResult, reporters)
	errs := make(chan error, reporters)
	start := make(chan struct{})
	for i := 0; i < reporters; i++ {
		go func() {
			<-start
			res, err := f.svc.MarkCrashed(ctx, "alpha", "tm1", 1, fmt.Sprint("reporter ", i))
			results <- res
			errs <- err
		}()
	}
	close(start)
	counted := 0
	for i := 0; i < reporters; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		if (<-results).Counted {
			counted++
		}
	}
	if counted != 1 {
		t.Errorf("%d reporters counted the crash, want 1", counted)
	}
	if m := f.member(t, "alpha", "tm1"); m.CrashCount != 1 {
		t.Errorf("crash count = %d, want 1", m.CrashCount)
	}
	if tk := f.task(t, "alpha", "x"); tk.Crashes != 1 || tk.Status != teambus.TaskAvailable {
		t.Errorf("task = %+v, want one crash, available", tk)
	}
}

func TestService_CreateTeam_RefusedCreatesNothing(t *testing.T) {
	f := newFixture(t, team.Config{})
	ctx := testCtx(t)
	bad := testPolicy()
	bad.MaxAttempts = 0
	tests := []struct {
		name    string
		id      string
		session string
		members []team.MemberSpec
		pol     teambus.Policy
		inErr   string
	}{
		{"team id with a dot", "a.b", "", nil, testPolicy(), "team id"},
		{"team id wildcard", "a>", "", nil, testPolicy(), "team id"},
		{"empty team id", "", "", nil, testPolicy(), "team id"},
		{"65 character team id", strings.Repeat("t", 65), "", nil, testPolicy(), "team id"},
		{"member lead", "t1", "", []team.MemberSpec{{ID: teambus.Lead}}, testPolicy(), "reserved"},
		{"member all", "t2", "", []team.MemberSpec{{ID: teambus.All}}, testPolicy(), "reserved"},
		{"member with a slash", "t3", "", []team.MemberSpec{{ID: "a/b"}}, testPolicy(), "member id"},
		{"member twice", "t4", "", []team.MemberSpec{{ID: "m"}, {ID: "m"}}, testPolicy(), "twice"},
		{"bad lead session", "t5", "a\tb", nil, testPolicy(), "session"},
		{"bad policy", "t6", "", nil, bad, "max-attempts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.svc.CreateTeam(ctx, tt.id, tt.session, tt.members, tt.pol)
			if !errors.Is(err, teambus.ErrInvalid) || teambus.ExitCode(err) != teambus.ExitPermanent {
				t.Fatalf("CreateTeam = %v, want ErrInvalid (exit 2)", err)
			}
			if !strings.Contains(err.Error(), tt.inErr) {
				t.Errorf("error %q does not mention %q", err, tt.inErr)
			}
		})
	}
	teams, err := f.svc.Store().ListTeams(ctx)
	if err != nil || len(teams) != 0 {
		t.Errorf("teams after refused creates = %v, %v", teams, err)
	}
	streams := f.conn.JS.StreamNames(ctx)
	var names []string
	for n := range streams.Name() {
		names = append(names, n)
	}
	if len(names) != 0 {
		t.Errorf("streams after refused creates: %v", names)
	}
}

func TestService_CreateTeam(t *testing.T) {
	f := newFixture(t, team.Config{})
	ctx := testCtx(t)
	specs := []team.MemberSpec{{ID: "be", Role: "backend dev", Quantum: "api"}, {ID: "fe"}}
	tm, err := f.svc.CreateTeam(ctx, "alpha", "", specs, testPolicy())
	if err != nil {
		t.Fatal(err)
	}
	if tm.Status != teambus.TeamPending || tm.Policy != testPolicy() || tm.MaxBody != teambus.DefaultMaxBody {
		t.Errorf("team = %+v", tm)
	}
	snap, err := f.svc.Store().Snapshot(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Team.Policy != testPolicy() {
		t.Errorf("stored policy = %v, want %v", snap.Team.Policy, testPolicy())
	}
	if got := snap.MemberIDs(); !reflect.DeepEqual(got, []string{"be", "fe"}) {
		t.Errorf("members = %v", got)
	}
	if be := snap.Members["be"]; be.Role != "backend dev" || be.Quantum != "api" || be.Status != teambus.MemberSpawned || be.Epoch != 0 {
		t.Errorf("member be = %+v", be)
	}
	_, err = f.svc.CreateTeam(ctx, "alpha", "", nil, testPolicy())
	if !errors.Is(err, teambus.ErrState) {
		t.Errorf("second create = %v, want ErrState", err)
	}
	// Members added later get an inbox that starts after existing mail.
	if _, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: team.Actor{Team: "alpha", Member: "be"}, To: teambus.All, Body: "before qa"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.AddMember(ctx, "alpha", team.MemberSpec{ID: "qa"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.AddMember(ctx, "alpha", team.MemberSpec{ID: "qa"}); !errors.Is(err, teambus.ErrState) {
		t.Errorf("second AddMember = %v, want ErrState", err)
	}
	if _, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: team.Actor{Team: "alpha", Member: "be"}, To: "qa", Body: "welcome"}); err != nil {
		t.Fatal(err)
	}
	msgs, err := f.svc.Inbox(ctx, team.Actor{Team: "alpha", Member: "qa"}, mailbox.InboxOptions{})
	if err != nil || !reflect.DeepEqual(msgBodies(msgs), []string{"welcome"}) {
		t.Errorf("qa inbox = %v, %v", msgBodies(msgs), err)
	}
}

func TestService_RestartKeepsMailAndTasks(t *testing.T) {
	t.Parallel() // waits on server timers
	dir := t.TempDir()
	f := newFixtureDir(t, dir, team.Config{})
	f.create(t, "alpha", "L", testPolicy(), "tm1", "tm2")
	ctx := testCtx(t)
	f.addTask(t, "alpha", "a", 3)
	f.addTask(t, "alpha", "b", 0, "a")
	tm1, ld := actorOf("alpha", "tm1"), leadOf("alpha", "L")
	if _, err := f.svc.Claim(ctx, tm1, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Checkpoint(ctx, teamapi.CheckpointRequest{Actor: tm1, Done: []string{"x"}, LastAction: "before restart"}); err != nil {
		t.Fatal(err)
	}
	var sent []mailbox.SendResult
	for i := 0; i < 10; i++ {
		from, to := tm1, teambus.Lead
		if i%2 == 1 {
			from, to = ld, "tm1"
		}
		res, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: from, ID: fmt.Sprint("k", i), To: to, Body: fmt.Sprint("message ", i)})
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, res)
	}
	// tm1 acks the first mail it got; that too must survive.
	if _, err := f.svc.Ack(ctx, tm1, []uint64{sent[1].Seq}); err != nil {
		t.Fatal(err)
	}
	beforeSnap, err := f.svc.Store().Snapshot(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}

	f.close(t)
	g := newFixtureDir(t, dir, team.Config{})
	ctx = testCtx(t)

	snap, err := g.svc.Store().Snapshot(ctx, "alpha")
	if err != nil {
		t.Fatalf("snapshot after restart: %v", err)
	}
	if !reflect.DeepEqual(snap.Tasks, beforeSnap.Tasks) || !reflect.DeepEqual(snap.TaskRev, beforeSnap.TaskRev) {
		t.Errorf("tasks after restart = %v, want %v", snap.Tasks, beforeSnap.Tasks)
	}
	if !reflect.DeepEqual(snap.Members, beforeSnap.Members) || !reflect.DeepEqual(snap.Team, beforeSnap.Team) {
		t.Errorf("team or members changed across the restart")
	}
	if a := snap.Tasks["a"]; a.Status != teambus.TaskInProgress || a.Checkpoint == nil || a.Checkpoint.LastAction != "before restart" {
		t.Errorf("task a after restart = %+v", a)
	}
	var replayed []uint64
	err = g.svc.Mailbox("alpha").Replay(ctx, mailbox.ReplayFilter{}, func(m teambus.Message) error {
		replayed = append(replayed, m.Seq)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var want []uint64
	for _, s := range sent {
		want = append(want, s.Seq)
	}
	if !reflect.DeepEqual(replayed, want) {
		t.Errorf("mailbox after restart = %v, want every sent message %v", replayed, want)
	}
	// Mail never read before the restart is in the inbox at once.
	msgs, err := g.svc.Inbox(ctx, ld, mailbox.InboxOptions{})
	if err != nil || len(msgs) != 5 {
		t.Errorf("lead inbox after restart = %v, %v; want 5 messages", msgBodies(msgs), err)
	}
	// tm1's other mail was delivered to its ack (Ack reads the inbox) but
	// not acked: it comes back, the acked message never does. It may take
	// up to ack-wait: TestService_RestartInboxImmediate.
	wantInbox := []string{"message 3", "message 5", "message 7", "message 9"}
	bustest.CheckFor(t, mailbox.InboxAckWait+5*time.Second, 50*time.Millisecond, func() error {
		msgs, err := g.svc.Inbox(ctx, tm1, mailbox.InboxOptions{})
		if err != nil {
			return err
		}
		if got := msgBodies(msgs); !reflect.DeepEqual(got, wantInbox) {
			if len(got) > 0 && got[0] == "message 1" {
				t.Fatalf("acked message 1 came back after the restart: %v", got)
			}
			return fmt.Errorf("tm1 inbox = %v, want %v", got, wantInbox)
		}
		return nil
	})
	// The dedupe window survives the restart too.
	dup, err := g.svc.Send(ctx, teamapi.SendRequest{Actor: tm1, ID: "k0", Body: "retry after restart"})
	if err != nil || !dup.Duplicate || dup.Seq != sent[0].Seq {
		t.Errorf("resend of k0 after restart = %+v, %v; want duplicate of seq %d", dup, err, sent[0].Seq)
	}
	// And work goes on.
	if _, _, err := g.svc.Complete(ctx, tm1, "a", ""); err != nil {
		t.Fatal(err)
	}
	if b := g.task(t, "alpha", "b"); b.Status != teambus.TaskAvailable {
		t.Errorf("b after completing a post-restart = %s", b.Status)
	}
}

// TestService_RestartInboxImmediate: Inbox reads mail by fetching it from
// the member's consumer and Nak-ing it, and a Nak is not persisted. After a
// node restart, mail that was read but not acked counts as delivered and
// awaiting its ack; the inbox consumer's short ack wait (mailbox.InboxAckWait,
// not the team's ack-wait of a minute here) brings it back soon.
func TestService_RestartInboxImmediate(t *testing.T) {
	dir := t.TempDir()
	f := newFixtureDir(t, dir, team.Config{})
	pol := testPolicy()
	pol.AckWait = time.Minute
	f.create(t, "alpha", "L", pol, "tm1")
	ctx := testCtx(t)
	if _, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: leadOf("alpha", "L"), To: "tm1", Body: "read before the restart"}); err != nil {
		t.Fatal(err)
	}
	if msgs, err := f.svc.Inbox(ctx, actorOf("alpha", "tm1"), mailbox.InboxOptions{}); err != nil || len(msgs) != 1 {
		t.Fatalf("inbox before restart = %v, %v", msgBodies(msgs), err)
	}
	f.close(t)
	g := newFixtureDir(t, dir, team.Config{})
	bustest.CheckFor(t, mailbox.InboxAckWait+5*time.Second, 100*time.Millisecond, func() error {
		msgs, err := g.svc.Inbox(testCtx(t), actorOf("alpha", "tm1"), mailbox.InboxOptions{})
		if err != nil || len(msgs) != 1 {
			return fmt.Errorf("inbox after restart = %v, %v; want the unacked message", msgBodies(msgs), err)
		}
		return nil
	})
}

// A crash notice says "with its checkpoint" only of a task that has one
// (issue 23 item 5): the crash result says which tasks have one.
func TestService_MarkCrashed_NoticeSaysCheckpointOnlyWhenThere(t *testing.T) {
	f := newFixture(t, team.Config{})
	f.create(t, "alpha", "L", testPolicy(), "tm1", "tm2")
	ctx := testCtx(t)
	f.addTask(t, "alpha", "engine", 0)
	f.addTask(t, "alpha", "wheels", 0)
	tm1, tm2 := actorOf("alpha", "tm1"), actorOf("alpha", "tm2")
	if _, err := f.svc.Claim(ctx, tm1, "engine"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Claim(ctx, tm2, "wheels"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Checkpoint(ctx, teamapi.CheckpointRequest{Actor: tm2, LastAction: "two wheels on"}); err != nil {
		t.Fatal(err)
	}
	res, err := f.svc.MarkCrashed(ctx, "alpha", "tm1", 1, "pid exited")
	if err != nil || len(res.Checkpointed) != 0 || !reflect.DeepEqual(res.Tasks, []string{"engine"}) {
		t.Fatalf("crash without a checkpoint = %+v, %v; want task engine, none checkpointed", res, err)
	}
	if n := teambus.CrashNotice("alpha", "tm1", "pid exited", res); strings.Contains(n, "with its checkpoint") || !strings.Contains(n, "without a checkpoint") {
		t.Errorf("notice for a task without a checkpoint: %q", n)
	}
	res, err = f.svc.MarkCrashed(ctx, "alpha", "tm2", 1, "pid exited")
	if err != nil || !reflect.DeepEqual(res.Checkpointed, []string{"wheels"}) {
		t.Fatalf("crash with a checkpoint = %+v, %v; want wheels checkpointed", res, err)
	}
	if n := teambus.CrashNotice("alpha", "tm2", "pid exited", res); !strings.Contains(n, "task wheels back in the queue with its checkpoint") {
		t.Errorf("notice for a task with a checkpoint: %q", n)
	}
}
