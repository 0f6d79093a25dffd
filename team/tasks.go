package team

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/teamapi"
)

// TaskSpec describes a new task.
type TaskSpec struct {
	ID          string
	Description string
	Deps        []string
	Priority    int
	Quantum     string
}

// AddTask adds a task to the team. It is pending until its dependencies
// are complete.
func (s *Service) AddTask(ctx context.Context, team string, spec TaskSpec) (*teambus.Task, error) {
	var out *teambus.Task
	err := kv.Retry(ctx, func() error {
		snap, err := s.store.Snapshot(ctx, team)
		if err != nil {
			return err
		}
		if snap.Team.Closed() {
			return teambus.Statef("team %s is %s: no new tasks", team, snap.Team.Status)
		}
		// A damaged record of the task or of a dependency is named as such,
		// not as an existing id or an unknown dependency.
		for _, id := range append([]string{spec.ID}, spec.Deps...) {
			if _, err := snap.Task(id); errors.Is(err, kv.ErrDamaged) {
				return err
			}
		}
		t, err := teambus.NewTask(spec.ID, spec.Description, spec.Deps, spec.Priority, spec.Quantum, snap.Tasks, s.Now())
		if err != nil {
			return err
		}
		// The dependents index first (kv.AddDependents): it must name the
		// task before the task can wait on anything.
		for _, d := range t.Dependencies {
			if err := s.store.AddDependents(ctx, team, d, t.ID); err != nil {
				return err
			}
		}
		if _, err := s.store.PutTask(ctx, team, t, 0); err != nil {
			if errors.Is(err, kv.ErrConflict) {
				return teambus.Statef("task %s already exists: use a new id", spec.ID)
			}
			return err
		}
		out = t
		s.boardDown(ctx, team, snap.Tasks, t)
		return nil
	})
	if err == nil {
		s.LogEvent(ctx, team, eventlog.EvTaskAdded, "", map[string]any{"taskId": out.ID, "summary": clipText(out.Description, 200),
			"dependencies": out.Dependencies, "priority": out.Priority, "status": out.Status})
	}
	return out, err
}

// mutateTask runs a transition on one task as actor, with fencing and
// compare-and-set, retrying on a stale revision. fn returns whether it
// changed the task; an unchanged task is not written (a repeated command
// is harmless).
func (s *Service) mutateTask(ctx context.Context, a Actor, id string, fn func(snap *kv.Snapshot, t *teambus.Task, epoch int64) (bool, error)) (*teambus.Task, bool, error) {
	return s.mutate(ctx, a, id, false, fn)
}

// mutateOwn is mutateTask for a transition that needs only the team
// record, the actor's member record and the task (a completion, a
// failure, a checkpoint): it reads those three records in one isolated
// read (kv.Store.Records), not the whole team, and the fenced write is one
// message expecting nothing in the team's state to have moved since.
func (s *Service) mutateOwn(ctx context.Context, a Actor, id string, fn func(snap *kv.Snapshot, t *teambus.Task, epoch int64) (bool, error)) (*teambus.Task, bool, error) {
	return s.mutate(ctx, a, id, true, fn)
}

