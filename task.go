package teambus

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// TaskStatus is the status of a task.
type TaskStatus string

// Task statuses: pending waits on dependencies; available may be claimed.
const (
	TaskPending    TaskStatus = "pending"
	TaskAvailable  TaskStatus = "available"
	TaskInProgress TaskStatus = "in_progress"
	TaskBlocked    TaskStatus = "blocked"
	TaskComplete   TaskStatus = "complete"
	TaskFailed     TaskStatus = "failed"
	TaskPaused     TaskStatus = "paused"
	TaskSkipped    TaskStatus = "skipped"
)

// TaskStatuses lists every task status in lifecycle order.
var TaskStatuses = []TaskStatus{TaskPending, TaskAvailable, TaskInProgress, TaskBlocked, TaskComplete, TaskFailed, TaskPaused, TaskSkipped}

// MaxDescription is the longest task description accepted, in bytes.
const MaxDescription = 16 << 10

// Task is a unit of work. Its revision in KV is the fencing token of every
// change: two writers never both win.
type Task struct {
	ID            string      `json:"id"`
	Description   string      `json:"description"`
	Quantum       string      `json:"quantum,omitempty"`
	Priority      int         `json:"priority"`
	Dependencies  []string    `json:"dependencies"`
	Status        TaskStatus  `json:"status"`
	AssignedTo    string      `json:"assigned_to"`
	Epoch         int64       `json:"epoch,omitempty"`
	Attempts      int         `json:"attempts"`
	Failures      int         `json:"failures"`
	Crashes       int         `json:"crashes"`
	BlockedOn     string      `json:"blocked_on,omitempty"`
	BlockedReason string      `json:"blocked_reason,omitempty"`
	BlockedAt     *time.Time  `json:"blocked_at,omitempty"`
	LastError     string      `json:"last_error,omitempty"`
	Checkpoint    *Checkpoint `json:"checkpoint"`
	Commit        string      `json:"commit,omitempty"`
	CreatedAt     time.Time   `json:"created_at"`
	UpdatedAt     time.Time   `json:"updated_at"`
	StartedAt     *time.Time  `json:"started_at"`
	CompletedAt   *time.Time  `json:"completed_at"`
}

// Active reports whether the task is held by a member.
func (t *Task) Active() bool {
	return t.Status == TaskInProgress || t.Status == TaskBlocked
}

// Done reports whether the task is finished for dependency purposes.
func (t *Task) Done() bool {
	return t.Status == TaskComplete || t.Status == TaskSkipped
}

// Finished reports whether the task will not run again: done, or failed
// for good. A team completes only when every task is finished.
func (t *Task) Finished() bool {
	return t.Done() || t.Status == TaskFailed
}

// NewTask validates and builds a new task. Its status is pending when it
// has dependencies that are not done, else available. tasks are the team's
// existing tasks by id: every dependency must exist.
func NewTask(id, desc string, deps []string, priority int, quantum string, tasks map[string]*Task, now time.Time) (*Task, error) {
	if err := ValidateID("task", id); err != nil {
		return nil, err
	}
	if _, ok := tasks[id]; ok {
		return nil, Statef("task %s already exists: use a new id", id)
	}
	if len(desc) > MaxDescription {
		return nil, Invalidf("task description is %d bytes, at most %d", len(desc), MaxDescription)
	}
	seen := map[string]bool{}
	var clean []string
	for _, d := range deps {
		if err := ValidateID("dependency", d); err != nil {
			return nil, err
		}
		if d == id {
			return nil, Invalidf("task %s can not depend on itself", id)
		}
		if _, ok := tasks[d]; !ok {
			return nil, NotFoundf("dependency %s of task %s does not exist: add it first (teambus task add %s)", d, id, d)
		}
		if !seen[d] {
			seen[d] = true
			clean = append(clean, d)
		}
	}
	if quantum != "" {
		if err := ValidateID("quantum", quantum); err != nil {
			return nil, err
		}
	}
	t := &Task{
		ID: id, Description: desc, Quantum: quantum, Priority: priority,
		Dependencies: clean, Status: TaskAvailable, CreatedAt: now.UTC(), UpdatedAt: now.UTC(),
	}
	if t.Dependencies == nil {
		t.Dependencies = []string{}
	}
	if !DepsDone(t, tasks) {
		t.Status = TaskPending
	}
	return t, nil
}

