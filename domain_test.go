package teambus_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// taskSet builds tasks by id. Each spec is id, its status and its
// dependencies; tasks are created one second apart in the order given.
type taskSpec struct {
	id     string
	status teambus.TaskStatus
	deps   []string
	prio   int
	to     string
}

func taskSet(specs ...taskSpec) map[string]*teambus.Task {
	out := map[string]*teambus.Task{}
	for i, s := range specs {
		deps := s.deps
		if deps == nil {
			deps = []string{}
		}
		out[s.id] = &teambus.Task{
			ID: s.id, Status: s.status, Dependencies: deps, Priority: s.prio, AssignedTo: s.to,
			CreatedAt: t0.Add(time.Duration(i) * time.Second),
		}
	}
	return out
}

func wantErr(t *testing.T, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("err = %v, want %v", err, kind)
	}
}

func TestNewTask(t *testing.T) {
	tasks := taskSet(
		taskSpec{id: "done", status: teambus.TaskComplete},
		taskSpec{id: "open", status: teambus.TaskAvailable},
	)
	tests := []struct {
		name   string
		id     string
		desc   string
		deps   []string
		want   teambus.TaskStatus
		kind   error
		inErr  string
		dedupe []string
	}{
		{name: "no deps available", id: "t1", want: teambus.TaskAvailable},
		{name: "done dep available", id: "t2", deps: []string{"done"}, want: teambus.TaskAvailable},
		{name: "open dep pending", id: "t3", deps: []string{"done", "open"}, want: teambus.TaskPending},
		{name: "deps deduplicated", id: "t4", deps: []string{"open", "done", "open"}, want: teambus.TaskPending, dedupe: []string{"open", "done"}},
		{name: "bad id", id: "t.1", kind: teambus.ErrInvalid, inErr: "task id"},
		{name: "exists", id: "open", kind: teambus.ErrState, inErr: "already exists"},
		{name: "unknown dep", id: "t5", deps: []string{"ghost"}, kind: teambus.ErrNotFound, inErr: "ghost"},
		{name: "bad dep", id: "t6", deps: []string{"a>b"}, kind: teambus.ErrInvalid, inErr: "dependency id"},
		{name: "self dep", id: "t7", deps: []string{"t7"}, kind: teambus.ErrInvalid, inErr: "itself"},
		{name: "description too long", id: "t8", desc: strings.Repeat("d", teambus.MaxDescription+1), kind: teambus.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := teambus.NewTask(tt.id, tt.desc, tt.deps, 3, "", tasks, t0)
			if tt.kind != nil {
				wantErr(t, err, tt.kind)
				if !strings.Contains(err.Error(), tt.inErr) {
					t.Errorf("error %q does not mention %q", err, tt.inErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tt.want {
				t.Errorf("status = %s, want %s", got.Status, tt.want)
			}
			if got.Dependencies == nil {
				t.Errorf("dependencies = nil, want a list (JSON [])")
			}
			if tt.dedupe != nil && !reflect.DeepEqual(got.Dependencies, tt.dedupe) {
				t.Errorf("dependencies = %v, want %v", got.Dependencies, tt.dedupe)
			}
			if got.Priority != 3 || !got.CreatedAt.Equal(t0) || got.Attempts != 0 {
				t.Errorf("task = %+v", got)
			}
		})
	}
}

func TestClaim(t *testing.T) {
	tests := []struct {
		name   string
		task   taskSpec
		member string
		kind   error
		inErr  string
	}{
		{name: "available", task: taskSpec{id: "x", status: teambus.TaskAvailable}, member: "tm1"},
		{name: "pending with deps done", task: taskSpec{id: "x", status: teambus.TaskPending, deps: []string{"done"}}, member: "tm1"},
		{name: "claimed by another", task: taskSpec{id: "x", status: teambus.TaskInProgress, to: "tm2"}, member: "tm1", kind: teambus.ErrConflict, inErr: "tm2"},
		{name: "blocked by another", task: taskSpec{id: "x", status: teambus.TaskBlocked, to: "tm2"}, member: "tm1", kind: teambus.ErrConflict},
		{name: "already mine", task: taskSpec{id: "x", status: teambus.TaskInProgress, to: "tm1"}, member: "tm1", kind: teambus.ErrState, inErr: "already yours"},
		{name: "waiting on deps", task: taskSpec{id: "x", status: teambus.TaskPending, deps: []string{"open"}}, member: "tm1", kind: teambus.ErrState, inErr: "waiting on open"},
		{name: "complete", task: taskSpec{id: "x", status: teambus.TaskComplete, to: "tm2"}, member: "tm1", kind: teambus.ErrState},
		{name: "paused", task: taskSpec{id: "x", status: teambus.TaskPaused}, member: "tm1", kind: teambus.ErrState},
		{name: "failed", task: taskSpec{id: "x", status: teambus.TaskFailed}, member: "tm1", kind: teambus.ErrState},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tasks := taskSet(taskSpec{id: "done", status: teambus.TaskComplete}, taskSpec{id: "open", status: teambus.TaskAvailable}, tt.task)
			x := tasks["x"]
			before := *x
			err := teambus.Claim(x, tt.member, 4, tasks, t0)
			if tt.kind != nil {
				wantErr(t, err, tt.kind)
				if !strings.Contains(err.Error(), tt.inErr) {
					t.Errorf("error %q does not mention %q", err, tt.inErr)
				}
				if !reflect.DeepEqual(*x, before) {
					t.Errorf("refused claim changed the task: %+v", *x)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if x.Status != teambus.TaskInProgress || x.AssignedTo != tt.member || x.Epoch != 4 || x.Attempts != 1 || x.StartedAt == nil {
				t.Errorf("claimed task = %+v", *x)
			}
		})
	}
}

func TestComplete_Idempotent(t *testing.T) {
	tasks := taskSet(taskSpec{id: "x", status: teambus.TaskInProgress, to: "tm1"})
	x := tasks["x"]
	changed, err := teambus.Complete(x, "tm1", "abc123", t0)
	if err != nil || !changed {
		t.Fatalf("first complete = %t, %v; want true, nil", changed, err)
	}
	if x.Status != teambus.TaskComplete || x.Commit != "abc123" || x.CompletedAt == nil {
		t.Errorf("task = %+v", *x)
	}
	before := *x
	changed, err = teambus.Complete(x, "tm1", "other", t0.Add(time.Hour))
	if err != nil || changed {
		t.Fatalf("second complete = %t, %v; want false, nil", changed, err)
	}
	if !reflect.DeepEqual(*x, before) {
		t.Errorf("second complete changed the task")
	}
	_, err = teambus.Complete(x, "tm2", "", t0)
	wantErr(t, err, teambus.ErrState)
}

func TestComplete_NotHolder(t *testing.T) {
	tasks := taskSet(
		taskSpec{id: "x", status: teambus.TaskInProgress, to: "tm1"},
		taskSpec{id: "y", status: teambus.TaskAvailable},
	)
	_, err := teambus.Complete(tasks["x"], "tm2", "", t0)
	wantErr(t, err, teambus.ErrConflict)
	_, err = teambus.Complete(tasks["y"], "tm2", "", t0)
	wantErr(t, err, teambus.ErrState)
}

func TestFail_PausedAtMaxAttempts(t *testing.T) {
	tasks := taskSet(taskSpec{id: "x", status: teambus.TaskAvailable})
	x := tasks["x"]
	cp := &teambus.Checkpoint{Seq: 1, LastAction: "wrote tests"}
	for i := 1; i <= 3; i++ {
		if err := teambus.Claim(x, "tm1", 1, tasks, t0); err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
		x.Checkpoint = cp
		if err := teambus.Fail(x, "tm1", "tests red", 3, t0); err != nil {
			t.Fatalf("fail %d: %v", i, err)
		}
		want := teambus.TaskAvailable
		if i == 3 {
			want = teambus.TaskPaused
		}
		if x.Status != want || x.Failures != i || x.AssignedTo != "" || x.LastError != "tests red" {
			t.Fatalf("after failure %d: %+v, want status %s", i, *x, want)
		}
		if x.Checkpoint != cp {
			t.Fatalf("failure %d dropped the checkpoint", i)
		}
	}
	if x.Attempts != 3 {
		t.Errorf("attempts = %d, want 3", x.Attempts)
	}
	if err := teambus.Claim(x, "tm1", 1, tasks, t0); !errors.Is(err, teambus.ErrState) {
		t.Errorf("claim of paused task = %v, want ErrState", err)
	}
}

func TestFail_NotHolder(t *testing.T) {
	tasks := taskSet(taskSpec{id: "x", status: teambus.TaskInProgress, to: "tm1"}, taskSpec{id: "y", status: teambus.TaskAvailable})
	wantErr(t, teambus.Fail(tasks["x"], "tm2", "", 3, t0), teambus.ErrConflict)
	wantErr(t, teambus.Fail(tasks["y"], "tm2", "", 3, t0), teambus.ErrState)
	if tasks["x"].Failures != 0 {
		t.Errorf("refused fail counted a failure")
	}
}

func TestBlock(t *testing.T) {
	tests := []struct {
		name       string
		member     string
		on, reason string
		kind       error
	}{
		{name: "on a task", member: "tm1", on: "other"},
		{name: "with a reason", member: "tm1", reason: "needs review"},
		{name: "nothing given", member: "tm1", kind: teambus.ErrInvalid},
		{name: "unknown task", member: "tm1", on: "ghost", kind: teambus.ErrNotFound},
		{name: "bad task id", member: "tm1", on: "a.b", kind: teambus.ErrInvalid},
		{name: "itself", member: "tm1", on: "x", kind: teambus.ErrInvalid},
		{name: "not the holder", member: "tm2", reason: "r", kind: teambus.ErrConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tasks := taskSet(taskSpec{id: "x", status: teambus.TaskInProgress, to: "tm1"}, taskSpec{id: "other", status: teambus.TaskAvailable})
			x := tasks["x"]
			err := teambus.Block(x, tt.member, tt.on, tt.reason, tasks, t0)
			if tt.kind != nil {
				wantErr(t, err, tt.kind)
				if x.Status != teambus.TaskInProgress {
					t.Errorf("refused block changed status to %s", x.Status)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if x.Status != teambus.TaskBlocked || x.BlockedOn != tt.on || x.BlockedReason != tt.reason || x.BlockedAt == nil || x.AssignedTo != "tm1" {
				t.Errorf("blocked task = %+v", *x)
			}
			// Blocking again the same way is harmless.
			at := x.BlockedAt
			if err := teambus.Block(x, tt.member, tt.on, tt.reason, tasks, t0.Add(time.Hour)); err != nil {
				t.Errorf("second block: %v", err)
			}
			if x.BlockedAt != at {
				t.Errorf("second block moved blocked_at")
			}
			// Completing clears the block.
			if _, err := teambus.Complete(x, "tm1", "", t0); err != nil {
				t.Fatal(err)
			}
			if x.BlockedOn != "" || x.BlockedReason != "" || x.BlockedAt != nil {
				t.Errorf("complete kept the block: %+v", *x)
			}
		})
	}
}

func TestRelease(t *testing.T) {
	tasks := taskSet(
		taskSpec{id: "dep", status: teambus.TaskComplete},
		taskSpec{id: "x", status: teambus.TaskBlocked, to: "tm1", deps: []string{"dep"}},
	)
	x := tasks["x"]
	x.BlockedReason = "waiting"
	x.Checkpoint = &teambus.Checkpoint{Seq: 3}
	wantErr(t, teambus.Release(x, "tm2", tasks, t0), teambus.ErrConflict)
	if err := teambus.Release(x, "tm1", tasks, t0); err != nil {
		t.Fatal(err)
	}
	if x.Status != teambus.TaskAvailable || x.AssignedTo != "" || x.BlockedReason != "" || x.Checkpoint == nil || x.Checkpoint.Seq != 3 {
		t.Errorf("released task = %+v", *x)
	}
	wantErr(t, teambus.Release(x, "tm1", tasks, t0), teambus.ErrState)
}

func TestRequeue(t *testing.T) {
	tasks := taskSet(
		taskSpec{id: "dep", status: teambus.TaskInProgress, to: "tm2"},
		taskSpec{id: "x", status: teambus.TaskInProgress, to: "tm1", deps: []string{"dep"}},
		taskSpec{id: "y", status: teambus.TaskAvailable},
	)
	// A task whose dependency was reopened goes back to pending, not available.
	if err := teambus.Requeue(tasks["x"], tasks, t0); err != nil {
		t.Fatal(err)
	}
	if got := tasks["x"].Status; got != teambus.TaskPending {
		t.Errorf("requeued status = %s, want pending", got)
	}
	wantErr(t, teambus.Requeue(tasks["y"], tasks, t0), teambus.ErrState)
}

func TestPause(t *testing.T) {
	tasks := taskSet(taskSpec{id: "x", status: teambus.TaskBlocked, to: "tm1"})
	x := tasks["x"]
	x.BlockedOn = "y"
	teambus.Pause(x, "crashed twice", t0)
	if x.Status != teambus.TaskPaused || x.AssignedTo != "" || x.LastError != "crashed twice" || x.BlockedOn != "" {
		t.Errorf("paused task = %+v", *x)
	}
}

func TestReassign(t *testing.T) {
	tests := []struct {
		name   string
		task   taskSpec
		to     string
		kind   error
		tries  int
		status teambus.TaskStatus
	}{
		{name: "available", task: taskSpec{id: "x", status: teambus.TaskAvailable}, to: "tm2", tries: 1},
		{name: "from another member", task: taskSpec{id: "x", status: teambus.TaskInProgress, to: "tm1"}, to: "tm2", tries: 1},
		{name: "paused", task: taskSpec{id: "x", status: teambus.TaskPaused}, to: "tm2", tries: 1},
		{name: "already the holder", task: taskSpec{id: "x", status: teambus.TaskInProgress, to: "tm2"}, to: "tm2", tries: 0},
		{name: "complete", task: taskSpec{id: "x", status: teambus.TaskComplete, to: "tm1"}, to: "tm2", kind: teambus.ErrState},
		{name: "skipped", task: taskSpec{id: "x", status: teambus.TaskSkipped}, to: "tm2", kind: teambus.ErrState},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tasks := taskSet(tt.task)
			x := tasks["x"]
			x.Checkpoint = &teambus.Checkpoint{Seq: 9}
			err := teambus.Reassign(x, tt.to, 5, t0)
			if tt.kind != nil {
				wantErr(t, err, tt.kind)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if x.Status != teambus.TaskInProgress || x.AssignedTo != tt.to || x.Attempts != tt.tries || x.Checkpoint == nil {
				t.Errorf("reassigned task = %+v", *x)
			}
		})
	}
}

func TestReopen(t *testing.T) {
	tests := []struct {
		name   string
		tasks  []taskSpec
		kind   error
		status teambus.TaskStatus
	}{
		{name: "complete, dependents open", tasks: []taskSpec{{id: "x", status: teambus.TaskComplete, to: "tm1"}, {id: "d", status: teambus.TaskAvailable, deps: []string{"x"}}}, status: teambus.TaskAvailable},
		{name: "complete, dependent complete", tasks: []taskSpec{{id: "x", status: teambus.TaskComplete}, {id: "d", status: teambus.TaskComplete, deps: []string{"x"}}}, kind: teambus.ErrState},
		{name: "transitive dependent complete is fine", tasks: []taskSpec{{id: "x", status: teambus.TaskComplete}, {id: "d", status: teambus.TaskAvailable, deps: []string{"x"}}, {id: "e", status: teambus.TaskComplete, deps: []string{"d"}}}, status: teambus.TaskAvailable},
		{name: "failed", tasks: []taskSpec{{id: "x", status: teambus.TaskFailed}}, status: teambus.TaskAvailable},
		{name: "paused", tasks: []taskSpec{{id: "x", status: teambus.TaskPaused}}, status: teambus.TaskAvailable},
		{name: "skipped with an open dependency", tasks: []taskSpec{{id: "p", status: teambus.TaskAvailable}, {id: "x", status: teambus.TaskSkipped, deps: []string{"p"}}}, status: teambus.TaskPending},
		{name: "in progress", tasks: []taskSpec{{id: "x", status: teambus.TaskInProgress, to: "tm1"}}, kind: teambus.ErrState},
		{name: "available", tasks: []taskSpec{{id: "x", status: teambus.TaskAvailable}}, kind: teambus.ErrState},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tasks := taskSet(tt.tasks...)
			x := tasks["x"]
			x.Failures = 2
			x.CompletedAt = teambus.TimePtr(t0)
			before := *x
			err := teambus.Reopen(x, tasks, t0)
			if tt.kind != nil {
				wantErr(t, err, tt.kind)
				if !reflect.DeepEqual(*x, before) {
					t.Errorf("refused reopen changed the task")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if x.Status != tt.status || x.Failures != 0 || x.CompletedAt != nil || x.AssignedTo != "" {
				t.Errorf("reopened task = %+v, want status %s", *x, tt.status)
			}
		})
	}
}

func TestReopen_RefusalNamesDependent(t *testing.T) {
	tasks := taskSet(taskSpec{id: "x", status: teambus.TaskComplete}, taskSpec{id: "d", status: teambus.TaskComplete, deps: []string{"x"}})
	err := teambus.Reopen(tasks["x"], tasks, t0)
	if err == nil || !strings.Contains(err.Error(), "task d depends on it") {
		t.Errorf("Reopen = %v, want a refusal naming task d", err)
	}
}

func TestDependents(t *testing.T) {
	tasks := taskSet(
		taskSpec{id: "a", status: teambus.TaskAvailable},
		taskSpec{id: "c", status: teambus.TaskPending, deps: []string{"a"}},
		taskSpec{id: "b", status: teambus.TaskPending, deps: []string{"a", "a"}},
		taskSpec{id: "d", status: teambus.TaskPending, deps: []string{"c"}},
	)
	if got, want := teambus.Dependents("a", tasks), []string{"b", "c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Dependents(a) = %v, want %v", got, want)
	}
	if got := teambus.Dependents("d", tasks); len(got) != 0 {
		t.Errorf("Dependents(d) = %v, want none", got)
	}
}

func TestDownstream(t *testing.T) {
	// a ← b ← d, a ← c ← d (diamond), c ← e (done), f alone.
	tasks := taskSet(
		taskSpec{id: "a", status: teambus.TaskAvailable},
		taskSpec{id: "b", status: teambus.TaskPending, deps: []string{"a"}},
		taskSpec{id: "c", status: teambus.TaskPending, deps: []string{"a"}},
		taskSpec{id: "d", status: teambus.TaskPending, deps: []string{"b", "c"}},
		taskSpec{id: "e", status: teambus.TaskSkipped, deps: []string{"c"}},
		taskSpec{id: "f", status: teambus.TaskAvailable},
	)
	got := teambus.Downstream(tasks)
	want := map[string]int{"a": 3, "b": 1, "c": 1}
	for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
		if got[id] != want[id] {
			t.Errorf("Downstream[%s] = %d, want %d (d counted once through the diamond, done e not counted)", id, got[id], want[id])
		}
	}
	// DownstreamOf agrees for the tasks it is asked about, and only them.
	of := teambus.DownstreamOf(tasks, []string{"a", "c", "f"})
	if len(of) != 3 || of["a"] != 3 || of["c"] != 1 || of["f"] != 0 {
		t.Errorf("DownstreamOf(a, c, f) = %v, want a:3 c:1 f:0", of)
	}
}