// mutate is mutateTask; narrow reads only the records mutateOwn names.
func (s *Service) mutate(ctx context.Context, a Actor, id string, narrow bool, fn func(snap *kv.Snapshot, t *teambus.Task, epoch int64) (bool, error)) (*teambus.Task, bool, error) {
	if err := a.Validate(); err != nil {
		return nil, false, err
	}
	if err := teambus.ValidateID("task", id); err != nil {
		return nil, false, err
	}
	var (
		out     *teambus.Task
		changed bool
	)
	var members []string
	if !a.IsLead() {
		members = []string{a.Member}
	}
	err := kv.Retry(ctx, func() error {
		var (
			snap *kv.Snapshot
			err  error
		)
		if narrow {
			snap, err = s.store.Records(ctx, a.Team, members, []string{id})
		} else {
			snap, err = s.store.Snapshot(ctx, a.Team)
		}
		if err != nil {
			return err
		}
		epoch, err := authorize(snap, a)
		if err != nil {
			return err
		}
		t, err := snap.Task(id)
		if err != nil {
			return err
		}
		wasAvailable := t.Status == teambus.TaskAvailable
		changed, err = fn(snap, t, epoch)
		if err != nil {
			return err
		}
		if changed {
			if narrow && !a.IsLead() {
				// Only the member and the task matter: a write that fails
				// because another record of the team moved is tried
				// again at once (fencedPut).
				rev, err := s.fencedPut(ctx, snap, a, t, epoch)
				if err != nil {
					return err
				}
				snap.TaskRev[id] = rev
			} else if err := s.putTask(ctx, snap, a, t); err != nil {
				return err
			}
			if wasAvailable && t.Status != teambus.TaskAvailable {
				// Off the claim board (kv/board.go), best effort.
				if err := s.store.BoardRemove(ctx, a.Team, id, snap.TaskRev[id]); err != nil {
					s.cfg.Logger.Debug("claim board entry not removed", "team", a.Team, "task", id, "err", err)
				}
			}
		}
		out = t
		return nil
	})
	if err == nil {
		s.touch(ctx, a)
	}
	return out, changed, err
}

// putTask writes task t, read in snap, as actor a. A member's write is
// fenced: it lands only if the member record is still the one snap's
// authorize checked (kv.PutTaskFenced), in the same atomic step. The
// lead's write is a plain compare-and-set on the task.
// snap.TaskRev then holds the revision written.
func (s *Service) putTask(ctx context.Context, snap *kv.Snapshot, a Actor, t *teambus.Task) error {
	var (
		rev uint64
		err error
	)
	if a.IsLead() {
		rev, err = s.store.PutTask(ctx, a.Team, t, snap.TaskRev[t.ID])
	} else {
		rev, err = s.store.PutTaskFenced(ctx, snap, t, snap.TaskRev[t.ID], a.Member)
	}
	if err == nil {
		snap.TaskRev[t.ID] = rev
	}
	return err
}

// Claim gives task id to the actor. Of concurrent claimers exactly one
// wins; the others get ErrConflict (exit 3). Claiming the task the actor
// already holds changes nothing and succeeds. A member holds at most one
// task: the claim first takes the member's claim slot (see takeSlot), then
// writes the task, each with compare-and-set.
func (s *Service) Claim(ctx context.Context, a Actor, id string) (*teambus.Task, error) {
	out, changed, err := s.mutateTask(ctx, a, id, func(snap *kv.Snapshot, t *teambus.Task, epoch int64) (bool, error) {
		changed, err := s.claimStep(snap, a, t, epoch)
		if err != nil || !changed {
			return changed, err
		}
		// The slot first, then the task (mutateTask writes it).
		return true, s.takeSlot(ctx, snap, a.Member, id)
	})
	if err != nil {
		return nil, err
	}
	if changed {
		s.LogEvent(ctx, a.Team, eventlog.EvTaskClaimed, a.Member, map[string]any{"taskId": out.ID, "agent": a.Member, "attempts": out.Attempts, "epoch": out.Epoch})
	}
	return out, nil
}

// takeSlot writes the member's claim slot (Member.ClaimTask) for task id,
// with compare-and-set on the member record as read in snap. It is what
// makes "one task per member" an invariant rather than a check: two claims
// of one member both pass the snapshot check only if they read the same
// member revision, and then only one of their slot writes succeeds; the
// other retries and sees the slot. A slot naming another task that is
// still claimable may belong to a claim in flight (its task write not yet
// stored) or to one that died between its two writes: the task is
// rewritten unchanged at the revision read, so the in-flight task write,
// conditioned on the same revision, fails. A conflict anywhere retries the
// whole claim.
func (s *Service) takeSlot(ctx context.Context, snap *kv.Snapshot, member, id string) error {
	m, err := snap.Member(member)
	if err != nil {
		return err
	}
	if prev := m.ClaimTask; prev != "" && prev != id {
		if pt, ok := snap.Tasks[prev]; ok && teambus.Claimable(pt, snap.Tasks) {
			fence := *pt
			rev, err := s.store.PutTask(ctx, snap.Team.ID, &fence, snap.TaskRev[prev])
			if err != nil {
				return err
			}
			snap.TaskRev[prev] = rev
			if snap.Seq > 0 {
				snap.Seq = rev
			}
		}
	}
	// The slot is written even when it already names id: the write orders
	// this claim after every other claim of the member.
	upd := *m
	upd.ClaimTask = id
	rev, err := s.store.PutMember(ctx, snap.Team.ID, &upd, snap.MemberRev[member])
	if err != nil {
		return err
	}
	snap.MemberRev[member] = rev
	snap.Members[member] = &upd
	if snap.Seq > 0 {
		// The slot write is now the bucket's last: the fenced task write
		// (kv.PutTaskFenced) expects it, and fails if anything else moved.
		snap.Seq = rev
	}
	return nil
}

