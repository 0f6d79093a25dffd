package kv_test

import (
	"fmt"
	"testing"

	"github.com/teambus/teambus/kv"
)

// TestStore_Snapshot_DirectRead checks the watch-free snapshot: last
// revisions only, deleted keys gone, and the same answer past the 1024
// keys one multi_last request can return.
func TestStore_Snapshot_DirectRead(t *testing.T) {
	for _, n := range []int{10, 1500} {
		t.Run(fmt.Sprint(n, " tasks"), func(t *testing.T) {
			ctx := testCtx(t)
			s, js := newStore(t)
			createTeam(t, s, "alpha", "tm1")
			for i := range n {
				if _, err := s.PutTask(ctx, "alpha", newTask(t, fmt.Sprintf("t%04d", i)), 0); err != nil {
					t.Fatal(err)
				}
			}
			// A few revisions of one task, and a deleted one.
			tk, rev, err := s.Task(ctx, "alpha", "t0001")
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				tk.Description = fmt.Sprint("rev ", i)
				if rev, err = s.PutTask(ctx, "alpha", tk, rev); err != nil {
					t.Fatal(err)
				}
			}
			b, err := js.KeyValue(ctx, kv.StatePrefix+"alpha")
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Delete(ctx, "task.t0002"); err != nil {
				t.Fatal(err)
			}
			snap, err := s.Snapshot(ctx, "alpha")
			if err != nil {
				t.Fatal(err)
			}
			if got, want := len(snap.Tasks), n-1; got != want {
				t.Errorf("tasks = %d, want %d", got, want)
			}
			if _, ok := snap.Tasks["t0002"]; ok {
				t.Error("deleted task t0002 is in the snapshot")
			}
			if got := snap.Tasks["t0001"]; got == nil || got.Description != "rev 2" || snap.TaskRev["t0001"] != rev {
				t.Errorf("t0001 = %+v rev %d, want the last revision %d", got, snap.TaskRev["t0001"], rev)
			}
			if snap.Team == nil || len(snap.Members) != 1 {
				t.Errorf("team %+v members %d, want the team and tm1", snap.Team, len(snap.Members))
			}
			// The revisions are the bucket's: a write with them succeeds.
			if _, err := s.PutTask(ctx, "alpha", snap.Tasks["t0003"], snap.TaskRev["t0003"]); err != nil {
				t.Errorf("put with the snapshot revision: %v", err)
			}
		})
	}
}

func TestStore_Heartbeats_DirectRead(t *testing.T) {
	ctx := testCtx(t)
	s, _ := newStore(t)
	createTeam(t, s, "alpha", "tm1", "tm2")
	for _, m := range []string{"tm1", "tm2"} {
		if _, err := s.Beat(ctx, "alpha", kv.MemberKey(m), &kv.Heartbeat{Member: m, Epoch: 1}, 30e9, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.StopBeat(ctx, "alpha", kv.MemberKey("tm2")); err != nil {
		t.Fatal(err)
	}
	hbs, err := s.Heartbeats(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	hb, ok := hbs[kv.MemberKey("tm1")]
	if len(hbs) != 1 || !ok || hb.Member != "tm1" || hb.Created.IsZero() || hb.Rev == 0 {
		t.Errorf("heartbeats = %+v, want tm1's only, with its time and revision", hbs)
	}
}
