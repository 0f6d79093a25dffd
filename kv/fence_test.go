package kv_test

import (
	"errors"
	"testing"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/kv"
)

// TestStore_PutTaskFenced checks both ways of a fenced write: with a
// snapshot consistent at a stream sequence (one message expecting it) and
// without one (an atomic batch expecting the member record's revision).
// A changed member record refuses either; an unchanged one lets it land.
func TestStore_PutTaskFenced(t *testing.T) {
	for _, tt := range []struct {
		name       string
		consistent bool
	}{
		{"one message at the snapshot's sequence", true},
		{"atomic batch on the member record", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			s, _ := newStore(t)
			createTeam(t, s, "alpha", "tm1", "tm2")
			if _, err := s.PutTask(ctx, "alpha", newTask(t, "t1"), 0); err != nil {
				t.Fatal(err)
			}
			read := func() *kv.Snapshot {
				t.Helper()
				snap, err := s.Snapshot(ctx, "alpha")
				if err != nil {
					t.Fatal(err)
				}
				if snap.Seq == 0 {
					t.Fatal("a small bucket's snapshot has no sequence")
				}
				if !tt.consistent {
					snap.Seq = 0
				}
				return snap
			}
			snap := read()
			// A new incarnation of tm1 registers after the read.
			m := snap.Members["tm1"]
			m.Register("s2", s.Now())
			if _, err := s.PutMember(ctx, "alpha", m, snap.MemberRev["tm1"]); err != nil {
				t.Fatal(err)
			}
			tk := snap.Tasks["t1"]
			tk.Status, tk.AssignedTo = teambus.TaskInProgress, "tm1"
			if _, err := s.PutTaskFenced(ctx, snap, tk, snap.TaskRev["t1"], "tm1"); !errors.Is(err, kv.ErrConflict) {
				t.Fatalf("write after the member changed: %v, want ErrConflict", err)
			}
			if got, _, _ := s.Task(ctx, "alpha", "t1"); got.AssignedTo != "" {
				t.Fatalf("the fenced write landed: %+v", got)
			}
			// Read again: the write lands.
			snap = read()
			tk = snap.Tasks["t1"]
			tk.Status, tk.AssignedTo = teambus.TaskInProgress, "tm1"
			rev, err := s.PutTaskFenced(ctx, snap, tk, snap.TaskRev["t1"], "tm1")
			if err != nil {
				t.Fatal(err)
			}
			got, gotRev, _ := s.Task(ctx, "alpha", "t1")
			if got.AssignedTo != "tm1" || gotRev != rev {
				t.Fatalf("task = %+v at %d, want tm1's at %d", got, gotRev, rev)
			}
			// A stale task revision is refused too.
			if _, err := s.PutTaskFenced(ctx, read(), tk, snap.TaskRev["t1"], "tm1"); !errors.Is(err, kv.ErrConflict) {
				t.Fatalf("stale task revision: %v, want ErrConflict", err)
			}
		})
	}
}

// TestStore_PutTaskFenced_UpgradesOldBucket: a state bucket created
// before fenced writes (no AllowAtomicPublish) is upgraded by the first
// batch, which then lands.
func TestStore_PutTaskFenced_UpgradesOldBucket(t *testing.T) {
	ctx := testCtx(t)
	s, js := newStore(t)
	createTeam(t, s, "alpha", "tm1")
	st, err := js.Stream(ctx, "KV_TBS_alpha")
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.AllowAtomicPublish = false
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutTask(ctx, "alpha", newTask(t, "t1"), 0); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	snap.Seq = 0
	tk := snap.Tasks["t1"]
	tk.Status, tk.AssignedTo = teambus.TaskInProgress, "tm1"
	if _, err := s.PutTaskFenced(ctx, snap, tk, snap.TaskRev["t1"], "tm1"); err != nil {
		t.Fatal(err)
	}
	st, err = js.Stream(ctx, "KV_TBS_alpha")
	if err != nil {
		t.Fatal(err)
	}
	if !st.CachedInfo().Config.AllowAtomicPublish {
		t.Error("the bucket was not upgraded")
	}
}