// claimStep is the transition of a claim on t, read in snap: the actor
// takes the task unless it is the lead or already works on another. It
// reports false, nil when the actor already holds t.
func (s *Service) claimStep(snap *kv.Snapshot, a Actor, t *teambus.Task, epoch int64) (bool, error) {
	if a.IsLead() {
		return false, teambus.Invalidf("the lead assigns work (it reassigns task %s); teammates claim it", t.ID)
	}
	if busy := snap.MemberTasks(a.Member); len(busy) > 0 && busy[0].ID != t.ID {
		return false, teambus.Statef("%s already works on task %s: complete, release or block it first", a.Member, busy[0].ID)
	}
	if t.Active() && t.AssignedTo == a.Member {
		return false, nil
	}
	return true, teambus.Claim(t, a.Member, epoch, snap.Tasks, s.Now())
}

// Next claims the best task for the actor: the one that unblocks the most
// downstream work, then priority, then creation order. It returns
// ErrUnavailable when nothing is claimable yet and ErrState when no work is
// left.
//
// It reads the claim board (kv.Store.Board), not the team: the team and
// member records and the board in one read, then the best candidates and
// the task of the member's claim slot in another, and claims one with
// compare-and-set (nextFromBoard). Only a board without a candidate, or a
// team without a board, is read whole, as before the board (nextFull),
// and the board rebuilt from that read.
func (s *Service) Next(ctx context.Context, a Actor) (*teambus.Task, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	if !a.IsLead() {
		for round := 0; round < boardRounds; round++ {
			t, err := s.nextFromBoard(ctx, a)
			if errors.Is(err, errBoardAgain) {
				continue
			}
			if errors.Is(err, errBoardDry) {
				break
			}
			return t, err
		}
	}
	return s.nextFull(ctx, a)
}