func TestPick_Order(t *testing.T) {
	tasks := taskSet(
		// created first, highest priority, but nothing waits on it
		taskSpec{id: "solo-high", status: teambus.TaskAvailable, prio: 100},
		// unblocks two tasks: first despite the lowest priority
		taskSpec{id: "root", status: teambus.TaskAvailable, prio: -5},
		taskSpec{id: "mid", status: teambus.TaskPending, deps: []string{"root"}},
		taskSpec{id: "leaf", status: teambus.TaskPending, deps: []string{"mid"}},
		// unblocks one
		taskSpec{id: "one", status: teambus.TaskAvailable, prio: 1},
		taskSpec{id: "one-child", status: teambus.TaskPending, deps: []string{"one"}},
		// equal priority: creation order, not id order
		taskSpec{id: "zz-early", status: teambus.TaskAvailable, prio: 7},
		taskSpec{id: "aa-late", status: teambus.TaskAvailable, prio: 7},
		// not claimable
		taskSpec{id: "busy", status: teambus.TaskInProgress, to: "tm9", prio: 1000},
		taskSpec{id: "parked", status: teambus.TaskPaused, prio: 1000},
		taskSpec{id: "finished", status: teambus.TaskComplete, prio: 1000},
	)
	var got []string
	for _, tk := range teambus.Pick(tasks, "") {
		got = append(got, tk.ID)
	}
	want := []string{"root", "one", "solo-high", "zz-early", "aa-late"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Pick = %v, want %v", got, want)
	}
}

