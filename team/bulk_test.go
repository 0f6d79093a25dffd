package team_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/team"
)

func parseImport(t *testing.T, lines ...string) []team.ImportTask {
	t.Helper()
	tasks, err := team.ParseImport(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return tasks
}

// taskIDs lists the team's task ids.
func (f *fixture) taskCount(t *testing.T, teamID string) int {
	t.Helper()
	snap, err := f.svc.Store().Snapshot(testCtx(t), teamID)
	if err != nil {
		t.Fatal(err)
	}
	return len(snap.Tasks)
}

func TestService_ImportTasks_DependenciesFirst(t *testing.T) {
	f := newFixture(t, team.Config{})
	f.create(t, "imp", "L", testPolicy(), "tm1")
	f.addTask(t, "imp", "base", 0)
	// api is listed before its dependency schema: the import writes schema
	// first; base exists already in the team.
	tasks := parseImport(t,
		`{"id":"api","desc":"Build the API","deps":["schema","base"],"priority":2,"role":"backend"}`,
		``,
		`{"id":"schema","description":"Design the schema"}`,
		`{"id":"docs","desc":"Document it","deps":["api"]}`,
	)
	var seen []int
	res, err := f.svc.ImportTasks(testCtx(t), "imp", tasks, func(done, total int) { seen = append(seen, done, total) })
	if err != nil {
		t.Fatal(err)
	}
	if res.Added != 3 || res.Existing != 0 || res.EventsLogged != 3 {
		t.Fatalf("result %+v, want 3 added and logged", res)
	}
	if fmt.Sprint(seen) != "[3 3]" {
		t.Errorf("progress %v, want [3 3]", seen)
	}
	api := f.task(t, "imp", "api")
	if api.Status != teambus.TaskPending || api.Quantum != "backend" || api.Priority != 2 {
		t.Errorf("api = %+v, want pending, quantum backend, priority 2", api)
	}
	if s := f.task(t, "imp", "schema"); s.Status != teambus.TaskAvailable || s.Description != "Design the schema" {
		t.Errorf("schema = %+v, want available", s)
	}
	var added []string
	err = f.svc.Events("imp").Replay(testCtx(t), eventlog.EventFilter{Type: eventlog.EvTaskAdded}, func(r *eventlog.EventRecord) error {
		added = append(added, string(r.Event.Data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(added) != 4 || !strings.Contains(added[1], `"taskId":"schema"`) || !strings.Contains(added[2], `"taskId":"api"`) {
		t.Errorf("task.added events %q, want base, then schema before api", added)
	}

	// The same import again changes nothing.
	res, err = f.svc.ImportTasks(testCtx(t), "imp", tasks, nil)
	if err != nil || res.Added != 0 || res.Existing != 3 {
		t.Fatalf("repeated import: %+v, %v; want 3 existing", res, err)
	}
}

func TestService_ImportTasks_BadInputWritesNothing(t *testing.T) {
	f := newFixture(t, team.Config{})
	f.create(t, "imp", "L", testPolicy(), "tm1")
	f.addTask(t, "imp", "base", 0)
	tests := []struct {
		name  string
		lines []string
		kind  error
		parts []string
	}{
		{"unknown dependency", []string{`{"id":"a","deps":[]}`, `{"id":"b","deps":["a","ghost"]}`}, teambus.ErrNotFound, []string{"line 2", "ghost"}},
		{"cycle", []string{`{"id":"a","deps":["c"]}`, `{"id":"b","deps":["a"]}`, `{"id":"c","deps":["b"]}`, `{"id":"d"}`}, teambus.ErrInvalid, []string{"line 1", "a → c → b → a"}},
		{"self", []string{`{"id":"a","deps":["a"]}`}, teambus.ErrInvalid, []string{"line 1", "itself"}},
		{"duplicate id", []string{`{"id":"a"}`, `{"id":"b"}`, `{"id":"a"}`}, teambus.ErrInvalid, []string{"line 3", "also on line 1"}},
		{"exists with another spec", []string{`{"id":"x"}`, `{"id":"base","desc":"other"}`}, teambus.ErrState, []string{"line 2", "base"}},
		{"bad id", []string{`{"id":"x"}`, `{"id":"no spaces"}`}, teambus.ErrInvalid, []string{"line 2"}},
		{"description too long", []string{`{"id":"x","desc":"` + strings.Repeat("d", teambus.MaxDescription+1) + `"}`}, teambus.ErrInvalid, []string{"line 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.svc.ImportTasks(testCtx(t), "imp", parseImport(t, tt.lines...), nil)
			if !errors.Is(err, tt.kind) || teambus.ExitCode(err) != teambus.ExitPermanent {
				t.Fatalf("err %v (exit %d), want %v, exit 2", err, teambus.ExitCode(err), tt.kind)
			}
			for _, p := range tt.parts {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("error %q does not name %q", err, p)
				}
			}
			if n := f.taskCount(t, "imp"); n != 1 {
				t.Fatalf("%d tasks after a refused import, want the 1 there before", n)
			}
		})
	}
}

// TestService_ImportTasks_CutShortThenFinished cuts an import of 1,200
// tasks (three batches) after its first batch, as a kill would: what was
// acknowledged stays, nothing is half written, and running the import
// again finishes it.
func TestService_ImportTasks_CutShortThenFinished(t *testing.T) {
	f := newFixture(t, team.Config{})
	f.create(t, "imp", "L", testPolicy(), "tm1")
	var lines []string
	for i := range 1200 {
		dep := ""
		if i > 0 {
			dep = fmt.Sprintf(`"t%04d"`, i-1)
		}
		lines = append(lines, fmt.Sprintf(`{"id":"t%04d","desc":"step %d","deps":[%s]}`, i, i, dep))
	}
	tasks := parseImport(t, lines...)
	ctx, cancel := context.WithCancel(testCtx(t))
	first := 0
	_, err := f.svc.ImportTasks(ctx, "imp", tasks, func(done, total int) {
		if first == 0 {
			first = done
			cancel()
		}
	})
	if err == nil {
		t.Fatal("the import cut short after its first batch succeeded")
	}
	stored := f.taskCount(t, "imp")
	if stored != first || stored == 0 || stored == len(tasks) {
		t.Fatalf("%d tasks stored after the cut, want the first batch (%d)", stored, first)
	}
	res, err := f.svc.ImportTasks(testCtx(t), "imp", tasks, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Existing != stored || res.Added != len(tasks)-stored || f.taskCount(t, "imp") != len(tasks) {
		t.Fatalf("second run %+v with %d stored before; want the rest added", res, stored)
	}
	if tk := f.task(t, "imp", "t0000"); tk.Status != teambus.TaskAvailable {
		t.Errorf("t0000 is %s, want available", tk.Status)
	}
	if tk := f.task(t, "imp", "t1199"); tk.Status != teambus.TaskPending {
		t.Errorf("t1199 is %s, want pending", tk.Status)
	}
}

func TestParseImport_Errors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"not json", "{\"id\":\"a\"}\nnope", "line 2"},
		{"unknown field", `{"id":"a","owner":"x"}`, `unknown field "owner"`},
		{"two values", `{"id":"a"} {"id":"b"}`, "one task per line"},
		{"no id", `{"desc":"x"}`, "no id"},
		{"both descs", `{"id":"a","desc":"x","description":"y"}`, "both"},
		{"quantum and role differ", `{"id":"a","quantum":"x","role":"y"}`, "differ"},
		{"empty", "\n\n", "no tasks"},
		{"wrong type", `{"id":"a","priority":"high"}`, "line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := team.ParseImport(strings.NewReader(tt.in))
			if !errors.Is(err, teambus.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want an ErrInvalid containing %q", err, tt.want)
			}
		})
	}
}