// nextFull is Next from a full read of the team, which it also uses to
// rebuild the claim board.
func (s *Service) nextFull(ctx context.Context, a Actor) (*teambus.Task, error) {
	s.fullReads.Add(1)
	for attempt := 0; attempt < kv.MaxRetries; attempt++ {
		snap, err := s.store.Snapshot(ctx, a.Team)
		if err != nil {
			return nil, err
		}
		epoch, err := mayClaim(snap, a)
		if err != nil {
			return nil, err
		}
		if attempt == 0 {
			// The board had no candidate, or there is none yet: make it
			// agree with this read (kv.Store.RebuildBoard).
			s.rebuildBoard(ctx, snap)
		}
		quantum := ""
		if m, ok := snap.Members[a.Member]; ok {
			quantum = m.Quantum
		}
		order := teambus.Pick(snap.Tasks, quantum)
		if len(order) == 0 {
			counts := teambus.CountByStatus(snap.Tasks)
			open := counts[teambus.TaskPending] + counts[teambus.TaskInProgress] + counts[teambus.TaskBlocked]
			if open == 0 {
				return nil, teambus.Statef("no task left to claim in team %s (%d complete, %d paused, %d failed)", a.Team, counts[teambus.TaskComplete], counts[teambus.TaskPaused], counts[teambus.TaskFailed])
			}
			return nil, teamapi.NoTaskf("no task available yet in team %s: %d in progress, %d blocked, %d waiting on dependencies; try again later", a.Team, counts[teambus.TaskInProgress], counts[teambus.TaskBlocked], counts[teambus.TaskPending])
		}
		// Every candidate is tried against this one read: a claim is a
		// compare-and-set on the task's revision, so a task another member
		// took meanwhile fails its write and the next one is tried. Only
		// when all fail is the team read again. (Claiming each candidate
		// through Claim read the whole team once per candidate; with eight
		// members racing for the same best task that was most of the
		// cost.)
		for _, cand := range order {
			t, ok, err := s.claimCandidate(snap, a, cand, epoch)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			if err := s.takeSlot(ctx, snap, a.Member, cand.ID); err != nil {
				if errors.Is(err, kv.ErrConflict) {
					break // the member record or a fenced task moved: read again
				}
				return nil, err
			}
			if err := s.putTask(ctx, snap, a, t); err != nil {
				if errors.Is(err, kv.ErrConflict) {
					// The task was taken (try the next one), or the
					// member record changed: then every candidate fails
					// and the team is read and the caller checked again.
					continue
				}
				return nil, err
			}
			if err := s.store.BoardRemove(ctx, a.Team, t.ID, snap.TaskRev[t.ID]); err != nil {
				s.cfg.Logger.Debug("claim board entry not removed", "team", a.Team, "task", t.ID, "err", err)
			}
			s.touch(ctx, a)
			s.LogEvent(ctx, a.Team, eventlog.EvTaskClaimed, a.Member, map[string]any{"taskId": t.ID, "agent": a.Member, "attempts": t.Attempts, "epoch": t.Epoch})
			return t, nil
		}
	}
	return nil, teambus.Conflictf("task next: lost every race for a task; try again")
}

// mayClaim checks that the actor may claim a task in snap: its
// incarnation (the epoch it claims at), and no task in its hands.
func mayClaim(snap *kv.Snapshot, a Actor) (int64, error) {
	epoch, err := authorize(snap, a)
	if err != nil {
		return 0, err
	}
	if busy := snap.MemberTasks(a.Member); len(busy) > 0 {
		return 0, teambus.Statef("%s already works on task %s: complete, release or block it first", a.Member, busy[0].ID)
	}
	return epoch, nil
}

// claimCandidate applies the claim to a copy of cand, the record as snap
// read it: ok is false when cand can not be claimed (taken meanwhile, not
// available, a lost race) and the next candidate is tried; err is what
// ends the search (fenced, or a failure).
func (s *Service) claimCandidate(snap *kv.Snapshot, a Actor, cand *teambus.Task, epoch int64) (*teambus.Task, bool, error) {
	c := *cand // the snapshot keeps the record as read
	t := &c
	if changed, err := s.claimStep(snap, a, t, epoch); err != nil || !changed {
		if err != nil && (errors.Is(err, teambus.ErrFenced) || (!errors.Is(err, teambus.ErrConflict) && !errors.Is(err, teambus.ErrState))) {
			return nil, false, err
		}
		return nil, false, nil
	}
	return t, true, nil
}

// Complete finishes the actor's task and makes the tasks that waited on it
// available. Completing twice is harmless.
func (s *Service) Complete(ctx context.Context, a Actor, id, commit string) (*teambus.Task, bool, error) {
	if len(commit) > 64 || strings.ContainsAny(commit, " \t\n") {
		return nil, false, teambus.Invalidf("invalid commit %q: a git sha", commit)
	}
	t, changed, err := s.mutateOwn(ctx, a, id, func(snap *kv.Snapshot, t *teambus.Task, _ int64) (bool, error) {
		return teambus.Complete(t, a.Member, commit, s.Now())
	})
	if err != nil {
		return nil, false, err
	}
	if changed {
		s.LogEvent(ctx, a.Team, eventlog.EvTaskCompleted, a.Member, map[string]any{"taskId": t.ID, "agent": a.Member, "commit": commit})
	}
	_, err = s.promoteAfter(ctx, a.Team, id)
	return t, changed, err
}