func TestPick_TieBreaks(t *testing.T) {
	tasks := taskSet(
		taskSpec{id: "b", status: teambus.TaskAvailable},
		taskSpec{id: "a", status: teambus.TaskAvailable},
		taskSpec{id: "dep-done", status: teambus.TaskComplete},
		taskSpec{id: "ready", status: teambus.TaskPending, deps: []string{"dep-done"}},
	)
	tasks["a"].CreatedAt = tasks["b"].CreatedAt // same instant: id order
	var got []string
	for _, tk := range teambus.Pick(tasks, "") {
		got = append(got, tk.ID)
	}
	if want := []string{"a", "b", "ready"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Pick = %v, want %v (pending with deps done is claimable)", got, want)
	}
}

func TestPick_QuantumPreferred(t *testing.T) {
	tasks := taskSet(
		taskSpec{id: "root", status: teambus.TaskAvailable},
		taskSpec{id: "child", status: teambus.TaskPending, deps: []string{"root"}},
		taskSpec{id: "mine", status: teambus.TaskAvailable},
	)
	tasks["mine"].Quantum = "backend"
	var got []string
	for _, tk := range teambus.Pick(tasks, "backend") {
		got = append(got, tk.ID)
	}
	if want := []string{"mine", "root"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Pick(backend) = %v, want %v", got, want)
	}
}

