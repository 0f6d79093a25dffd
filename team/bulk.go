package team

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/kv"
)

// ImportTask is one task of a bulk import and where it came from, for
// error messages (a line of the file; 0 when it came from elsewhere).
type ImportTask struct {
	Line int
	TaskSpec
}

// ImportResult is what ImportTasks did.
type ImportResult struct {
	// Added are the tasks created, in the order written (dependencies
	// before their dependents).
	Added int `json:"added"`
	// Existing counts the tasks that were there already with the same
	// description, dependencies, priority and quantum: a repeated import
	// skips them, so re-running an import that was cut short finishes it.
	Existing int `json:"existing"`
	// EventsLogged counts the task.added events stored for the new tasks.
	EventsLogged int `json:"events_logged"`
}

// ImportTasks adds many tasks at once. The whole list is checked first —
// ids, descriptions, duplicate ids, dependencies that are neither in the
// list nor in the team, dependency cycles — and nothing is written unless
// all of it is valid; an error names the line. A task that exists with the
// same spec is skipped, one that exists with another spec refuses the
// import. The new tasks are then written dependencies first, in atomic
// batches (kv.Store.CreateTasks); a batch that loses a race with another
// writer is refused whole, and the import reads the team again and
// continues. progress, when not nil, is told how many of the new tasks are
// written.
func (s *Service) ImportTasks(ctx context.Context, team string, tasks []ImportTask, progress func(done, total int)) (ImportResult, error) {
	var res ImportResult
	if err := teambus.ValidateID("team", team); err != nil {
		return res, err
	}
	for attempt := 0; ; attempt++ {
		snap, err := s.store.Snapshot(ctx, team)
		if err != nil {
			return res, err
		}
		if snap.Team.Closed() {
			return res, teambus.Statef("team %s is %s: no new tasks", team, snap.Team.Status)
		}
		fresh, existing, err := planImport(snap, tasks, s.Now())
		if err != nil {
			return res, err
		}
		res.Existing = existing
		if err := s.indexDependents(ctx, team, fresh); err != nil {
			return res, err
		}
		err = s.store.CreateTasks(ctx, team, fresh, func(n int) {
			if progress != nil {
				progress(n, len(fresh))
			}
		})
		if errors.Is(err, kv.ErrConflict) && attempt < 8 {
			// Another writer added a task of the list meanwhile: what is
			// stored now counts as existing on the next pass.
			continue
		}
		if err != nil {
			return res, err
		}
		res.Added = len(fresh)
		s.boardDownAll(ctx, team, snap.Tasks, fresh)
		res.EventsLogged = s.logTasksAdded(ctx, team, fresh)
		return res, nil
	}
}