// promoteAfter makes the tasks waiting on task done available, and returns
// their ids: PromoteReady for the tasks the dependents index names
// (kv.Store.Dependents), reading those tasks and their dependencies, not
// the team. A team without a complete index is promoted by PromoteReady.
func (s *Service) promoteAfter(ctx context.Context, team, done string) ([]string, error) {
	ids, indexed, err := s.store.Dependents(ctx, team, done)
	if err != nil {
		return nil, err
	}
	if !indexed || len(ids) > 256 {
		return s.PromoteReady(ctx, team)
	}
	var out []string
	for _, id := range ids {
		promoted, err := s.promoteOne(ctx, team, id)
		if err != nil {
			return out, err
		}
		if promoted {
			out = append(out, id)
			s.LogEvent(ctx, team, eventlog.EvTaskUnblocked, "", map[string]any{"taskId": id, "status": teambus.TaskAvailable})
		}
	}
	return out, nil
}

// promoteOne makes task id available if it is pending with every
// dependency done, with compare-and-set. An absent task (its creation
// failed after the index named it) is not an error.
func (s *Service) promoteOne(ctx context.Context, team, id string) (bool, error) {
	var promoted bool
	err := kv.Retry(ctx, func() error {
		promoted = false
		snap, err := s.store.Records(ctx, team, nil, []string{id})
		if err != nil {
			return err
		}
		t, ok := snap.Tasks[id]
		if !ok || t.Status != teambus.TaskPending {
			return nil
		}
		deps, err := s.store.Records(ctx, team, nil, t.Dependencies)
		if err != nil {
			return err
		}
		if !teambus.Promote(t, deps.Tasks, s.Now()) {
			return nil
		}
		if _, err := s.store.PutTask(ctx, team, t, snap.TaskRev[id]); err != nil {
			return err
		}
		promoted = true
		return nil
	})
	return promoted, err
}

// PromoteReady makes every pending task whose dependencies are done
// available, and returns their ids. It is idempotent; the lead runs it
// every heartbeat so a promotion cut short by a crash is finished.
func (s *Service) PromoteReady(ctx context.Context, team string) ([]string, error) {
	var out []string
	err := kv.Retry(ctx, func() error {
		out = out[:0]
		last, err := s.store.TaskSeq(ctx, team)
		if err != nil {
			return err
		}
		snap, err := s.store.Snapshot(ctx, team)
		if err != nil {
			return err
		}
		ready := teambus.Unblocked(snap.Tasks)
		if len(ready) == 0 {
			// The whole team is read: keep the resume summary and the
			// claim board current (kv.TaskSummary, kv.Store.RebuildBoard).
			s.store.SaveSummary(ctx, snap, last)
			s.rebuildBoard(ctx, snap)
		}
		for _, id := range ready {
			t := snap.Tasks[id]
			if teambus.Promote(t, snap.Tasks, s.Now()) {
				if _, err := s.store.PutTask(ctx, team, t, snap.TaskRev[id]); err != nil {
					return err
				}
				out = append(out, id)
			}
		}
		return nil
	})
	if err == nil {
		for _, id := range out {
			s.LogEvent(ctx, team, eventlog.EvTaskUnblocked, "", map[string]any{"taskId": id, "status": teambus.TaskAvailable})
		}
	}
	return out, err
}

// Fail records a failed attempt of the actor's task: back to the queue with
// its checkpoint, or paused after max-attempts failures.
func (s *Service) Fail(ctx context.Context, a Actor, id, reason string) (*teambus.Task, error) {
	if len(reason) > 4096 {
		return nil, teambus.Invalidf("failure reason is %d bytes, at most 4096", len(reason))
	}
	t, _, err := s.mutateOwn(ctx, a, id, func(snap *kv.Snapshot, t *teambus.Task, _ int64) (bool, error) {
		return true, teambus.Fail(t, a.Member, reason, snap.Team.Policy.MaxAttempts, s.Now())
	})
	if err == nil {
		paused := t.Status == teambus.TaskPaused
		s.LogEvent(ctx, a.Team, eventlog.EvTaskFailed, a.Member, map[string]any{"taskId": t.ID, "agent": a.Member, "error": clipText(reason, 1000),
			"attempts": t.Attempts, "failures": t.Failures, "paused": paused})
		if paused {
			s.LogEvent(ctx, a.Team, eventlog.EvTaskPaused, "", map[string]any{"taskId": t.ID, "error": fmt.Sprintf("failed %d times (max-attempts)", t.Failures)})
		}
	}
	return t, err
}

