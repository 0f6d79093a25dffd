package team_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

func TestService_Claim_RaceOneWinner(t *testing.T) {
	f := newFixture(t, team.Config{})
	const claimers, rounds = 8, 50
	var members []string
	for i := 0; i < claimers; i++ {
		members = append(members, fmt.Sprintf("tm%d", i))
	}
	f.create(t, "race", "L", testPolicy(), members...)
	wins := map[string]int{}
	for r := 0; r < rounds; r++ {
		ctx := testCtx(t) // per round: the whole test may take longer under -race
		id := fmt.Sprintf("r%02d", r)
		f.addTask(t, "race", id, 0)

		start := make(chan struct{})
		errs := make([]error, claimers)
		var wg sync.WaitGroup
		for i, m := range members {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = f.svc.Claim(ctx, actorOf("race", m), id)
			}()
		}
		close(start)
		wg.Wait()

		winner := ""
		for i, err := range errs {
			switch {
			case err == nil && winner == "":
				winner = members[i]
			case err == nil:
				t.Fatalf("round %d: %s and %s both claimed %s", r, winner, members[i], id)
			case !errors.Is(err, teambus.ErrConflict) || teambus.ExitCode(err) != teambus.ExitConflict:
				t.Fatalf("round %d: loser %s got %v (exit %d), want a conflict (exit 3)", r, members[i], err, teambus.ExitCode(err))
			}
		}
		if winner == "" {
			t.Fatalf("round %d: nobody claimed %s: %v", r, id, errs)
		}
		tk := f.task(t, "race", id)
		if tk.Status != teambus.TaskInProgress || tk.AssignedTo != winner || tk.Attempts != 1 {
			t.Fatalf("round %d: stored task = %+v, want in_progress by %s with one attempt", r, tk, winner)
		}
		wins[winner]++
		if _, _, err := f.svc.Complete(ctx, actorOf("race", winner), id, ""); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wins by member: %v", wins)
}

func TestService_Next_PickOrder(t *testing.T) {
	f := newFixture(t, team.Config{})
	f.create(t, "alpha", "L", testPolicy(), "tm1", "tm2", "tm3", "tm4", "tm5")
	ctx := testCtx(t)
	f.addTask(t, "alpha", "solo", 9)
	f.addTask(t, "alpha", "root", 0)
	f.addTask(t, "alpha", "mid", 0, "root")
	f.addTask(t, "alpha", "leaf", 0, "mid")
	f.addTask(t, "alpha", "p5-early", 5)
	f.addTask(t, "alpha", "p5-late", 5)

	// Most downstream work first, then priority, then creation order.
	for _, want := range []struct{ member, task string }{
		{"tm1", "root"}, {"tm2", "solo"}, {"tm3", "p5-early"}, {"tm4", "p5-late"},
	} {
		tk, err := f.svc.Next(ctx, actorOf("alpha", want.member))
		if err != nil {
			t.Fatalf("next for %s: %v", want.member, err)
		}
		if tk.ID != want.task || tk.AssignedTo != want.member || tk.Status != teambus.TaskInProgress {
			t.Fatalf("next for %s = %s, want %s", want.member, tk, want.task)
		}
	}
	// Nothing claimable yet, but work is open: transient (exit 1).
	_, err := f.svc.Next(ctx, actorOf("alpha", "tm5"))
	if !errors.Is(err, teambus.ErrUnavailable) || teambus.ExitCode(err) != teambus.ExitTransient {
		t.Fatalf("next with only pending work = %v, want ErrUnavailable", err)
	}
	// A member that holds a task gets no second one.
	if _, err := f.svc.Next(ctx, actorOf("alpha", "tm1")); !errors.Is(err, teambus.ErrState) {
		t.Fatalf("next for a busy member = %v, want ErrState", err)
	}
	if _, _, err := f.svc.Complete(ctx, actorOf("alpha", "tm1"), "root", "c0ffee"); err != nil {
		t.Fatal(err)
	}
	if tk, err := f.svc.Next(ctx, actorOf("alpha", "tm5")); err != nil || tk.ID != "mid" {
		t.Fatalf("next after root completed = %v, %v; want mid", tk, err)
	}
	// Finish everything: then there is no work left (exit 2).
	for m, id := range map[string]string{"tm2": "solo", "tm3": "p5-early", "tm4": "p5-late", "tm5": "mid"} {
		if _, _, err := f.svc.Complete(ctx, actorOf("alpha", m), id, ""); err != nil {
			t.Fatal(err)
		}
	}
	if tk, err := f.svc.Next(ctx, actorOf("alpha", "tm1")); err != nil || tk.ID != "leaf" {
		t.Fatalf("next = %v, %v; want leaf", tk, err)
	}
	if _, _, err := f.svc.Complete(ctx, actorOf("alpha", "tm1"), "leaf", ""); err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.Next(ctx, actorOf("alpha", "tm1"))
	if !errors.Is(err, teambus.ErrState) {
		t.Fatalf("next with all work done = %v, want ErrState", err)
	}
}

