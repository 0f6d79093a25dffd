package kv_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/team"
)

// testCtx bounds a test's calls: generously, since fixtures of
// thousands of fsynced writes share a loaded 2-core machine in CI and a
// test must not fail on timing.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newStore starts a node and returns a store on it and its JetStream,
// with the team service's board layout.
func newStore(t *testing.T) (*kv.Store, jetstream.JetStream) {
	t.Helper()
	n := nodetest.NewBareServer(t)
	c := nodetest.Connect(t, n)
	return kv.New(c.JS, kv.Config{Board: team.BoardLayout()}), c.JS
}

// createTeam creates team id with members.
func createTeam(t *testing.T, s *kv.Store, id string, members ...string) *teambus.Team {
	t.Helper()
	now := s.Now()
	tm := &teambus.Team{ID: id, Status: teambus.TeamActive, CreatedAt: now, Policy: teambus.DefaultPolicy()}
	var ms []*teambus.Member
	for _, m := range members {
		ms = append(ms, &teambus.Member{ID: m, Status: teambus.MemberSpawned, CreatedAt: now})
	}
	if err := s.CreateTeam(testCtx(t), tm, ms); err != nil {
		t.Fatalf("create team %s: %v", id, err)
	}
	return tm
}

func newTask(t *testing.T, id string, deps ...string) *teambus.Task {
	t.Helper()
	tk := &teambus.Task{ID: id, Status: teambus.TaskAvailable, Dependencies: deps, CreatedAt: time.Now().UTC()}
	if deps == nil {
		tk.Dependencies = []string{}
	}
	return tk
}