// DepsDone reports whether every dependency of t is complete or skipped.
func DepsDone(t *Task, tasks map[string]*Task) bool {
	for _, d := range t.Dependencies {
		dt, ok := tasks[d]
		if !ok || !dt.Done() {
			return false
		}
	}
	return true
}

// WaitingOn lists the dependencies of t that are not done.
func WaitingOn(t *Task, tasks map[string]*Task) []string {
	var out []string
	for _, d := range t.Dependencies {
		if dt, ok := tasks[d]; !ok || !dt.Done() {
			out = append(out, d)
		}
	}
	return out
}

// Claimable reports whether t can be claimed now.
func Claimable(t *Task, tasks map[string]*Task) bool {
	return t.Status == TaskAvailable || (t.Status == TaskPending && DepsDone(t, tasks))
}

// Claim gives t to member (incarnation epoch). The task must be available,
// or pending with all dependencies done.
func Claim(t *Task, member string, epoch int64, tasks map[string]*Task, now time.Time) error {
	switch {
	case t.Active() && t.AssignedTo == member:
		return Statef("task %s is already yours (%s)", t.ID, t.Status)
	case t.Active():
		return Conflictf("task %s is already claimed by %s", t.ID, t.AssignedTo)
	case t.Status == TaskPending && !DepsDone(t, tasks):
		return Statef("task %s is pending: waiting on %s", t.ID, strings.Join(WaitingOn(t, tasks), ", "))
	case !Claimable(t, tasks):
		return Statef("task %s is %s: only available tasks can be claimed", t.ID, t.Status)
	}
	t.start(member, epoch, now)
	return nil
}

// Complete finishes t. Completing a task twice by its member is harmless:
// changed is false and nothing is written.
func Complete(t *Task, member, commit string, now time.Time) (changed bool, err error) {
	if t.Status == TaskComplete && t.AssignedTo == member {
		return false, nil
	}
	if err := t.heldBy(member, "complete"); err != nil {
		return false, err
	}
	t.Status = TaskComplete
	t.Commit = commit
	t.CompletedAt = TimePtr(now)
	t.clearBlock()
	t.UpdatedAt = now.UTC()
	return true, nil
}

// Fail records a failed attempt. The task returns to the queue with its
// checkpoint, or is paused once failures reach maxAttempts.
func Fail(t *Task, member, reason string, maxAttempts int, now time.Time) error {
	if err := t.heldBy(member, "fail"); err != nil {
		return err
	}
	t.Failures++
	t.LastError = reason
	t.AssignedTo = ""
	t.clearBlock()
	if t.Failures >= maxAttempts {
		t.Status = TaskPaused
	} else {
		t.Status = TaskAvailable
	}
	t.UpdatedAt = now.UTC()
	return nil
}

// Block marks t blocked on another task or a reason.
func Block(t *Task, member, on, reason string, tasks map[string]*Task, now time.Time) error {
	if on == "" && reason == "" {
		return Invalidf("block task %s: say what it waits on with --on TASK or --reason TEXT", t.ID)
	}
	if on != "" {
		if err := ValidateID("task", on); err != nil {
			return err
		}
		if _, ok := tasks[on]; !ok {
			return NotFoundf("task %s does not exist (blocking %s on it)", on, t.ID)
		}
		if on == t.ID {
			return Invalidf("task %s can not block on itself", t.ID)
		}
	}
	if t.Status == TaskBlocked && t.AssignedTo == member && t.BlockedOn == on && t.BlockedReason == reason {
		return nil
	}
	if err := t.heldBy(member, "block"); err != nil {
		return err
	}
	t.Status = TaskBlocked
	t.BlockedOn, t.BlockedReason, t.BlockedAt = on, reason, TimePtr(now)
	t.UpdatedAt = now.UTC()
	return nil
}