func TestUnblockedPromote(t *testing.T) {
	tasks := taskSet(
		taskSpec{id: "a", status: teambus.TaskInProgress, to: "tm1"},
		taskSpec{id: "s", status: teambus.TaskSkipped},
		taskSpec{id: "c", status: teambus.TaskPending, deps: []string{"a", "s"}},
		taskSpec{id: "b", status: teambus.TaskPending, deps: []string{"a"}},
		taskSpec{id: "d", status: teambus.TaskPending, deps: []string{"b"}},
		taskSpec{id: "e", status: teambus.TaskPending, deps: []string{"s"}},
	)
	if got, want := teambus.Unblocked(tasks), []string{"e"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Unblocked before = %v, want %v", got, want)
	}
	if teambus.Promote(tasks["b"], tasks, t0) {
		t.Errorf("Promote(b) with a open = true")
	}
	if _, err := teambus.Complete(tasks["a"], "tm1", "", t0); err != nil {
		t.Fatal(err)
	}
	got := teambus.Unblocked(tasks)
	if want := []string{"b", "c", "e"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Unblocked after = %v, want %v", got, want)
	}
	for _, id := range got {
		if !teambus.Promote(tasks[id], tasks, t0) {
			t.Errorf("Promote(%s) = false", id)
		}
		if tasks[id].Status != teambus.TaskAvailable {
			t.Errorf("%s = %s, want available", id, tasks[id].Status)
		}
		if teambus.Promote(tasks[id], tasks, t0) {
			t.Errorf("second Promote(%s) = true", id)
		}
	}
	if got := teambus.Unblocked(tasks); len(got) != 0 {
		t.Errorf("Unblocked after promote = %v, want none (d waits on b)", got)
	}
	if got := teambus.WaitingOn(tasks["d"], tasks); !reflect.DeepEqual(got, []string{"b"}) {
		t.Errorf("WaitingOn(d) = %v, want [b]", got)
	}
}