func TestStore_PutTask_StaleRevisionConflict(t *testing.T) {
	ctx := testCtx(t)
	s, _ := newStore(t)
	createTeam(t, s, "alpha")

	tk := newTask(t, "t1")
	rev1, err := s.PutTask(ctx, "alpha", tk, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Creating it again (rev 0) loses: it exists.
	if _, err := s.PutTask(ctx, "alpha", tk, 0); !errors.Is(err, teambus.ErrConflict) {
		t.Fatalf("second create = %v, want ErrConflict", err)
	}
	tk.Priority = 1
	rev2, err := s.PutTask(ctx, "alpha", tk, rev1)
	if err != nil {
		t.Fatal(err)
	}
	if rev2 <= rev1 {
		t.Errorf("revision went from %d to %d", rev1, rev2)
	}
	// A writer that read at rev1 loses.
	tk.Priority = 99
	_, err = s.PutTask(ctx, "alpha", tk, rev1)
	if !errors.Is(err, teambus.ErrConflict) || !errors.Is(err, kv.ErrConflict) {
		t.Fatalf("stale put = %v, want ErrConflict", err)
	}
	if got, want := teambus.ExitCode(err), teambus.ExitConflict; got != want {
		t.Errorf("exit code = %d, want %d", got, want)
	}
	got, rev, err := s.Task(ctx, "alpha", "t1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Priority != 1 || rev != rev2 {
		t.Errorf("stored task priority %d rev %d, want 1 rev %d: the stale write must not land", got.Priority, rev, rev2)
	}
	// A revision from the future is stale too.
	if _, err := s.PutTask(ctx, "alpha", tk, rev2+100); !errors.Is(err, teambus.ErrConflict) {
		t.Errorf("put with unknown revision = %v, want ErrConflict", err)
	}
}

func TestStore_PutMemberPutTeam_StaleRevisionConflict(t *testing.T) {
	ctx := testCtx(t)
	s, _ := newStore(t)
	createTeam(t, s, "alpha", "tm1")

	m, rev, err := s.Member(ctx, "alpha", "tm1")
	if err != nil {
		t.Fatal(err)
	}
	m.Epoch = 1
	if _, err := s.PutMember(ctx, "alpha", m, rev); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutMember(ctx, "alpha", m, rev); !errors.Is(err, teambus.ErrConflict) {
		t.Errorf("stale member put = %v, want ErrConflict", err)
	}
	if _, err := s.PutMember(ctx, "alpha", &teambus.Member{ID: teambus.Lead}, 0); !errors.Is(err, teambus.ErrInvalid) {
		t.Errorf("member %q put = %v, want ErrInvalid", teambus.Lead, err)
	}

	tm, trev, err := s.Team(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	tm.LeadEpoch = 1
	if _, err := s.PutTeam(ctx, tm, trev); err != nil {
		t.Fatal(err)
	}
	tm.LeadEpoch = 2
	if _, err := s.PutTeam(ctx, tm, trev); !errors.Is(err, teambus.ErrConflict) {
		t.Errorf("stale team put = %v, want ErrConflict", err)
	}
}

func TestStore_ConcurrentRetryLosesNoUpdate(t *testing.T) {
	ctx := testCtx(t)
	s, _ := newStore(t)
	createTeam(t, s, "alpha")
	if _, err := s.PutTask(ctx, "alpha", newTask(t, "counter"), 0); err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 15
	var conflicts atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				err := kv.Retry(ctx, func() error {
					tk, rev, err := s.Task(ctx, "alpha", "counter")
					if err != nil {
						return err
					}
					tk.Attempts++
					_, err = s.PutTask(ctx, "alpha", tk, rev)
					if errors.Is(err, kv.ErrConflict) {
						conflicts.Add(1)
					}
					return err
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	tk, _, err := s.Task(ctx, "alpha", "counter")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tk.Attempts, workers*each; got != want {
		t.Errorf("counter = %d, want %d: an update was lost", got, want)
	}
	t.Logf("%d compare-and-set conflicts retried", conflicts.Load())
}

func TestStore_CreateTeam_Exists(t *testing.T) {
	ctx := testCtx(t)
	s, _ := newStore(t)
	createTeam(t, s, "alpha", "tm1")
	err := s.CreateTeam(ctx, &teambus.Team{ID: "alpha", Status: teambus.TeamPending}, nil)
	if !errors.Is(err, teambus.ErrState) {
		t.Fatalf("second create = %v, want ErrState", err)
	}
	tm, _, err := s.Team(ctx, "alpha")
	if err != nil || tm.Status != teambus.TeamActive {
		t.Errorf("team after refused create = %+v, %v: must be unchanged", tm, err)
	}
}

func TestStore_CreateTeam_InvalidID(t *testing.T) {
	ctx := testCtx(t)
	s, js := newStore(t)
	for _, id := range []string{"", "a.b", "a*", "a>", "a b", "x/y"} {
		if err := s.CreateTeam(ctx, &teambus.Team{ID: id}, nil); !errors.Is(err, teambus.ErrInvalid) {
			t.Errorf("CreateTeam(%q) = %v, want ErrInvalid", id, err)
		}
	}
	names := js.KeyValueStoreNames(ctx)
	var got []string
	for n := range names.Name() {
		got = append(got, n)
	}
	if len(got) != 0 {
		t.Errorf("buckets after refused creates: %v, want none", got)
	}
}

func TestStore_NotFound(t *testing.T) {
	ctx := testCtx(t)
	s, _ := newStore(t)
	createTeam(t, s, "alpha")
	tests := []struct {
		name string
		call func() error
		kind error
	}{
		{"team", func() error { _, _, err := s.Team(ctx, "ghost"); return err }, teambus.ErrNotFound},
		{"snapshot", func() error { _, err := s.Snapshot(ctx, "ghost"); return err }, teambus.ErrNotFound},
		{"member", func() error { _, _, err := s.Member(ctx, "alpha", "nobody"); return err }, teambus.ErrNotFound},
		{"task", func() error { _, _, err := s.Task(ctx, "alpha", "nothing"); return err }, teambus.ErrNotFound},
		{"put task in missing team", func() error { _, err := s.PutTask(ctx, "ghost", newTask(t, "t1"), 0); return err }, teambus.ErrNotFound},
		{"bad team id", func() error { _, _, err := s.Team(ctx, "a.b"); return err }, teambus.ErrInvalid},
		{"bad task id", func() error { _, err := s.PutTask(ctx, "alpha", newTask(t, "t*"), 0); return err }, teambus.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, tt.kind) {
				t.Errorf("err = %v, want %v", err, tt.kind)
			}
		})
	}
	ok, err := s.TeamExists(ctx, "ghost")
	if ok || err != nil {
		t.Errorf("TeamExists(ghost) = %t, %v", ok, err)
	}
	ok, err = s.TeamExists(ctx, "alpha")
	if !ok || err != nil {
		t.Errorf("TeamExists(alpha) = %t, %v", ok, err)
	}
}

func TestStore_Snapshot(t *testing.T) {
	ctx := testCtx(t)
	s, _ := newStore(t)
	createTeam(t, s, "alpha", "tm2", "tm1")

	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	revs := map[string]uint64{}
	for i, id := range []string{"zeta", "alpha1", "mid"} {
		tk := newTask(t, id)
		tk.CreatedAt = base.Add(time.Duration(i) * time.Minute)
		if id == "mid" {
			tk.Status, tk.AssignedTo = teambus.TaskBlocked, "tm1"
		}
		rev, err := s.PutTask(ctx, "alpha", tk, 0)
		if err != nil {
			t.Fatal(err)
		}
		revs[id] = rev
	}
	if err := s.Touch(ctx, "alpha", "tm2"); err != nil {
		t.Fatal(err)
	}

	snap, err := s.Snapshot(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Team.ID != "alpha" || snap.TeamRev == 0 {
		t.Errorf("team = %+v rev %d", snap.Team, snap.TeamRev)
	}
	if got, want := snap.MemberIDs(), []string{"tm1", "tm2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("MemberIDs = %v, want %v", got, want)
	}
	if got, want := snap.TaskIDs(), []string{"zeta", "alpha1", "mid"}; !reflect.DeepEqual(got, want) {
		t.Errorf("TaskIDs = %v, want creation order %v", got, want)
	}
	for id, rev := range revs {
		if snap.TaskRev[id] != rev {
			t.Errorf("TaskRev[%s] = %d, want %d", id, snap.TaskRev[id], rev)
		}
	}
	if _, ok := snap.Activity["tm2"]; !ok {
		t.Errorf("activity of tm2 missing: %v", snap.Activity)
	}
	if got := snap.MemberTasks("tm1"); len(got) != 1 || got[0].ID != "mid" {
		t.Errorf("MemberTasks(tm1) = %v", got)
	}
	if got, want := snap.WorkStatus("tm1"), teambus.MemberBlocked; got != want {
		t.Errorf("WorkStatus(tm1) = %s, want %s", got, want)
	}
	if got, want := snap.WorkStatus("tm2"), teambus.MemberSpawned; got != want {
		t.Errorf("WorkStatus(tm2) = %s, want %s", got, want)
	}
	if _, err := snap.Task("nope"); !errors.Is(err, teambus.ErrNotFound) {
		t.Errorf("snap.Task(nope) = %v", err)
	}
	if _, err := snap.Member("nope"); !errors.Is(err, teambus.ErrNotFound) {
		t.Errorf("snap.Member(nope) = %v", err)
	}
	// The revision a snapshot hands out is the one a CAS write needs.
	tk := snap.Tasks["zeta"]
	tk.Priority = 5
	if _, err := s.PutTask(ctx, "alpha", tk, snap.TaskRev["zeta"]); err != nil {
		t.Errorf("put at snapshot revision: %v", err)
	}
}

func TestStore_Touch_OnlyForward(t *testing.T) {
	ctx := testCtx(t)
	n := nodetest.NewBareServer(t)
	c := nodetest.Connect(t, n)
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	s := kv.New(c.JS, kv.Config{Now: func() time.Time { return time.Unix(0, now.Load()) }})
	createTeam(t, s, "alpha", "tm1")

	if at, err := s.Activity(ctx, "alpha", "tm1"); err != nil || !at.IsZero() {
		t.Fatalf("activity before any = %v, %v; want zero", at, err)
	}
	if err := s.Touch(ctx, "alpha", "tm1"); err != nil {
		t.Fatal(err)
	}
	first := s.Now()
	now.Add(int64(-time.Hour))
	if err := s.Touch(ctx, "alpha", "tm1"); err != nil {
		t.Fatal(err)
	}
	at, err := s.Activity(ctx, "alpha", "tm1")
	if err != nil || !at.Equal(first) {
		t.Errorf("activity after an older touch = %v, %v; want %v", at, err, first)
	}
	now.Add(int64(2 * time.Hour))
	if err := s.Touch(ctx, "alpha", "tm1"); err != nil {
		t.Fatal(err)
	}
	if at, _ := s.Activity(ctx, "alpha", "tm1"); !at.Equal(s.Now()) {
		t.Errorf("activity = %v, want %v", at, s.Now())
	}
}

func TestStore_ListDeleteTeams(t *testing.T) {
	ctx := testCtx(t)
	s, _ := newStore(t)
	createTeam(t, s, "beta")
	createTeam(t, s, "alpha")
	got, err := s.ListTeams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"alpha", "beta"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ListTeams = %v, want %v", got, want)
	}
	if err := s.DeleteTeam(ctx, "beta"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTeam(ctx, "beta"); err != nil {
		t.Errorf("second delete = %v, want nil", err)
	}
	got, _ = s.ListTeams(ctx)
	if want := []string{"alpha"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ListTeams after delete = %v, want %v", got, want)
	}
	if _, err := s.Snapshot(ctx, "beta"); !errors.Is(err, teambus.ErrNotFound) {
		t.Errorf("snapshot of deleted team = %v", err)
	}
}

func TestRetry(t *testing.T) {
	t.Parallel() // waits on server timers
	ctx := testCtx(t)
	other := teambus.Conflictf("task t1 is already claimed by tm2")
	tests := []struct {
		name  string
		fails int   // calls that return kv.ErrConflict first
		final error // then this
		calls int
		want  error
	}{
		{"first try", 0, nil, 1, nil},
		{"after stale revisions", 3, nil, 4, nil},
		{"transition conflict is not retried", 0, other, 1, other},
		{"other error is not retried", 1, teambus.Statef("no"), 2, teambus.ErrState},
		{"gives up", kv.MaxRetries + 10, nil, kv.MaxRetries, kv.ErrConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			err := kv.Retry(ctx, func() error {
				calls++
				if calls <= tt.fails {
					return fmt.Errorf("write task.t1: %w", kv.ErrConflict)
				}
				return tt.final
			})
			if calls != tt.calls {
				t.Errorf("calls = %d, want %d", calls, tt.calls)
			}
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("Retry = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestRetry_StopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := kv.Retry(ctx, func() error {
		calls++
		if calls == 3 {
			cancel()
		}
		return kv.ErrConflict
	})
	if calls != 3 || !errors.Is(err, kv.ErrConflict) {
		t.Errorf("Retry after cancel: %d calls, %v; want 3 calls and the conflict", calls, err)
	}
}

func TestStore_Snapshot_ConcurrentWrites(t *testing.T) {
	ctx := testCtx(t)
	s, _ := newStore(t)
	createTeam(t, s, "alpha", "tm1", "tm2")

	// Other writers keep rewriting records while snapshots are read:
	// activity keys past the bucket's history, and a hot task.
	if _, err := s.PutTask(ctx, "alpha", newTask(t, "hot"), 0); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, m := range []string{"tm1", "tm2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = s.Touch(ctx, "alpha", m)
				_ = kv.Retry(ctx, func() error {
					tk, rev, err := s.Task(ctx, "alpha", "hot")
					if err != nil {
						return err
					}
					tk.Attempts++
					_, err = s.PutTask(ctx, "alpha", tk, rev)
					return err
				})
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()

	for i := 0; i < 150; i++ {
		id := fmt.Sprintf("t%03d", i)
		if _, err := s.PutTask(ctx, "alpha", newTask(t, id), 0); err != nil {
			t.Fatal(err)
		}
		snap, err := s.Snapshot(ctx, "alpha")
		if err != nil {
			t.Fatal(err)
		}
		// Every record written before the snapshot started is in it.
		if got, want := len(snap.Tasks), i+2; got != want {
			t.Fatalf("snapshot %d after creating %s has %d tasks, want %d: missing %v", i, id, got, want, missing(snap, i))
		}
		if len(snap.Members) != 2 || snap.Team == nil {
			t.Fatalf("snapshot %d: %d members, team %v", i, len(snap.Members), snap.Team)
		}
	}
}

func missing(snap *kv.Snapshot, upto int) []string {
	var out []string
	for i := 0; i <= upto; i++ {
		if id := fmt.Sprintf("t%03d", i); snap.Tasks[id] == nil {
			out = append(out, id)
		}
	}
	if snap.Tasks["hot"] == nil {
		out = append(out, "hot")
	}
	return out
}

// A watch of the team and one member is sent those two records, current
// values first, and then their writes: no other member's, no task's.
func TestStore_WatchTeamAndMember(t *testing.T) {
	ctx := testCtx(t)
	s, _ := newStore(t)
	createTeam(t, s, "alpha", "tm1", "tm2")
	if _, err := s.PutTask(ctx, "alpha", &teambus.Task{ID: "t1", Status: teambus.TaskPending, CreatedAt: s.Now()}, 0); err != nil {
		t.Fatal(err)
	}
	w, err := s.WatchTeamAndMember(ctx, "alpha", "tm1")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var keys []string
	for {
		e := nextEntry(t, w, 5*time.Second)
		if e == nil {
			break // the current values are in
		}
		keys = append(keys, e.Key())
	}
	slices.Sort(keys)
	if want := []string{"member.tm1", "team"}; !slices.Equal(keys, want) {
		t.Fatalf("current values of %v, want %v", keys, want)
	}
	for _, id := range []string{"t2", "t3"} {
		if _, err := s.PutTask(ctx, "alpha", &teambus.Task{ID: id, Status: teambus.TaskPending, CreatedAt: s.Now()}, 0); err != nil {
			t.Fatal(err)
		}
	}
	m2, rev2, err := s.Member(ctx, "alpha", "tm2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutMember(ctx, "alpha", m2, rev2); err != nil {
		t.Fatal(err)
	}
	m1, rev1, err := s.Member(ctx, "alpha", "tm1")
	if err != nil {
		t.Fatal(err)
	}
	m1.ContextPct = 42
	if _, err := s.PutMember(ctx, "alpha", m1, rev1); err != nil {
		t.Fatal(err)
	}
	if e := nextEntry(t, w, 5*time.Second); e.Key() != "member.tm1" {
		t.Fatalf("next write %s, want tm1's (the tasks and tm2 are not watched)", e.Key())
	}
}
