package team_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/team"
)

// boardIDs returns the ids on team's claim board, sorted, and whether the
// board is built.
func (f *fixture) boardIDs(t testing.TB, teamID string) ([]string, bool) {
	t.Helper()
	b, err := f.svc.Store().Board(testCtx(t), teamID, "tm1", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range b.Entries {
		ids = append(ids, e.ID)
	}
	sort.Strings(ids)
	return ids, b.Built
}

// putRaw writes task tk straight into the team's state bucket, as a
// writer that died before its board write leaves it.
func (f *fixture) putRaw(t testing.TB, teamID string, tk *teambus.Task) {
	t.Helper()
	ctx := testCtx(t)
	b, err := f.conn.JS.KeyValue(ctx, kv.StatePrefix+teamID)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(tk)
	if _, err := b.Put(ctx, "task."+tk.ID, raw); err != nil {
		t.Fatal(err)
	}
}

// TestService_Next_BoardRaceOneWinner: many members race `task next` for
// fewer tasks than members, round after round; each task goes to exactly
// one member, no member holds two, and the board ends empty.
func TestService_Next_BoardRaceOneWinner(t *testing.T) {
	f := newFixture(t, team.Config{})
	const members, tasks, rounds = 12, 5, 20
	var ids []string
	for i := 0; i < members; i++ {
		ids = append(ids, fmt.Sprintf("tm%d", i))
	}
	f.create(t, "race", "L", testPolicy(), ids...)
	for r := 0; r < rounds; r++ {
		ctx := testCtx(t)
		for i := 0; i < tasks; i++ {
			f.addTask(t, "race", fmt.Sprintf("r%02d-%d", r, i), i%2)
		}
		start := make(chan struct{})
		got := make([]*teambus.Task, members)
		errs := make([]error, members)
		var wg sync.WaitGroup
		for i, m := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				got[i], errs[i] = f.svc.Next(ctx, actorOf("race", m))
			}()
		}
		close(start)
		wg.Wait()
		won := map[string]string{}
		for i, tk := range got {
			switch {
			case errs[i] == nil:
				if prev, dup := won[tk.ID]; dup {
					t.Fatalf("round %d: %s and %s both claimed %s", r, prev, ids[i], tk.ID)
				}
				won[tk.ID] = ids[i]
			case errors.Is(errs[i], teambus.ErrUnavailable), errors.Is(errs[i], teambus.ErrConflict):
			default:
				t.Fatalf("round %d: %s: %v", r, ids[i], errs[i])
			}
		}
		snap, err := f.svc.Store().Snapshot(ctx, "race")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ids {
			if held := snap.MemberTasks(m); len(held) > 1 {
				t.Fatalf("round %d: %s holds %d tasks", r, m, len(held))
			}
		}
		for id, m := range won {
			tk := snap.Tasks[id]
			if tk.Status != teambus.TaskInProgress || tk.AssignedTo != m || tk.Attempts != 1 {
				t.Fatalf("round %d: task %s = %s, want in progress by %s once", r, id, tk, m)
			}
		}
		if len(won) != tasks {
			t.Fatalf("round %d: %d of %d tasks claimed (errors %v)", r, len(won), tasks, errs)
		}
		for id, m := range won {
			if _, _, err := f.svc.Complete(ctx, actorOf("race", m), id, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestService_Next_BoardKeptInStep: every transition that makes a task
// claimable puts it on the board. (A claim leaves its entry for a later
// claim to take off with others, staleBatch at a time: the board's
// claimable entries are compared.)
func TestService_Next_BoardKeptInStep(t *testing.T) {
	f := newFixture(t, team.Config{})
	f.create(t, "step", "L", testPolicy(), "tm1", "tm2")
	ctx := testCtx(t)
	want := func(step string, ids ...string) {
		t.Helper()
		on, built := f.boardIDs(t, "step")
		var got []string
		for _, id := range on {
			if f.task(t, "step", id).Status == teambus.TaskAvailable {
				got = append(got, id)
			}
		}
		sort.Strings(ids)
		if !built || fmt.Sprint(got) != fmt.Sprint(ids) {
			t.Fatalf("%s: board %v (built %v), want %v", step, got, built, ids)
		}
	}
	want("new team")
	f.addTask(t, "step", "a", 0)
	f.addTask(t, "step", "b", 0, "a")
	want("added", "a")
	tm1, tm2 := actorOf("step", "tm1"), actorOf("step", "tm2")
	if tk, err := f.svc.Next(ctx, tm1); err != nil || tk.ID != "a" {
		t.Fatalf("next = %v, %v", tk, err)
	}
	want("claimed")
	if _, err := f.svc.Release(ctx, tm1, "a"); err != nil {
		t.Fatal(err)
	}
	want("released", "a")
	if _, err := f.svc.Claim(ctx, tm2, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Fail(ctx, tm2, "a", "broke"); err != nil {
		t.Fatal(err)
	}
	want("failed once", "a")
	if tk, err := f.svc.Next(ctx, tm2); err != nil || tk.ID != "a" {
		t.Fatalf("next = %v, %v", tk, err)
	}
	if _, _, err := f.svc.Complete(ctx, tm2, "a", ""); err != nil {
		t.Fatal(err)
	}
	want("completed: b promoted", "b")
	if _, err := f.svc.Reassign(ctx, leadOf("step", "L"), "b", "tm1"); err != nil {
		t.Fatal(err)
	}
	// The reassigned task is tm1's: its slot names it, so the board's
	// path refuses tm1 a second task (nothing else is on the board, so
	// add one).
	f.addTask(t, "step", "c", 0)
	if _, err := f.svc.Next(ctx, tm1); !errors.Is(err, teambus.ErrState) {
		t.Fatalf("next for a member holding a reassigned task = %v, want ErrState", err)
	}
	if _, _, err := f.svc.Complete(ctx, tm1, "b", ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.svc.Complete(ctx, tm1, "b", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Reopen(ctx, leadOf("step", "L"), "a"); err == nil {
		t.Fatal("reopen of a task whose dependent is complete succeeded")
	}
	want("c added", "c")
}

// TestService_Next_BoardRepair: a claimable task missing from the board
// (its writer died before the board write) is found by the full read of
// a dry board and by the lead's promotion; an entry whose task is no
// longer claimable is skipped and removed; a team without a board (made
// before it) gets one from its first `task next`.
func TestService_Next_BoardRepair(t *testing.T) {
	f := newFixture(t, team.Config{})
	f.create(t, "fix", "L", testPolicy(), "tm1", "tm2", "tm3", "tm4")
	ctx := testCtx(t)
	now := time.Now().UTC()
	lost, _ := teambus.NewTask("lost", "", nil, 0, "", nil, now)
	f.putRaw(t, "fix", lost)
	if got, _ := f.boardIDs(t, "fix"); len(got) != 0 {
		t.Fatalf("board %v, want the raw write missing", got)
	}
	// A dry board: the team is read whole and the task found.
	if tk, err := f.svc.Next(ctx, actorOf("fix", "tm1")); err != nil || tk.ID != "lost" {
		t.Fatalf("next on a dry board = %v, %v; want lost", tk, err)
	}

	// Missing beside other entries: the lead's promotion puts it back.
	f.addTask(t, "fix", "seen", 0)
	lost2, _ := teambus.NewTask("lost2", "", nil, 9, "", nil, now)
	f.putRaw(t, "fix", lost2)
	if _, err := f.svc.PromoteReady(ctx, "fix"); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.boardIDs(t, "fix"); fmt.Sprint(got) != "[lost2 seen]" {
		t.Fatalf("board after the lead's promotion %v, want [lost2 seen]", got)
	}
	if tk, err := f.svc.Next(ctx, actorOf("fix", "tm2")); err != nil || tk.ID != "lost2" {
		t.Fatalf("next = %v, %v; want lost2 (priority 9)", tk, err)
	}

	// A stale entry: "seen" paused behind the board's back.
	tk := f.task(t, "fix", "seen")
	teambus.Pause(tk, "operator", now)
	f.putRaw(t, "fix", tk)
	// lost2's entry stays after its claim (staleBatch), "seen" is stale.
	if got, _ := f.boardIDs(t, "fix"); fmt.Sprint(got) != "[lost2 seen]" {
		t.Fatalf("board %v, want the stale entries [lost2 seen]", got)
	}
	_, err := f.svc.Next(ctx, actorOf("fix", "tm3"))
	if !errors.Is(err, teambus.ErrUnavailable) {
		t.Fatalf("next with only a stale entry = %v, want ErrUnavailable (two in progress)", err)
	}
	if got, _ := f.boardIDs(t, "fix"); len(got) != 0 {
		t.Fatalf("board %v, want the stale entries removed", got)
	}

	// A team without a board: its first next builds it.
	b, err := f.conn.JS.KeyValue(ctx, kv.StatePrefix+"fix")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"board", "board.0", "board.1", "board.2", "board.3", "board.4", "board.5", "board.6", "board.7"} {
		if err := b.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	f.addTask(t, "fix", "x1", 0)
	f.addTask(t, "fix", "x2", 0)
	if _, built := f.boardIDs(t, "fix"); built {
		t.Fatal("board built without its marker")
	}
	if tk, err := f.svc.Next(ctx, actorOf("fix", "tm3")); err != nil || tk.ID != "x1" {
		t.Fatalf("next without a board = %v, %v; want x1", tk, err)
	}
	if got, built := f.boardIDs(t, "fix"); !built || fmt.Sprint(got) != "[x2]" {
		t.Fatalf("board after the first next %v (built %v), want [x2] built", got, built)
	}

	// A member holding a task its claim slot does not name (assigned
	// before assignments wrote the slot): the full read writes the slot,
	// and the board's path then refuses the member a second task.
	legacy, _ := teambus.NewTask("legacy", "", nil, 0, "", nil, now)
	if err := teambus.Claim(legacy, "tm4", f.member(t, "fix", "tm4").Epoch, nil, now); err != nil {
		t.Fatal(err)
	}
	f.putRaw(t, "fix", legacy)
	if _, err := f.svc.PromoteReady(ctx, "fix"); err != nil {
		t.Fatal(err)
	}
	if got := f.member(t, "fix", "tm4").ClaimTask; got != "legacy" {
		t.Fatalf("tm4's claim slot = %q after the lead's full read, want legacy", got)
	}
	if _, err := f.svc.Next(ctx, actorOf("fix", "tm4")); !errors.Is(err, teambus.ErrState) {
		t.Fatalf("next for a member holding a legacy task = %v, want ErrState", err)
	}
}

// TestService_Next_BoardNoFullRead: members claiming and completing every
// task of a team read the board, not the team, until the board runs dry.
func TestService_Next_BoardNoFullRead(t *testing.T) {
	f := newFixture(t, team.Config{})
	const members, tasks = 4, 40
	var ids []string
	for i := 0; i < members; i++ {
		ids = append(ids, fmt.Sprintf("tm%d", i))
	}
	f.create(t, "reads", "L", testPolicy(), ids...)
	for i := 0; i < tasks; i++ {
		f.addTask(t, "reads", fmt.Sprintf("t%03d", i), 0)
	}
	ctx := testCtx(t)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		done = map[string]string{}
	)
	for _, m := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := actorOf("reads", m)
			for {
				tk, err := f.svc.Next(ctx, a)
				if errors.Is(err, teambus.ErrState) || errors.Is(err, teambus.ErrUnavailable) {
					// Nothing left, or only tasks others hold: they
					// finish the rest.
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if prev, dup := done[tk.ID]; dup {
					t.Errorf("%s claimed %s, done by %s already", m, tk.ID, prev)
				}
				done[tk.ID] = m
				mu.Unlock()
				if _, _, err := f.svc.Complete(ctx, a, tk.ID, ""); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(done) != tasks {
		t.Fatalf("%d of %d tasks done", len(done), tasks)
	}
	// Each member's last claim finds the board dry and reads the team to
	// learn that nothing is left for it; no claim before reads it.
	if n := f.svc.FullReads(); n > members {
		t.Fatalf("%d full reads of the team for %d claims, want at most %d", n, tasks, members)
	}
	t.Logf("full reads: %d for %d claims", f.svc.FullReads(), tasks)
}

// TestService_Next_BoardOrderAfterImport: an import puts its available
// tasks on the board with the work downstream of them, so `task next`
// orders them as a full read would (Pick): the head of a chain before a
// task of higher priority, and that before the rest.
func TestService_Next_BoardOrderAfterImport(t *testing.T) {
	f := newFixture(t, team.Config{})
	f.create(t, "imp", "L", testPolicy(), "tm1", "tm2", "tm3")
	ctx := testCtx(t)
	specs := []team.ImportTask{
		{Line: 1, TaskSpec: team.TaskSpec{ID: "plain"}},
		{Line: 2, TaskSpec: team.TaskSpec{ID: "urgent", Priority: 5}},
		{Line: 3, TaskSpec: team.TaskSpec{ID: "head"}},
		{Line: 4, TaskSpec: team.TaskSpec{ID: "mid", Deps: []string{"head"}}},
		{Line: 5, TaskSpec: team.TaskSpec{ID: "tail", Deps: []string{"mid"}}},
	}
	if _, err := f.svc.ImportTasks(ctx, "imp", specs, nil); err != nil {
		t.Fatal(err)
	}
	snap, err := f.svc.Store().Snapshot(ctx, "imp")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, tk := range teambus.Pick(snap.Tasks, "") {
		want = append(want, tk.ID)
	}
	var got []string
	for _, m := range []string{"tm1", "tm2", "tm3"} {
		tk, err := f.svc.Next(ctx, actorOf("imp", m))
		if err != nil {
			t.Fatalf("next for %s: %v", m, err)
		}
		got = append(got, tk.ID)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || fmt.Sprint(got) != "[head urgent plain]" {
		t.Fatalf("claims in order %v, want %v (Pick) = [head urgent plain]", got, want)
	}
	if n := f.svc.FullReads(); n != 0 {
		t.Fatalf("%d full reads, want the board's order without one", n)
	}
}