// Block marks the actor's task blocked on another task or a reason.
func (s *Service) Block(ctx context.Context, a Actor, id, on, reason string) (*teambus.Task, error) {
	if len(reason) > 4096 {
		return nil, teambus.Invalidf("block reason is %d bytes, at most 4096", len(reason))
	}
	t, changed, err := s.mutateTask(ctx, a, id, func(snap *kv.Snapshot, t *teambus.Task, _ int64) (bool, error) {
		before := *t
		if err := teambus.Block(t, a.Member, on, reason, snap.Tasks, s.Now()); err != nil {
			return false, err
		}
		return before.Status != t.Status || before.BlockedOn != t.BlockedOn || before.BlockedReason != t.BlockedReason, nil
	})
	if err == nil && changed {
		s.LogEvent(ctx, a.Team, eventlog.EvTaskBlocked, a.Member, map[string]any{"taskId": t.ID, "agent": a.Member, "on": on, "reason": clipText(reason, 1000)})
	}
	return t, err
}

// Release gives the actor's task back to the queue with its checkpoint.
// The lead may release any active task.
func (s *Service) Release(ctx context.Context, a Actor, id string) (*teambus.Task, error) {
	t, _, err := s.mutateTask(ctx, a, id, func(snap *kv.Snapshot, t *teambus.Task, _ int64) (bool, error) {
		if a.IsLead() {
			return true, teambus.Requeue(t, snap.Tasks, s.Now())
		}
		return true, teambus.Release(t, a.Member, snap.Tasks, s.Now())
	})
	if err == nil {
		typ := eventlog.EvTaskReleased
		if a.IsLead() {
			typ = eventlog.EvTaskRequeued
		}
		s.LogEvent(ctx, a.Team, typ, a.Member, map[string]any{"taskId": t.ID, "agent": a.Member, "status": t.Status})
	}
	return t, err
}

// Reassign hands a task to member to. The lead may reassign any task; a
// member may hand over its own.
func (s *Service) Reassign(ctx context.Context, a Actor, id, to string) (*teambus.Task, error) {
	if err := teambus.ValidateMemberID(to); err != nil {
		return nil, err
	}
	var from string
	t, _, err := s.mutateTask(ctx, a, id, func(snap *kv.Snapshot, t *teambus.Task, _ int64) (bool, error) {
		from = t.AssignedTo
		target, err := snap.Member(to)
		if err != nil {
			return false, err
		}
		if !a.IsLead() && (t.AssignedTo != a.Member || !t.Active()) {
			return false, teambus.Fencedf("only the lead or the task's current holder may reassign task %s", id)
		}
		switch target.Status {
		case teambus.MemberCrashed, teambus.MemberPaused, teambus.MemberShutdown:
			return false, teambus.Statef("can not reassign task %s to %s: it is %s", id, to, target.Status)
		}
		if busy := snap.MemberTasks(to); len(busy) > 0 && busy[0].ID != id {
			return false, teambus.Statef("%s already works on task %s", to, busy[0].ID)
		}
		already := t.Active() && t.AssignedTo == to
		if err := teambus.Reassign(t, to, target.Epoch, s.Now()); err != nil || already {
			return true, err
		}
		// The target's claim slot names the task first, as a claim's
		// does: it is what a claim checks for a task held (nextFromBoard).
		return true, s.takeSlot(ctx, snap, to, id)
	})
	if err == nil {
		s.LogEvent(ctx, a.Team, eventlog.EvTaskReassigned, a.Member, map[string]any{"taskId": t.ID, "to": to, "from": from})
	}
	return t, err
}