// Release gives t back to the queue, keeping its checkpoint.
func Release(t *Task, member string, tasks map[string]*Task, now time.Time) error {
	if err := t.heldBy(member, "release"); err != nil {
		return err
	}
	t.requeue(tasks, now)
	return nil
}

// Requeue returns an active task to the queue after a crash, a zombie
// timeout or a blocked timeout, keeping its checkpoint.
func Requeue(t *Task, tasks map[string]*Task, now time.Time) error {
	if !t.Active() {
		return Statef("task %s is %s: only in_progress or blocked tasks can be requeued", t.ID, t.Status)
	}
	t.requeue(tasks, now)
	return nil
}

// Pause stops t until the lead decides (crash limit or attempts reached).
func Pause(t *Task, reason string, now time.Time) {
	t.Status = TaskPaused
	t.AssignedTo = ""
	t.LastError = reason
	t.clearBlock()
	t.UpdatedAt = now.UTC()
}

// Reassign hands t to member directly, keeping its checkpoint. It works
// for any task that is not done.
func Reassign(t *Task, member string, epoch int64, now time.Time) error {
	if t.Done() {
		return Statef("task %s is %s: reopen it first", t.ID, t.Status)
	}
	if t.Active() && t.AssignedTo == member {
		return nil
	}
	t.start(member, epoch, now)
	return nil
}

// Reopen returns a finished, failed or paused task to the queue. It is
// refused when a task that depends on it is already complete.
func Reopen(t *Task, tasks map[string]*Task, now time.Time) error {
	switch t.Status {
	case TaskComplete, TaskFailed, TaskPaused, TaskSkipped:
	default:
		return Statef("task %s is %s: only complete, failed, paused or skipped tasks can be reopened", t.ID, t.Status)
	}
	for _, d := range Dependents(t.ID, tasks) {
		if tasks[d].Status == TaskComplete {
			return Statef("task %s can not be reopened: task %s depends on it and is already complete", t.ID, d)
		}
	}
	t.requeue(tasks, now)
	t.Failures = 0
	t.CompletedAt = nil
	return nil
}

