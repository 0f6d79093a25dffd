package team_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/team"
)

// Issue 15 item 1: a completion promotes the tasks waiting on it through
// the dependents index, without reading the team: tasks added one by one
// and imported in bulk, completed by members at once; each dependent is
// available as soon as its last dependency is done.
func TestService_Complete_PromotesThroughIndex(t *testing.T) {
	f := newFixture(t, team.Config{})
	ctx := testCtx(t)
	members := []string{"tm1", "tm2", "tm3", "tm4"}
	f.create(t, "dep", "L", testPolicy(), members...)
	var roots []string
	for i := range members {
		id := fmt.Sprintf("root%d", i)
		f.addTask(t, "dep", id, 0)
		roots = append(roots, id)
	}
	f.addTask(t, "dep", "all", 0, roots...)
	f.addTask(t, "dep", "one", 0, "root0")
	if _, err := f.svc.ImportTasks(ctx, "dep", []team.ImportTask{
		{Line: 1, TaskSpec: team.TaskSpec{ID: "imp", Deps: []string{"root1", "root2"}}},
		{Line: 2, TaskSpec: team.TaskSpec{ID: "imp2", Deps: []string{"imp"}}},
	}, nil); err != nil {
		t.Fatal(err)
	}
	ids, indexed, err := f.svc.Store().Dependents(ctx, "dep", "root1")
	if err != nil || !indexed || len(ids) != 2 {
		t.Fatalf("dependents of root1 = %v indexed %v, %v; want all and imp, indexed", ids, indexed, err)
	}
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := actorOf("dep", m)
			if _, err := f.svc.Claim(ctx, a, roots[i]); err != nil {
				t.Error(err)
				return
			}
			if _, _, err := f.svc.Complete(ctx, a, roots[i], ""); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for _, id := range []string{"all", "one", "imp"} {
		if st := f.task(t, "dep", id).Status; st != teambus.TaskAvailable {
			t.Errorf("task %s is %s after its dependencies completed, want available", id, st)
		}
	}
	if st := f.task(t, "dep", "imp2").Status; st != teambus.TaskPending {
		t.Errorf("imp2 is %s, want pending", st)
	}
}

// A team created before the index (no "index" record) is promoted by
// reading every task, as before.
func TestService_Complete_PromotesWithoutIndex(t *testing.T) {
	f := newFixture(t, team.Config{})
	ctx := testCtx(t)
	f.create(t, "old", "L", testPolicy(), "tm1")
	b, err := f.conn.JS.KeyValue(ctx, kv.StatePrefix+"old")
	if err != nil {
		t.Fatal(err)
	}
	f.addTask(t, "old", "a", 0)
	f.addTask(t, "old", "b", 0, "a")
	// What an older teambus left: no marker, no dependents records.
	for _, key := range []string{"index", "dependents.a"} {
		if err := b.Purge(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	if _, indexed, err := f.svc.Store().Dependents(ctx, "old", "a"); err != nil || indexed {
		t.Fatalf("dependents indexed = %v, %v; want false", indexed, err)
	}
	a := actorOf("old", "tm1")
	if _, err := f.svc.Claim(ctx, a, "a"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.svc.Complete(ctx, a, "a", ""); err != nil {
		t.Fatal(err)
	}
	if st := f.task(t, "old", "b").Status; st != teambus.TaskAvailable {
		t.Errorf("b is %s, want available", st)
	}
}
