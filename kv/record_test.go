package kv_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/kv"
)

// stateKV opens the state bucket of team as the operator does, to write
// garbage into it.
func stateKV(t *testing.T, js jetstream.JetStream, team string) jetstream.KeyValue {
	t.Helper()
	b, err := js.KeyValue(testCtx(t), kv.StatePrefix+team)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// putRaw writes value under key, bypassing every check, and returns its
// revision.
func putRaw(t *testing.T, b jetstream.KeyValue, key, value string) uint64 {
	t.Helper()
	rev, err := b.Put(testCtx(t), key, []byte(value))
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// wantDamagedErr checks that err says the record is damaged, exits 2 and
// names the repair command.
func wantDamagedErr(t *testing.T, what string, err error, team string) {
	t.Helper()
	if !errors.Is(err, kv.ErrDamaged) || teambus.ExitCode(err) != teambus.ExitPermanent {
		t.Fatalf("%s: %v (exit %d), want a damaged record, exit 2", what, err, teambus.ExitCode(err))
	}
	if !strings.Contains(err.Error(), "teambus team repair "+team) {
		t.Errorf("%s: %q does not name `teambus team repair %s`", what, err, team)
	}
}

// Issue 12 item 8: a damaged task or member record is listed, left out,
// and refused with a hint where it is needed; everything else reads.
func TestSnapshot_DamagedRecords(t *testing.T) {
	ctx := testCtx(t)
	s, js := newStore(t)
	createTeam(t, s, "alpha", "tm1", "tm2")
	createTeam(t, s, "beta", "tm1")
	for _, id := range []string{"t1", "t2", "t3"} {
		if _, err := s.PutTask(ctx, "alpha", newTask(t, id), 0); err != nil {
			t.Fatal(err)
		}
	}
	b := stateKV(t, js, "alpha")
	garbage := putRaw(t, b, "task.t2", "{not json")
	putRaw(t, b, "task.t3", `{"id":"t1","status":"available"}`) // another task's id
	putRaw(t, b, "member.tm2", `{"id":"tm2","status":"dancing"}`)
	putRaw(t, b, "activity.tm1", `"yesterday"`)

	snap, err := s.Snapshot(ctx, "alpha")
	if err != nil {
		t.Fatalf("snapshot with damaged records: %v", err)
	}
	var keys []string
	for _, d := range snap.Damaged {
		keys = append(keys, d.Key)
		if d.Reason == "" || strings.ContainsAny(d.Reason, "\n\r\x1b") {
			t.Errorf("damaged %s: reason %q", d.Key, d.Reason)
		}
	}
	if got, want := strings.Join(keys, ","), "activity.tm1,member.tm2,task.t2,task.t3"; got != want {
		t.Fatalf("damaged = %s, want %s", got, want)
	}
	if d, _ := snap.Damage("task.t2"); d.Revision != garbage {
		t.Errorf("damaged task.t2 at revision %d, want %d", d.Revision, garbage)
	}
	if len(snap.Tasks) != 1 || snap.Tasks["t1"] == nil || snap.Tasks["t1"].ID != "t1" {
		t.Errorf("tasks = %v, want only t1 (t3's record must not replace it)", snap.TaskIDs())
	}
	if got := snap.MemberIDs(); len(got) != 1 || got[0] != "tm1" {
		t.Errorf("members = %v, want tm1", got)
	}
	_, err = snap.Task("t2")
	wantDamagedErr(t, "snapshot task t2", err, "alpha")
	_, err = snap.Member("tm2")
	wantDamagedErr(t, "snapshot member tm2", err, "alpha")
	if _, err := snap.Task("t9"); !errors.Is(err, teambus.ErrNotFound) {
		t.Errorf("absent task: %v, want not found", err)
	}
	// Single reads say the same.
	_, _, err = s.Task(ctx, "alpha", "t2")
	wantDamagedErr(t, "read task t2", err, "alpha")
	_, _, err = s.Member(ctx, "alpha", "tm2")
	wantDamagedErr(t, "read member tm2", err, "alpha")
	if _, _, err := s.Task(ctx, "alpha", "t1"); err != nil {
		t.Errorf("read task t1: %v", err)
	}
	// A damaged activity record does not stop activity from being
	// recorded: Touch overwrites it.
	if err := s.Touch(ctx, "alpha", "tm1"); err != nil {
		t.Fatalf("touch over a damaged activity record: %v", err)
	}
	if at, err := s.Activity(ctx, "alpha", "tm1"); err != nil || at.IsZero() {
		t.Errorf("activity after touch = %v, %v", at, err)
	}

	// A damaged team record is fatal for that team only.
	putRaw(t, b, "team", `{"id":"alpha","status":"active","policy":{"heartbeat":"0s"}}`)
	_, err = s.Snapshot(ctx, "alpha")
	wantDamagedErr(t, "snapshot with a damaged team record", err, "alpha")
	_, _, err = s.Team(ctx, "alpha")
	wantDamagedErr(t, "read a damaged team record", err, "alpha")
	if _, err := s.Snapshot(ctx, "beta"); err != nil {
		t.Errorf("another team: %v", err)
	}
}

// The parallel decode of a large team lists damaged records like the
// sequential one.
func TestSnapshot_DamagedRecordLargeTeam(t *testing.T) {
	ctx := testCtx(t)
	s, js := newStore(t)
	createTeam(t, s, "big", "tm1")
	const n = 600
	for i := range n {
		if _, err := s.PutTask(ctx, "big", newTask(t, fmt.Sprintf("t%03d", i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	putRaw(t, stateKV(t, js, "big"), "task.t123", "\x00\x01garbage")
	snap, err := s.Snapshot(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Tasks) != n-1 || len(snap.Damaged) != 1 || snap.Damaged[0].Key != "task.t123" {
		t.Errorf("%d tasks, damaged %+v; want %d and task.t123", len(snap.Tasks), snap.Damaged, n-1)
	}
}

// Issue 12 item 8: repair restores the newest good revision, deletes a
// record without one, refuses to delete the team record, and does
// nothing the second time.
func TestStore_Repair(t *testing.T) {
	ctx := testCtx(t)
	s, js := newStore(t)
	createTeam(t, s, "alpha", "tm1")
	tk := newTask(t, "t1")
	rev, err := s.PutTask(ctx, "alpha", tk, 0)
	if err != nil {
		t.Fatal(err)
	}
	tk.Priority = 7
	if _, err := s.PutTask(ctx, "alpha", tk, rev); err != nil {
		t.Fatal(err)
	}
	b := stateKV(t, js, "alpha")
	good, err := b.Get(ctx, "task.t1")
	if err != nil {
		t.Fatal(err)
	}
	putRaw(t, b, "task.t1", "junk 1")
	bad := putRaw(t, b, "task.t1", "junk 2") // two bad revisions on top
	orphan := putRaw(t, b, "task.t9", "]]]") // never had a good revision
	// A key deleted before the bad write stays deleted.
	putRaw(t, b, "task.t5", `{"id":"t5","status":"available"}`)
	if err := b.Delete(ctx, "task.t5"); err != nil {
		t.Fatal(err)
	}
	putRaw(t, b, "task.t5", "junk")

	plan, err := s.Repair(ctx, "alpha", false)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]kv.RepairStep{
		"task.t1": {DamagedRecord: kv.DamagedRecord{Key: "task.t1", Revision: bad}, Action: kv.RepairRestore, From: good.Revision()},
		"task.t9": {DamagedRecord: kv.DamagedRecord{Key: "task.t9", Revision: orphan}, Action: kv.RepairDelete},
		"task.t5": {Action: kv.RepairDelete},
	}
	if len(plan) != len(want) {
		t.Fatalf("plan = %+v, want 3 steps", plan)
	}
	for _, st := range plan {
		w := want[st.Key]
		if st.Action != w.Action || st.From != w.From || st.Applied || w.Revision != 0 && st.Revision != w.Revision {
			t.Errorf("plan %s = %+v, want %+v", st.Key, st, w)
		}
	}
	// The plan changed nothing.
	if snap, _ := s.Snapshot(ctx, "alpha"); snap == nil || len(snap.Damaged) != 3 {
		t.Fatalf("a dry run changed the damaged records")
	}

	done, err := s.Repair(ctx, "alpha", true)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range done {
		if !st.Applied {
			t.Errorf("apply %s: %+v not applied", st.Key, st)
		}
	}
	snap, err := s.Snapshot(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Damaged) != 0 || snap.Tasks["t1"] == nil || snap.Tasks["t1"].Priority != 7 || len(snap.Tasks) != 1 {
		t.Fatalf("after repair: damaged %+v, tasks %v", snap.Damaged, snap.TaskIDs())
	}
	if e, err := b.Get(ctx, "task.t1"); err != nil || !bytes.Equal(e.Value(), good.Value()) {
		t.Errorf("task.t1 = %q, %v; want the good revision's bytes", e.Value(), err)
	}
	for _, k := range []string{"task.t9", "task.t5"} {
		if _, err := b.Get(ctx, k); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Errorf("%s after repair: %v, want deleted", k, err)
		}
	}
	// The restored record is a normal one: a compare-and-set on its
	// revision works.
	tk.Priority = 8
	if _, err := s.PutTask(ctx, "alpha", tk, snap.TaskRev["t1"]); err != nil {
		t.Errorf("write after repair: %v", err)
	}
	again, err := s.Repair(ctx, "alpha", true)
	if err != nil || len(again) != 0 {
		t.Errorf("second repair = %+v, %v; want nothing", again, err)
	}

	// A team record without a good revision is not deleted.
	createTeam(t, s, "gamma")
	g := stateKV(t, js, "gamma")
	if err := g.Purge(ctx, "team"); err != nil {
		t.Fatal(err)
	}
	putRaw(t, g, "team", "garbage")
	steps, err := s.Repair(ctx, "gamma", true)
	if err != nil || len(steps) != 1 || steps[0].Action != kv.RepairRefuse || steps[0].Applied {
		t.Fatalf("repair of a team record without history = %+v, %v; want refused", steps, err)
	}
	if e, err := g.Get(ctx, "team"); err != nil || string(e.Value()) != "garbage" {
		t.Errorf("refused repair changed the team record: %v", err)
	}
}