// Dependents lists the ids of the tasks that depend on id directly, sorted.
func Dependents(id string, tasks map[string]*Task) []string {
	var out []string
	for _, t := range tasks {
		for _, d := range t.Dependencies {
			if d == id {
				out = append(out, t.ID)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// Unblocked lists the pending tasks whose dependencies are all done: the
// tasks to promote to available, sorted by id.
func Unblocked(tasks map[string]*Task) []string {
	var out []string
	for _, t := range tasks {
		if t.Status == TaskPending && DepsDone(t, tasks) {
			out = append(out, t.ID)
		}
	}
	sort.Strings(out)
	return out
}

// Promote makes a pending task with all dependencies done available.
func Promote(t *Task, tasks map[string]*Task, now time.Time) bool {
	if t.Status != TaskPending || !DepsDone(t, tasks) {
		return false
	}
	t.Status = TaskAvailable
	t.UpdatedAt = now.UTC()
	return true
}

// Pick orders the claimable tasks for task next: the task that unblocks the
// most downstream work first, then higher priority, then creation order,
// then id. quantum, when set, prefers tasks of that quantum.
func Pick(tasks map[string]*Task, quantum string) []*Task {
	down := Downstream(tasks)
	var out []*Task
	for _, t := range tasks {
		if Claimable(t, tasks) {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return RankOf(out[i], down[out[i].ID]).Before(RankOf(out[j], down[out[j].ID]), quantum)
	})
	return out
}

// Rank is what Pick orders a claimable task by: a claim board (kv) keeps
// it for each claimable task, so a claim orders candidates without
// reading the team.
type Rank struct {
	ID        string
	Quantum   string
	Down      int // tasks not done downstream (Downstream)
	Priority  int
	CreatedAt time.Time
}

// RankOf returns the rank of t with down tasks downstream of it.
func RankOf(t *Task, down int) Rank {
	return Rank{ID: t.ID, Quantum: t.Quantum, Down: down, Priority: t.Priority, CreatedAt: t.CreatedAt}
}

// Before reports whether a comes before b in Pick's order for a member of
// quantum.
func (a Rank) Before(b Rank, quantum string) bool {
	if !a.Tied(b, quantum) {
		if quantum != "" && (a.Quantum == quantum) != (b.Quantum == quantum) {
			return a.Quantum == quantum
		}
		if a.Down != b.Down {
			return a.Down > b.Down
		}
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		return a.CreatedAt.Before(b.CreatedAt)
	}
	return a.ID < b.ID
}

// Tied reports whether a and b are equal in everything Pick orders by but
// the id: which of them comes first is only the id's alphabet.
func (a Rank) Tied(b Rank, quantum string) bool {
	return (quantum == "" || (a.Quantum == quantum) == (b.Quantum == quantum)) &&
		a.Down == b.Down && a.Priority == b.Priority && a.CreatedAt.Equal(b.CreatedAt)
}

// Downstream counts, for every task, the tasks not yet done that depend on
// it directly or transitively.
func Downstream(tasks map[string]*Task) map[string]int {
	ids := make([]string, 0, len(tasks))
	for id := range tasks {
		ids = append(ids, id)
	}
	return DownstreamOf(tasks, ids)
}

// DownstreamOf is Downstream for the tasks ids only: the work below each
// of them, walked from them alone (a claim board needs it for the
// available tasks, not for every task of a long chain).
func DownstreamOf(tasks map[string]*Task, ids []string) map[string]int {
	children := map[string][]string{}
	for _, t := range tasks {
		for _, d := range t.Dependencies {
			children[d] = append(children[d], t.ID)
		}
	}
	out := make(map[string]int, len(ids))
	for _, id := range ids {
		seen := map[string]bool{}
		stack := append([]string(nil), children[id]...)
		n := 0
		for len(stack) > 0 {
			c := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[c] {
				continue
			}
			seen[c] = true
			if ct, ok := tasks[c]; ok && !ct.Done() {
				n++
			}
			stack = append(stack, children[c]...)
		}
		out[id] = n
	}
	return out
}

// CountByStatus counts tasks by status; every status is present.
func CountByStatus(tasks map[string]*Task) map[TaskStatus]int {
	out := map[TaskStatus]int{}
	for _, s := range TaskStatuses {
		out[s] = 0
	}
	for _, t := range tasks {
		out[t.Status]++
	}
	return out
}

// Progress is the share of tasks done, 0 to 100.
func Progress(tasks map[string]*Task) int {
	if len(tasks) == 0 {
		return 0
	}
	done := 0
	for _, t := range tasks {
		if t.Done() {
			done++
		}
	}
	return done * 100 / len(tasks)
}

func (t *Task) heldBy(member, verb string) error {
	if !t.Active() {
		return Statef("can not %s task %s: it is %s, not in progress", verb, t.ID, t.Status)
	}
	if t.AssignedTo != member {
		return Conflictf("can not %s task %s: it is assigned to %s, not %s", verb, t.ID, t.AssignedTo, member)
	}
	return nil
}

func (t *Task) requeue(tasks map[string]*Task, now time.Time) {
	t.AssignedTo = ""
	t.clearBlock()
	t.Status = TaskAvailable
	if !DepsDone(t, tasks) {
		t.Status = TaskPending
	}
	t.UpdatedAt = now.UTC()
}

// start puts t in progress with member (incarnation epoch): one more
// attempt.
func (t *Task) start(member string, epoch int64, now time.Time) {
	t.Status = TaskInProgress
	t.AssignedTo = member
	t.Epoch = epoch
	t.Attempts++
	t.StartedAt = TimePtr(now)
	t.clearBlock()
	t.UpdatedAt = now.UTC()
}

func (t *Task) clearBlock() {
	t.BlockedOn, t.BlockedReason, t.BlockedAt = "", "", nil
}

// String is a one-line summary of the task.
func (t *Task) String() string {
	s := fmt.Sprintf("%s %s", t.ID, t.Status)
	if t.AssignedTo != "" {
		s += " @" + t.AssignedTo
	}
	return s
}