// Reopen returns a finished task to the queue; only the lead may.
func (s *Service) Reopen(ctx context.Context, a Actor, id string) (*teambus.Task, error) {
	t, _, err := s.mutateTask(ctx, a, id, func(snap *kv.Snapshot, t *teambus.Task, _ int64) (bool, error) {
		if !a.IsLead() {
			return false, teambus.Invalidf("only the lead may reopen task %s", id)
		}
		return true, teambus.Reopen(t, snap.Tasks, s.Now())
	})
	if err == nil {
		s.LogEvent(ctx, a.Team, eventlog.EvTaskReopened, a.Member, map[string]any{"taskId": t.ID, "status": t.Status})
	}
	return t, err
}

// Checkpoint records the actor's progress with its task, so a fresh agent
// replacing it continues without redoing work. The request's Task names
// the task; empty means the member's current task.
func (s *Service) Checkpoint(ctx context.Context, spec teamapi.CheckpointRequest) (*teambus.Task, error) {
	a := spec.Actor
	if spec.Auto {
		// An automatic checkpoint (the sidecar's: the files git lists) is
		// clipped to the caps, never refused; its data says what was cut.
		c := teambus.Checkpoint{TasksCompleted: spec.Done, TasksRemaining: spec.Remaining, LastAction: spec.LastAction, Files: spec.Files, Data: spec.Data}
		if len(c.Clip()) > 0 {
			spec.Done, spec.Remaining, spec.LastAction, spec.Files, spec.Data = c.TasksCompleted, c.TasksRemaining, c.LastAction, c.Files, c.Data
		}
	}
	if err := teambus.ValidateCheckpoint(spec.Done, spec.Remaining, spec.LastAction, spec.Files, spec.Data); err != nil {
		return nil, err
	}
	id := spec.Task
	if id == "" {
		if err := a.Validate(); err != nil {
			return nil, err
		}
		snap, err := s.store.Snapshot(ctx, a.Team)
		if err != nil {
			return nil, err
		}
		if _, err := authorize(snap, a); err != nil {
			return nil, err
		}
		busy := snap.MemberTasks(a.Member)
		if len(busy) == 0 {
			return nil, teambus.Statef("%s holds no task: a checkpoint is kept with the member's task; claim one first", a.Member)
		}
		id = busy[0].ID
	}
	t, _, err := s.mutateOwn(ctx, a, id, func(snap *kv.Snapshot, t *teambus.Task, epoch int64) (bool, error) {
		if !t.Active() || t.AssignedTo != a.Member {
			return false, teambus.Conflictf("task %s is not held by %s (it is %s): checkpoint refused", id, a.Member, t.Status)
		}
		seq := int64(1)
		if t.Checkpoint != nil {
			seq = t.Checkpoint.Seq + 1
		}
		cp := &teambus.Checkpoint{
			Seq: seq, Member: a.Member, Epoch: epoch,
			TasksCompleted: nonNil(spec.Done), TasksRemaining: nonNil(spec.Remaining),
			LastAction: spec.LastAction, Files: nonNil(spec.Files), Data: spec.Data, Auto: spec.Auto, At: s.Now(),
		}
		if spec.Auto && t.Checkpoint != nil {
			// An automatic checkpoint keeps what the agent reported and adds
			// what the sidecar saw.
			prev := *t.Checkpoint
			prev.Seq, prev.Auto, prev.At, prev.Epoch = seq, true, s.Now(), epoch
			if len(spec.Files) > 0 {
				prev.Files = nonNil(spec.Files)
			}
			if spec.LastAction != "" && prev.LastAction == "" {
				prev.LastAction = spec.LastAction
			}
			// A checkpoint recorded before the caps is clipped, never refused:
			// an automatic checkpoint must not fail for an old one.
			prev.Clip()
			cp = &prev
		}
		t.Checkpoint = cp
		t.UpdatedAt = s.Now()
		return true, nil
	})
	if err == nil {
		s.LogEvent(ctx, a.Team, eventlog.EvTaskCheckpoint, a.Member, map[string]any{"taskId": t.ID, "agent": a.Member, "seq": t.Checkpoint.Seq,
			"auto": spec.Auto, "last_action": clipText(t.Checkpoint.LastAction, 500), "done": len(t.Checkpoint.TasksCompleted), "remaining": len(t.Checkpoint.TasksRemaining)})
	}
	return t, err
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
