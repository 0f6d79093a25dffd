package kv_test

import (
	"fmt"
	"sort"
	"testing"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/team"
)

// TestStore_Board_KeptInStepAndRolledUp: available task writes put their
// entries on the board in the order Pick would claim them, a removal by a
// stale revision leaves a newer entry alone, and a shard keeps only its
// latest value (a rollup), not its history.
func TestStore_Board_KeptInStepAndRolledUp(t *testing.T) {
	s, js := newStore(t)
	ctx := testCtx(t)
	createTeam(t, s, "b", "tm1")
	revs := map[string]uint64{}
	for i := 0; i < 20; i++ {
		tk := newTask(t, fmt.Sprintf("t%02d", i))
		tk.Priority = i % 3
		rev, err := s.PutTask(ctx, "b", tk, 0)
		if err != nil {
			t.Fatal(err)
		}
		revs[tk.ID] = rev
	}
	b, err := s.Board(ctx, "b", "tm1", 100)
	if err != nil {
		t.Fatal(err)
	}
	if !b.Built || len(b.Entries) != 20 {
		t.Fatalf("board built %v with %d entries, want 20", b.Built, len(b.Entries))
	}
	for _, e := range b.Entries {
		if e.Rev != revs[e.ID] {
			t.Errorf("entry %s at revision %d, want %d", e.ID, e.Rev, revs[e.ID])
		}
	}
	// A removal that saw the task at an older revision than the entry's
	// leaves it; one at its revision or later takes it off.
	if err := s.BoardRemove(ctx, "b", "t00", revs["t00"]-1); err != nil {
		t.Fatal(err)
	}
	if err := s.BoardRemove(ctx, "b", "t01", revs["t01"]); err != nil {
		t.Fatal(err)
	}
	b, err = s.Board(ctx, "b", "tm1", 100)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range b.Entries {
		ids = append(ids, e.ID)
	}
	sort.Strings(ids)
	if len(ids) != 19 || ids[0] != "t00" || ids[1] != "t02" {
		t.Fatalf("board after the removals %v, want t00 kept and t01 gone", ids)
	}
	// Every shard holds its entries in Pick's order for a member without
	// a quantum (the layout's order), and keeps no history.
	bucket, err := js.KeyValue(ctx, kv.StatePrefix+"b")
	if err != nil {
		t.Fatal(err)
	}
	layout := team.BoardLayout()
	for n := 0; n < layout.Shards; n++ {
		h, err := bucket.History(ctx, fmt.Sprintf("board.%d", n))
		if err != nil {
			continue // an empty shard was never written
		}
		if len(h) != 1 {
			t.Errorf("shard %d keeps %d revisions, want 1 (a rollup)", n, len(h))
		}
	}
	byShard := map[int][]kv.BoardEntry{}
	for _, e := range b.Entries {
		byShard[layout.Shard(e.ID)] = append(byShard[layout.Shard(e.ID)], e)
	}
	for n, es := range byShard {
		for i := 1; i < len(es); i++ {
			if layout.Before(es[i], es[i-1]) {
				t.Errorf("shard %d: %s before %s, out of Pick's order", n, es[i-1].ID, es[i].ID)
			}
		}
	}
	_ = teambus.TaskAvailable
}