func TestCountByStatusProgress(t *testing.T) {
	if got := teambus.Progress(nil); got != 0 {
		t.Errorf("Progress(empty) = %d", got)
	}
	tasks := taskSet(
		taskSpec{id: "a", status: teambus.TaskComplete},
		taskSpec{id: "b", status: teambus.TaskSkipped},
		taskSpec{id: "c", status: teambus.TaskAvailable},
	)
	if got := teambus.Progress(tasks); got != 66 {
		t.Errorf("Progress = %d, want 66", got)
	}
	counts := teambus.CountByStatus(tasks)
	if len(counts) != len(teambus.TaskStatuses) {
		t.Errorf("CountByStatus has %d statuses, want all %d", len(counts), len(teambus.TaskStatuses))
	}
	if counts[teambus.TaskComplete] != 1 || counts[teambus.TaskAvailable] != 1 || counts[teambus.TaskPaused] != 0 {
		t.Errorf("CountByStatus = %v", counts)
	}
}

func TestMember_Fenced(t *testing.T) {
	tests := []struct {
		name    string
		status  teambus.MemberStatus
		current string
		session string
		fenced  bool
	}{
		{"no session registered accepts any", teambus.MemberSpawned, "", "whatever", false},
		{"current session", teambus.MemberIdle, "s2", "s2", false},
		{"old session", teambus.MemberIdle, "s2", "s1", true},
		{"empty session once registered", teambus.MemberIdle, "s2", "", true},
		{"zombie may still act", teambus.MemberZombie, "s2", "s2", false},
		{"crashed", teambus.MemberCrashed, "s2", "s2", true},
		{"paused", teambus.MemberPaused, "s2", "s2", true},
		{"shutdown", teambus.MemberShutdown, "s2", "s2", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &teambus.Member{ID: "tm1", Status: tt.status, Session: tt.current, Epoch: 2}
			err := m.Fenced(tt.session)
			if got := err != nil; got != tt.fenced {
				t.Fatalf("Fenced(%q) = %v, want fenced=%t", tt.session, err, tt.fenced)
			}
			want := teambus.ExitConflict
			if tt.session == "" {
				want = teambus.ExitPermanent // missing --session (issue 12 item 15)
			}
			if err != nil && teambus.ExitCode(err) != want {
				t.Errorf("fenced error %v: exit %d, want %d", err, teambus.ExitCode(err), want)
			}
		})
	}
}

func TestMember_Register(t *testing.T) {
	m := &teambus.Member{ID: "tm1", Status: teambus.MemberZombie, Epoch: 3, Session: "s1", ZombieSince: teambus.TimePtr(t0)}
	m.Register("s2", t0.Add(time.Minute))
	if m.Epoch != 4 || m.Session != "s2" || m.Status != teambus.MemberSpawned || m.ZombieSince != nil {
		t.Errorf("registered member = %+v", *m)
	}
	if err := m.Fenced("s1"); !errors.Is(err, teambus.ErrFenced) {
		t.Errorf("old session after Register = %v, want ErrFenced", err)
	}
}

func TestTeam_Closed(t *testing.T) {
	for st, want := range map[teambus.TeamStatus]bool{
		teambus.TeamPending: false, teambus.TeamActive: false, teambus.TeamConsolidating: false,
		teambus.TeamComplete: true, teambus.TeamAborted: true,
	} {
		tm := &teambus.Team{Status: st}
		if got := tm.Closed(); got != want {
			t.Errorf("Closed(%s) = %t, want %t", st, got, want)
		}
	}
}