func TestService_Next_PrefersQuantum(t *testing.T) {
	f := newFixture(t, team.Config{})
	ctx := testCtx(t)
	if _, err := f.svc.CreateTeam(ctx, "alpha", "L", []team.MemberSpec{{ID: "be", Quantum: "backend"}}, testPolicy()); err != nil {
		t.Fatal(err)
	}
	f.addTask(t, "alpha", "ui", 10)
	if _, err := f.svc.AddTask(ctx, "alpha", team.TaskSpec{ID: "api", Quantum: "backend"}); err != nil {
		t.Fatal(err)
	}
	tk, err := f.svc.Next(ctx, team.Actor{Team: "alpha", Member: "be"})
	if err != nil || tk.ID != "api" {
		t.Fatalf("next for a backend member = %v, %v; want api", tk, err)
	}
}

func TestService_Complete_PromotesDependents(t *testing.T) {
	f := newFixture(t, team.Config{})
	f.create(t, "alpha", "L", testPolicy(), "tm1")
	ctx := testCtx(t)
	f.addTask(t, "alpha", "a", 0)
	if got := f.addTask(t, "alpha", "b", 0, "a").Status; got != teambus.TaskPending {
		t.Fatalf("b = %s, want pending", got)
	}
	f.addTask(t, "alpha", "c", 0, "a", "b")
	tm1 := actorOf("alpha", "tm1")

	if _, err := f.svc.Claim(ctx, tm1, "b"); !errors.Is(err, teambus.ErrState) {
		t.Fatalf("claim of pending b = %v, want ErrState", err)
	}
	if _, err := f.svc.Claim(ctx, tm1, "a"); err != nil {
		t.Fatal(err)
	}
	tk, changed, err := f.svc.Complete(ctx, tm1, "a", "abc")
	if err != nil || !changed || tk.Status != teambus.TaskComplete || tk.Commit != "abc" {
		t.Fatalf("complete a = %v, %t, %v", tk, changed, err)
	}
	if got := f.task(t, "alpha", "b").Status; got != teambus.TaskAvailable {
		t.Errorf("b after a completed = %s, want available", got)
	}
	if got := f.task(t, "alpha", "c").Status; got != teambus.TaskPending {
		t.Errorf("c after a completed = %s, want pending (waits on b)", got)
	}
	// Completing again is harmless and writes nothing.
	_, rev, _ := f.svc.Store().Task(ctx, "alpha", "a")
	if _, changed, err := f.svc.Complete(ctx, tm1, "a", "abc"); err != nil || changed {
		t.Errorf("second complete = %t, %v; want unchanged, nil", changed, err)
	}
	if _, rev2, _ := f.svc.Store().Task(ctx, "alpha", "a"); rev2 != rev {
		t.Errorf("second complete wrote the task (rev %d → %d)", rev, rev2)
	}
	if _, _, err := f.svc.Complete(ctx, tm1, "a", "not a sha"); !errors.Is(err, teambus.ErrInvalid) {
		t.Errorf("complete with a bad commit = %v, want ErrInvalid", err)
	}
	if _, err := f.svc.Claim(ctx, tm1, "b"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.svc.Complete(ctx, tm1, "b", ""); err != nil {
		t.Fatal(err)
	}
	if got := f.task(t, "alpha", "c").Status; got != teambus.TaskAvailable {
		t.Errorf("c after a and b = %s, want available", got)
	}
	// Someone else can not complete a task they do not hold.
	if _, _, err := f.svc.Complete(ctx, tm1, "c", ""); !errors.Is(err, teambus.ErrState) {
		t.Errorf("complete of an unclaimed task = %v, want ErrState", err)
	}
}

func TestService_Fail_PausedAtMaxAttempts(t *testing.T) {
	f := newFixture(t, team.Config{})
	pol := testPolicy()
	pol.MaxAttempts = 2
	f.create(t, "alpha", "L", pol, "tm1", "tm2")
	ctx := testCtx(t)
	f.addTask(t, "alpha", "x", 0)
	tm1 := actorOf("alpha", "tm1")

	if _, err := f.svc.Claim(ctx, tm1, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Fail(ctx, actorOf("alpha", "tm2"), "x", "not mine"); !errors.Is(err, teambus.ErrConflict) {
		t.Fatalf("fail by another member = %v, want ErrConflict", err)
	}
	tk, err := f.svc.Fail(ctx, tm1, "x", "tests red")
	if err != nil || tk.Status != teambus.TaskAvailable || tk.Failures != 1 {
		t.Fatalf("first failure = %v, %v; want available with 1 failure", tk, err)
	}
	if _, err := f.svc.Claim(ctx, tm1, "x"); err != nil {
		t.Fatal(err)
	}
	tk, err = f.svc.Fail(ctx, tm1, "x", "still red")
	if err != nil || tk.Status != teambus.TaskPaused || tk.Failures != 2 || tk.LastError != "still red" {
		t.Fatalf("second failure = %v, %v; want paused", tk, err)
	}
	if _, err := f.svc.Next(ctx, tm1); !errors.Is(err, teambus.ErrState) {
		t.Errorf("next with only a paused task = %v, want ErrState", err)
	}
}

func TestService_Block_Release_Reassign(t *testing.T) {
	f := newFixture(t, team.Config{})
	f.create(t, "alpha", "L", testPolicy(), "tm1", "tm2")
	ctx := testCtx(t)
	f.addTask(t, "alpha", "x", 0)
	f.addTask(t, "alpha", "y", 0)
	tm1, tm2, ld := actorOf("alpha", "tm1"), actorOf("alpha", "tm2"), leadOf("alpha", "L")

	if _, err := f.svc.Claim(ctx, tm1, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Checkpoint(ctx, teamapi.CheckpointRequest{Actor: tm1, Done: []string{"parse"}, Remaining: []string{"emit"}, LastAction: "wrote parser"}); err != nil {
		t.Fatal(err)
	}
	tk, err := f.svc.Block(ctx, tm1, "x", "y", "")
	if err != nil || tk.Status != teambus.TaskBlocked || tk.BlockedOn != "y" {
		t.Fatalf("block = %v, %v", tk, err)
	}
	if _, err := f.svc.Block(ctx, tm2, "x", "", "mine now"); !errors.Is(err, teambus.ErrConflict) {
		t.Errorf("block by another member = %v, want ErrConflict", err)
	}
	if _, err := f.svc.Release(ctx, tm2, "x"); !errors.Is(err, teambus.ErrConflict) {
		t.Errorf("release by another member = %v, want ErrConflict", err)
	}
	tk, err = f.svc.Release(ctx, tm1, "x")
	if err != nil || tk.Status != teambus.TaskAvailable || tk.AssignedTo != "" || tk.BlockedOn != "" {
		t.Fatalf("release = %v, %v", tk, err)
	}
	if tk.Checkpoint == nil || tk.Checkpoint.LastAction != "wrote parser" {
		t.Errorf("release dropped the checkpoint: %+v", tk.Checkpoint)
	}

	// The lead hands x to tm2; tm2 hands it on to tm1; tm2 then can not.
	if tk, err := f.svc.Reassign(ctx, ld, "x", "tm2"); err != nil || tk.AssignedTo != "tm2" || tk.Status != teambus.TaskInProgress {
		t.Fatalf("lead reassign = %v, %v", tk, err)
	}
	if tk, err := f.svc.Reassign(ctx, tm2, "x", "tm1"); err != nil || tk.AssignedTo != "tm1" {
		t.Fatalf("holder reassign = %v, %v", tk, err)
	}
	if _, err := f.svc.Reassign(ctx, tm2, "x", "tm2"); !errors.Is(err, teambus.ErrFenced) {
		t.Errorf("reassign by a non-holder = %v, want ErrFenced", err)
	}
	if _, err := f.svc.Reassign(ctx, ld, "x", "ghost"); !errors.Is(err, teambus.ErrNotFound) {
		t.Errorf("reassign to a non-member = %v, want ErrNotFound", err)
	}
	if _, err := f.svc.Claim(ctx, tm2, "y"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Reassign(ctx, ld, "y", "tm1"); !errors.Is(err, teambus.ErrState) {
		t.Errorf("reassign to a busy member = %v, want ErrState", err)
	}
	// The lead may release any active task.
	if tk, err := f.svc.Release(ctx, ld, "y"); err != nil || tk.Status != teambus.TaskAvailable {
		t.Errorf("lead release = %v, %v", tk, err)
	}
	if _, err := f.svc.Claim(ctx, ld, "y"); !errors.Is(err, teambus.ErrInvalid) {
		t.Errorf("claim by the lead = %v, want ErrInvalid", err)
	}
}

func TestService_Reopen(t *testing.T) {
	f := newFixture(t, team.Config{})
	f.create(t, "alpha", "L", testPolicy(), "tm1")
	ctx := testCtx(t)
	f.addTask(t, "alpha", "a", 0)
	f.addTask(t, "alpha", "b", 0, "a")
	tm1, ld := actorOf("alpha", "tm1"), leadOf("alpha", "L")
	for _, id := range []string{"a", "b"} {
		if _, err := f.svc.Claim(ctx, tm1, id); err != nil {
			t.Fatal(err)
		}
		if _, _, err := f.svc.Complete(ctx, tm1, id, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.svc.Reopen(ctx, tm1, "b"); teambus.ExitCode(err) != teambus.ExitPermanent {
		t.Errorf("reopen by a member = %v, want exit 2", err)
	}
	_, err := f.svc.Reopen(ctx, ld, "a")
	if !errors.Is(err, teambus.ErrState) || teambus.ExitCode(err) != teambus.ExitPermanent {
		t.Fatalf("reopen of a with b complete = %v, want ErrState", err)
	}
	if got := f.task(t, "alpha", "a").Status; got != teambus.TaskComplete {
		t.Fatalf("refused reopen changed a to %s", got)
	}
	if tk, err := f.svc.Reopen(ctx, ld, "b"); err != nil || tk.Status != teambus.TaskAvailable || tk.CompletedAt != nil {
		t.Fatalf("reopen of b = %v, %v", tk, err)
	}
	if tk, err := f.svc.Reopen(ctx, ld, "a"); err != nil || tk.Status != teambus.TaskAvailable {
		t.Fatalf("reopen of a once b is open = %v, %v", tk, err)
	}
	if _, err := f.svc.Reopen(ctx, ld, "a"); !errors.Is(err, teambus.ErrState) {
		t.Errorf("reopen of an available task = %v, want ErrState", err)
	}
}

func TestService_LeadFenced(t *testing.T) {
	f := newFixture(t, team.Config{})
	f.create(t, "alpha", "L1", testPolicy(), "tm1")
	ctx := testCtx(t)
	f.addTask(t, "alpha", "a", 0)
	if _, err := f.svc.Reassign(ctx, leadOf("alpha", "L0"), "a", "tm1"); !errors.Is(err, teambus.ErrFenced) {
		t.Errorf("reassign by an old lead session = %v, want ErrFenced", err)
	}
	if _, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: leadOf("alpha", "L0"), To: "tm1", Body: "x"}); !errors.Is(err, teambus.ErrFenced) {
		t.Errorf("send by an old lead session = %v, want ErrFenced", err)
	}
	if _, err := f.svc.Reassign(ctx, leadOf("alpha", "L1"), "a", "tm1"); err != nil {
		t.Errorf("reassign by the lead session = %v", err)
	}
}

func TestService_Checkpoint(t *testing.T) {
	f := newFixture(t, team.Config{})
	f.create(t, "alpha", "L", testPolicy(), "tm1", "tm2")
	ctx := testCtx(t)
	f.addTask(t, "alpha", "x", 0)
	tm1, tm2 := actorOf("alpha", "tm1"), actorOf("alpha", "tm2")

	if _, err := f.svc.Checkpoint(ctx, teamapi.CheckpointRequest{Actor: tm1, LastAction: "x"}); !errors.Is(err, teambus.ErrState) {
		t.Fatalf("checkpoint without a task = %v, want ErrState", err)
	}
	if _, err := f.svc.Claim(ctx, tm1, "x"); err != nil {
		t.Fatal(err)
	}
	spec := teamapi.CheckpointRequest{Actor: tm1, Done: []string{"a", "b"}, Remaining: []string{"c"}, LastAction: "ran tests", Files: []string{"x.go"}, Data: json.RawMessage(`{"pct":40}`)}
	tk, err := f.svc.Checkpoint(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	cp := tk.Checkpoint
	if cp == nil || cp.Seq != 1 || cp.Member != "tm1" || cp.Epoch != 1 || !reflect.DeepEqual(cp.TasksCompleted, []string{"a", "b"}) ||
		!reflect.DeepEqual(cp.TasksRemaining, []string{"c"}) || cp.LastAction != "ran tests" || string(cp.Data) != `{"pct":40}` {
		t.Fatalf("checkpoint = %+v", cp)
	}
	// An automatic checkpoint keeps what the agent reported.
	tk, err = f.svc.Checkpoint(ctx, teamapi.CheckpointRequest{Actor: tm1, Auto: true, Files: []string{"y.go"}})
	if err != nil {
		t.Fatal(err)
	}
	if cp := tk.Checkpoint; cp.Seq != 2 || !cp.Auto || cp.LastAction != "ran tests" || !reflect.DeepEqual(cp.Files, []string{"y.go"}) || !reflect.DeepEqual(cp.TasksRemaining, []string{"c"}) {
		t.Errorf("auto checkpoint = %+v", cp)
	}
	if stored := f.task(t, "alpha", "x").Checkpoint; stored == nil || stored.Seq != 2 {
		t.Errorf("stored checkpoint = %+v", stored)
	}
	if _, err := f.svc.Checkpoint(ctx, teamapi.CheckpointRequest{Actor: tm2, Task: "x", LastAction: "mine"}); !errors.Is(err, teambus.ErrConflict) {
		t.Errorf("checkpoint of another's task = %v, want ErrConflict", err)
	}
	if _, err := f.svc.Checkpoint(ctx, teamapi.CheckpointRequest{Actor: tm1, Data: json.RawMessage(`{`)}); !errors.Is(err, teambus.ErrInvalid) {
		t.Errorf("checkpoint with bad data = %v, want ErrInvalid", err)
	}
}

func TestService_AddTask_Refused(t *testing.T) {
	f := newFixture(t, team.Config{})
	f.create(t, "alpha", "L", testPolicy())
	ctx := testCtx(t)
	f.addTask(t, "alpha", "a", 0)
	for _, tt := range []struct {
		spec team.TaskSpec
		kind error
	}{
		{team.TaskSpec{ID: "a"}, teambus.ErrState},
		{team.TaskSpec{ID: "b.c"}, teambus.ErrInvalid},
		{team.TaskSpec{ID: "b", Deps: []string{"ghost"}}, teambus.ErrNotFound},
		{team.TaskSpec{ID: "b", Deps: []string{"b"}}, teambus.ErrInvalid},
		{team.TaskSpec{ID: "b", Quantum: "a b"}, teambus.ErrInvalid},
	} {
		if _, err := f.svc.AddTask(ctx, "alpha", tt.spec); !errors.Is(err, tt.kind) {
			t.Errorf("AddTask(%+v) = %v, want %v", tt.spec, err, tt.kind)
		}
	}
	if _, err := f.svc.AddTask(ctx, "ghost", team.TaskSpec{ID: "x"}); !errors.Is(err, teambus.ErrNotFound) {
		t.Errorf("AddTask in a missing team = %v, want ErrNotFound", err)
	}
	snap, err := f.svc.Store().Snapshot(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Tasks) != 1 {
		t.Errorf("tasks after refused adds: %v", snap.TaskIDs())
	}
}

func TestService_AddTask_ConcurrentSameID(t *testing.T) {
	f := newFixture(t, team.Config{})
	f.create(t, "alpha", "L", testPolicy())
	ctx := testCtx(t)
	const n = 6
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = f.svc.AddTask(ctx, "alpha", team.TaskSpec{ID: "dup", Description: fmt.Sprint(i)})
		}()
	}
	close(start)
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, teambus.ErrState):
			t.Errorf("losing add = %v, want ErrState", err)
		}
	}
	if ok != 1 {
		t.Errorf("%d adds of the same task id succeeded, want 1", ok)
	}
}