// planImport checks tasks against the team in snap and returns the tasks
// to create, dependencies first (file order otherwise), and how many exist
// already.
func planImport(snap *kv.Snapshot, tasks []ImportTask, now time.Time) ([]*teambus.Task, int, error) {
	where := func(it ImportTask) string {
		if it.Line > 0 {
			return fmt.Sprintf("line %d", it.Line)
		}
		return "task " + it.ID
	}
	byID := make(map[string]int, len(tasks))
	for i, it := range tasks {
		if err := teambus.ValidateID("task", it.ID); err != nil {
			return nil, 0, teambus.Invalidf("%s: %w", where(it), err)
		}
		if j, dup := byID[it.ID]; dup {
			return nil, 0, teambus.Invalidf("%s: task %s is also on %s: one id, one task", where(it), it.ID, where(tasks[j]))
		}
		byID[it.ID] = i
	}
	skip := make([]bool, len(tasks))
	existing := 0
	for i, it := range tasks {
		for _, id := range append([]string{it.ID}, it.Deps...) {
			if _, err := snap.Task(id); errors.Is(err, kv.ErrDamaged) {
				return nil, 0, fmt.Errorf("%s: %w", where(it), err)
			}
		}
		if t, ok := snap.Tasks[it.ID]; ok {
			if !sameSpec(t, it.TaskSpec) {
				return nil, 0, teambus.Statef("%s: task %s exists with another description, dependencies, priority or quantum: use a new id", where(it), it.ID)
			}
			skip[i] = true
			existing++
		}
	}
	// Dependencies first: Kahn's algorithm over the new tasks, in file
	// order among the ready ones.
	waiting := make([]int, len(tasks)) // new dependencies not yet placed
	dependents := make([][]int, len(tasks))
	for i, it := range tasks {
		if skip[i] {
			continue
		}
		for _, d := range it.Deps {
			if d == it.ID {
				return nil, 0, teambus.Invalidf("%s: task %s can not depend on itself", where(it), it.ID)
			}
			j, inList := byID[d]
			if !inList {
				if _, ok := snap.Tasks[d]; !ok {
					return nil, 0, teambus.NotFoundf("%s: dependency %s of task %s is neither in the file nor in team %s", where(it), d, it.ID, snap.Team.ID)
				}
				continue
			}
			if skip[j] {
				continue
			}
			waiting[i]++
			dependents[j] = append(dependents[j], i)
		}
	}
	var order []int
	ready := &lineHeap{}
	for i := range tasks {
		if !skip[i] && waiting[i] == 0 {
			heap.Push(ready, i)
		}
	}
	for ready.Len() > 0 {
		i := heap.Pop(ready).(int)
		order = append(order, i)
		for _, k := range dependents[i] {
			if waiting[k]--; waiting[k] == 0 {
				heap.Push(ready, k)
			}
		}
	}
	if want := len(tasks) - existing; len(order) < want {
		return nil, 0, cycleError(tasks, skip, waiting, byID, where)
	}
	all := make(map[string]*teambus.Task, len(snap.Tasks)+len(order))
	for id, t := range snap.Tasks {
		all[id] = t
	}
	out := make([]*teambus.Task, 0, len(order))
	for _, i := range order {
		it := tasks[i]
		t, err := teambus.NewTask(it.ID, it.Description, it.Deps, it.Priority, it.Quantum, all, now)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", where(it), err)
		}
		all[t.ID] = t
		out = append(out, t)
	}
	return out, existing, nil
}

// cycleError names a dependency cycle among the tasks left waiting: it
// follows waiting dependencies from the first such task until one repeats.
func cycleError(tasks []ImportTask, skip []bool, waiting []int, byID map[string]int, where func(ImportTask) string) error {
	start := -1
	for i := range tasks {
		if !skip[i] && waiting[i] > 0 {
			start = i
			break
		}
	}
	seen := map[int]int{}
	var path []int
	for i := start; i >= 0; {
		if at, ok := seen[i]; ok {
			path = path[at:]
			break
		}
		seen[i] = len(path)
		path = append(path, i)
		next := -1
		for _, d := range tasks[i].Deps {
			if j, ok := byID[d]; ok && !skip[j] && waiting[j] > 0 {
				next = j
				break
			}
		}
		i = next
	}
	ids := make([]string, 0, len(path)+1)
	for _, i := range path {
		ids = append(ids, tasks[i].ID)
	}
	if len(path) > 0 {
		ids = append(ids, tasks[path[0]].ID)
		return teambus.Invalidf("%s: task %s is in a dependency cycle: %s", where(tasks[path[0]]), tasks[path[0]].ID, strings.Join(ids, " → "))
	}
	return teambus.Invalidf("%s: task %s waits on a dependency cycle", where(tasks[start]), tasks[start].ID)
}

// sameSpec reports whether task t is what spec would create.
func sameSpec(t *teambus.Task, spec TaskSpec) bool {
	if t.Description != spec.Description || t.Priority != spec.Priority || t.Quantum != spec.Quantum {
		return false
	}
	want := map[string]bool{}
	for _, d := range spec.Deps {
		want[d] = true
	}
	if len(want) != len(t.Dependencies) {
		return false
	}
	for _, d := range t.Dependencies {
		if !want[d] {
			return false
		}
	}
	return true
}

