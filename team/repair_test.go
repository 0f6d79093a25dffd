package team_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// putGarbage writes value under key of team's state bucket with the
// operator's connection, bypassing every check.
func (f *fixture) putGarbage(t *testing.T, teamID, key, value string) uint64 {
	t.Helper()
	b, err := f.conn.JS.KeyValue(testCtx(t), kv.StatePrefix+teamID)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := b.Put(testCtx(t), key, []byte(value))
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// repairEvents returns the state.repaired events of the team's log.
func (f *fixture) repairEvents(t *testing.T, teamID string) []eventlog.Event {
	t.Helper()
	var out []eventlog.Event
	err := f.svc.Events(teamID).Replay(testCtx(t), eventlog.EventFilter{Type: eventlog.EvStateRepaired}, func(r *eventlog.EventRecord) error {
		e := r.Event
		e.Data = append([]byte(nil), e.Data...)
		out = append(out, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Issue 12 item 8: one damaged task record does not take the team down:
// the view lists it, other tasks are claimed, the damaged one is refused
// with the repair hint (exit 2), and repair restores it, once.
func TestRepair_DamagedTaskKeepsTeamWorking(t *testing.T) {
	ctx := testCtx(t)
	f := newFixture(t, team.Config{})
	f.create(t, "alpha", "L", testPolicy(), "tm1", "tm2")
	for _, id := range []string{"t1", "t2", "t3"} {
		f.addTask(t, "alpha", id, 0)
	}
	bad := f.putGarbage(t, "alpha", "task.t2", `{"id":"t2","status":`)

	v, err := f.svc.Show(ctx, "alpha")
	if err != nil {
		t.Fatalf("show with a damaged task: %v", err)
	}
	if len(v.Damaged) != 1 || v.Damaged[0].Key != "task.t2" || v.Damaged[0].Revision != bad || len(v.Tasks) != 2 {
		t.Fatalf("view: damaged %+v, %d tasks; want task.t2 at %d and 2 tasks", v.Damaged, len(v.Tasks), bad)
	}
	if _, err := f.svc.Claim(ctx, actorOf("alpha", "tm1"), "t1"); err != nil {
		t.Fatalf("claim of another task: %v", err)
	}
	_, err = f.svc.Claim(ctx, actorOf("alpha", "tm2"), "t2")
	if !errors.Is(err, kv.ErrDamaged) || teambus.ExitCode(err) != teambus.ExitPermanent {
		t.Fatalf("claim of the damaged task: %v (exit %d), want damaged, exit 2", err, teambus.ExitCode(err))
	}
	for _, spec := range []team.TaskSpec{{ID: "t4", Deps: []string{"t2"}}, {ID: "t2"}} {
		if _, err := f.svc.AddTask(ctx, "alpha", spec); !errors.Is(err, kv.ErrDamaged) {
			t.Errorf("add task %s (deps %v): %v, want damaged", spec.ID, spec.Deps, err)
		}
	}
	if got, err := f.svc.Next(ctx, actorOf("alpha", "tm2")); err != nil || got.ID != "t3" {
		t.Fatalf("next = %v, %v; want t3", got, err)
	}

	plan, err := f.svc.Repair(ctx, "alpha", false)
	if err != nil || len(plan) != 1 || plan[0].Action != kv.RepairRestore || plan[0].Applied {
		t.Fatalf("plan = %+v, %v", plan, err)
	}
	if evs := f.repairEvents(t, "alpha"); len(evs) != 0 {
		t.Fatalf("a dry run logged %d event(s)", len(evs))
	}
	done, err := f.svc.Repair(ctx, "alpha", true)
	if err != nil || len(done) != 1 || !done[0].Applied {
		t.Fatalf("repair = %+v, %v", done, err)
	}
	if tk := f.task(t, "alpha", "t2"); tk.Status != teambus.TaskAvailable {
		t.Errorf("restored t2 is %s, want available", tk.Status)
	}
	// t2 is claimable again: tm1 completes t1 first.
	if _, _, err := f.svc.Complete(ctx, actorOf("alpha", "tm1"), "t1", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Claim(ctx, actorOf("alpha", "tm1"), "t2"); err != nil {
		t.Errorf("claim of the restored task: %v", err)
	}

	// A record with no good revision is deleted, and logged.
	f.putGarbage(t, "alpha", "member.ghost", "\x1b[2Jnot a member")
	v, err = f.svc.Show(ctx, "alpha")
	if err != nil || len(v.Damaged) != 1 || len(v.Members) != 2 {
		t.Fatalf("view with a damaged member: %+v, %v", v.Damaged, err)
	}
	if _, err := f.svc.AddMember(ctx, "alpha", team.MemberSpec{ID: "ghost"}); !errors.Is(err, kv.ErrDamaged) {
		t.Errorf("add a member whose record is damaged: %v, want damaged", err)
	}
	done, err = f.svc.Repair(ctx, "alpha", true)
	if err != nil || len(done) != 1 || done[0].Action != kv.RepairDelete || !done[0].Applied {
		t.Fatalf("repair = %+v, %v; want the member record deleted", done, err)
	}
	if v, err := f.svc.Show(ctx, "alpha"); err != nil || len(v.Damaged) != 0 {
		t.Fatalf("after repair: %v", err)
	}
	evs := f.repairEvents(t, "alpha")
	if len(evs) != 2 {
		t.Fatalf("%d state.repaired events, want 2", len(evs))
	}
	for i, want := range []string{`"key":"task.t2"`, `"key":"member.ghost"`} {
		if !bytes.Contains(evs[i].Data, []byte(want)) {
			t.Errorf("event %d data %s lacks %s", i, evs[i].Data, want)
		}
	}

	// Idempotent: nothing left to do, nothing logged.
	again, err := f.svc.Repair(ctx, "alpha", true)
	if err != nil || len(again) != 0 {
		t.Errorf("second repair = %+v, %v", again, err)
	}
	if evs := f.repairEvents(t, "alpha"); len(evs) != 2 {
		t.Errorf("second repair logged: %d events", len(evs))
	}
}

// Issue 12 item 8: a stored message with an unexpected header and an
// undecodable body does not break a member's inbox, lease or the
// mailbox tail: it is skipped (it stays in the stream for replay) and
// the mail around it is delivered.
func TestInbox_UndecodableMessageSkipped(t *testing.T) {
	ctx := testCtx(t)
	f := newFixture(t, team.Config{})
	f.create(t, "alpha", "L", testPolicy(), "tm1", "tm2")
	send := func(body string) {
		t.Helper()
		if _, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: actorOf("alpha", "tm1"), To: "tm2", Type: teambus.MsgInfo, Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	send("before")
	for _, junk := range []*nats.Msg{
		{Subject: "tb.alpha.mbx.tm2.info.tm1", Data: []byte("\x00not json"), Header: nats.Header{"X-Odd": []string{"\x01"}, "Teambus-Epoch": []string{"-7"}}},
		{Subject: "tb.alpha.mbx.tm2.info.tm1", Data: []byte(`{"id":"x","to":"tm2","ts":"not a time"}`)},
	} {
		if _, err := f.conn.JS.PublishMsg(ctx, junk); err != nil {
			t.Fatal(err)
		}
	}
	send("after")

	l, err := f.svc.Lease(ctx, actorOf("alpha", "tm2"), mailbox.LeaseOptions{})
	if err != nil {
		t.Fatalf("lease: %v", err)
	}
	if got := bodies(l.Messages); got != "before,after" {
		t.Errorf("leased %s, want before,after", got)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	msgs, err := f.svc.Inbox(ctx, actorOf("alpha", "tm2"), mailbox.InboxOptions{Ack: true})
	if err != nil {
		t.Fatalf("inbox: %v", err)
	}
	if got := bodies(msgs); got != "before,after" {
		t.Errorf("inbox %s, want before,after", got)
	}
	tail, err := f.svc.Mailbox("alpha").Tail(ctx, 10)
	if err != nil || bodies(tail) != "before,after" {
		t.Errorf("tail = %s, %v", bodies(tail), err)
	}
	var undecodable int
	err = f.svc.Mailbox("alpha").Replay(ctx, mailbox.ReplayFilter{OnUndecodable: func(uint64, string) error {
		undecodable++
		return nil
	}}, func(teambus.Message) error { return nil })
	if err != nil || undecodable != 2 {
		t.Errorf("replay: %d undecodable, %v; want 2", undecodable, err)
	}
}

func bodies(msgs []teambus.Message) string {
	out := ""
	for i, m := range msgs {
		if i > 0 {
			out += ","
		}
		out += m.Body
	}
	return out
}
