package team_test

import (
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/team"
)

// fullReport is what a resume report's task figures and member tasks are
// when computed from every task record (kv.Snapshot).
func (f *fixture) fullReport(t *testing.T, teamID string) (map[string]int, int, map[string]string) {
	t.Helper()
	snap, err := f.svc.Store().Snapshot(testCtx(t), teamID)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for st, n := range teambus.CountByStatus(snap.Tasks) {
		counts[string(st)] = n
	}
	held := map[string]string{}
	for m, ts := range snap.ActiveTasks() {
		held[m] = ts[0].ID
	}
	return counts, teambus.Progress(snap.Tasks), held
}

// checkProbe compares a probe's report with the full read; cached says
// whether the summary record must have served it.
func (f *fixture) checkProbe(t *testing.T, teamID, when string, cached bool) {
	t.Helper()
	ctx := testCtx(t)
	_, sum, err := f.svc.Store().ReportSnapshot(ctx, teamID)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Cached != cached {
		t.Errorf("%s: summary cached = %v, want %v", when, sum.Cached, cached)
	}
	rep, err := f.svc.Probe(ctx, teamID)
	if err != nil {
		t.Fatal(err)
	}
	counts, progress, held := f.fullReport(t, teamID)
	if !reflect.DeepEqual(rep.Tasks, counts) || rep.Progress != progress {
		t.Errorf("%s: report tasks %v progress %d, full read %v progress %d", when, rep.Tasks, rep.Progress, counts, progress)
	}
	got := map[string]string{}
	for _, m := range rep.Members {
		if m.Task != nil {
			got[m.ID] = *m.Task
		}
	}
	if !reflect.DeepEqual(got, held) {
		t.Errorf("%s: report member tasks %v, full read %v", when, got, held)
	}
}

// Issue 15 item 2: a resume report reads the task summary, not every
// task, while no task changed; any task write (a claim, a completion, a
// repair) makes it stale, and the next report recomputes it. The figures
// always equal those of a full read.
func TestResume_TaskSummaryInStep(t *testing.T) {
	f := newFixture(t, team.Config{})
	ctx := testCtx(t)
	f.create(t, "sum", "L", testPolicy(), "tm1", "tm2", "tm3")
	f.checkProbe(t, "sum", "no tasks", true)
	for i := 0; i < 6; i++ {
		f.addTask(t, "sum", fmt.Sprintf("t%d", i), i)
	}
	f.addTask(t, "sum", "after", 0, "t0")
	f.checkProbe(t, "sum", "after the adds", false)
	f.checkProbe(t, "sum", "nothing changed", true)

	if _, err := f.svc.Claim(ctx, actorOf("sum", "tm1"), "t0"); err != nil {
		t.Fatal(err)
	}
	f.checkProbe(t, "sum", "after a claim", false)
	if _, _, err := f.svc.Complete(ctx, actorOf("sum", "tm1"), "t0", ""); err != nil {
		t.Fatal(err)
	}
	f.checkProbe(t, "sum", "after a completion", false)
	f.checkProbe(t, "sum", "again", true)

	// The lead's promotion on each heartbeat reads the whole team and
	// refreshes the summary: the next resume reads the summary.
	if _, err := f.svc.Claim(ctx, actorOf("sum", "tm2"), "t1"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.PromoteReady(ctx, "sum"); err != nil {
		t.Fatal(err)
	}
	f.checkProbe(t, "sum", "after a claim and the lead's promotion", true)
	if _, _, err := f.svc.Complete(ctx, actorOf("sum", "tm2"), "t1", ""); err != nil {
		t.Fatal(err)
	}

	// Members claim at once while reports are made: each report is right
	// for its moment, and once they stop the summary matches again.
	var wg sync.WaitGroup
	for _, m := range []string{"tm1", "tm2", "tm3"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := f.svc.Next(ctx, actorOf("sum", m)); err != nil {
				t.Errorf("next %s: %v", m, err)
			}
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := f.svc.Probe(ctx, "sum"); err != nil {
				t.Errorf("probe: %v", err)
			}
		}()
	}
	wg.Wait()
	f.checkProbe(t, "sum", "after concurrent claims", false)
	f.checkProbe(t, "sum", "after concurrent claims, again", true)

	// A damaged task record, then its repair: each a task write.
	f.putGarbage(t, "sum", "task.t5", `{"id":"t5","status":`)
	f.checkProbe(t, "sum", "with a damaged task", false)
	if _, err := f.svc.Repair(ctx, "sum", true); err != nil {
		t.Fatal(err)
	}
	f.checkProbe(t, "sum", "after repair", false)
	f.checkProbe(t, "sum", "after repair, again", true)

	// A summary record that does not decode is recomputed, not trusted.
	f.putGarbage(t, "sum", "summary", `{"task_seq":`)
	f.checkProbe(t, "sum", "damaged summary", false)
	f.checkProbe(t, "sum", "damaged summary, again", true)
}