// logTasksAdded logs task.added for each new task in the team session, in
// batches; a failure is logged, not returned: the tasks are stored.
func (s *Service) logTasksAdded(ctx context.Context, team string, tasks []*teambus.Task) int {
	if len(tasks) == 0 {
		return 0
	}
	sid := SessionID(team)
	evs := make([]*eventlog.Event, 0, len(tasks))
	for _, t := range tasks {
		data, err := json.Marshal(map[string]any{"taskId": t.ID, "summary": clipText(t.Description, 200),
			"dependencies": t.Dependencies, "priority": t.Priority, "status": t.Status})
		if err != nil {
			s.cfg.Logger.Warn("encode event", "team", team, "type", eventlog.EvTaskAdded, "err", err)
			continue
		}
		evs = append(evs, &eventlog.Event{TS: s.Now().Truncate(time.Millisecond), SID: sid, Type: eventlog.EvTaskAdded, Feature: team, Data: data})
	}
	n, err := s.Events(team).AppendBatch(ctx, evs)
	if err != nil {
		s.cfg.Logger.Warn("log events", "team", team, "type", eventlog.EvTaskAdded, "stored", n, "of", len(evs), "err", err)
	}
	return n
}

// lineHeap is a min-heap of task indexes: the ready task that came first
// in the file is written first.
type lineHeap []int

func (h lineHeap) Len() int           { return len(h) }
func (h lineHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h lineHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *lineHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *lineHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// importLine is one line of an import file.
type importLine struct {
	ID          string   `json:"id"`
	Desc        *string  `json:"desc"`
	Description *string  `json:"description"`
	Deps        []string `json:"deps"`
	Priority    int      `json:"priority"`
	Quantum     string   `json:"quantum"`
	Role        string   `json:"role"`
}

// MaxImportLine is the longest line of an import file: a task's
// description at its limit, escaped, and room for the rest.
const MaxImportLine = 2*teambus.MaxDescription + 64<<10

// ParseImport reads an import file: JSON Lines, one task per line, with
// the fields id, desc (or description), deps, priority and quantum (or
// role, the same thing under the name a planner may use). Blank lines are
// skipped. A line that is not one JSON object of these fields is an
// ErrInvalid naming the line; nothing is returned then.
func ParseImport(r io.Reader) ([]ImportTask, error) {
	var out []ImportTask
	err := jsonLines(r, MaxImportLine, "task", "id, desc, deps, priority, quantum", func(n int, _ []byte, l *importLine) error {
		if l.ID == "" {
			return teambus.Invalidf("line %d: no id", n)
		}
		if l.Desc != nil && l.Description != nil {
			return teambus.Invalidf("line %d: desc and description both given: one of them", n)
		}
		if l.Quantum != "" && l.Role != "" && l.Quantum != l.Role {
			return teambus.Invalidf("line %d: quantum %q and role %q differ: one of them", n, l.Quantum, l.Role)
		}
		spec := TaskSpec{ID: l.ID, Deps: l.Deps, Priority: l.Priority, Quantum: l.Quantum}
		if l.Desc != nil {
			spec.Description = *l.Desc
		} else if l.Description != nil {
			spec.Description = *l.Description
		}
		if spec.Quantum == "" {
			spec.Quantum = l.Role
		}
		if spec.Deps == nil {
			spec.Deps = []string{}
		}
		out = append(out, ImportTask{Line: n, TaskSpec: spec})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, teambus.Invalidf("no tasks in the import: one JSON object per line, e.g. {\"id\":\"schema\",\"desc\":\"Design the schema\",\"deps\":[]}")
	}
	return out, nil
}

// indexDependents records the dependents of each dependency of tasks
// (kv.Store.AddDependents) before the tasks are written.
func (s *Service) indexDependents(ctx context.Context, team string, tasks []*teambus.Task) error {
	by := map[string][]string{}
	var order []string
	for _, t := range tasks {
		for _, d := range t.Dependencies {
			if _, ok := by[d]; !ok {
				order = append(order, d)
			}
			by[d] = append(by[d], t.ID)
		}
	}
	for _, d := range order {
		if err := s.store.AddDependents(ctx, team, d, by[d]...); err != nil {
			return err
		}
	}
	return nil
}
