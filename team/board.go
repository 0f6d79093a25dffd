package team

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/kv"
)

// boardRounds bounds the board reads of one Next before it reads the team.
const boardRounds = 16

// boardCandidates is how many of the board's best entries one claim reads.
const boardCandidates = 16

// staleBatch is how many entries of tasks no longer claimable a claim
// leaves on the board before it takes them off in one write per shard.
const staleBatch = 8

var (
	// errBoardDry: the board has no candidate (or the team no board);
	// Next reads the team.
	errBoardDry = errors.New("no candidate on the claim board")
	// errBoardAgain: every candidate read was lost or stale; Next reads
	// the board again.
	errBoardAgain = errors.New("every candidate of the claim board was taken")
	// errTaskTaken: the candidate's record moved since it was read.
	errTaskTaken = fmt.Errorf("task taken meanwhile: %w", kv.ErrConflict)
)

// nextFromBoard is Next from the claim board (kv/board.go, laid out by
// BoardLayout). It reads the
// team record, the actor's member record and the board in one isolated
// read; orders the board's entries as teambus.Pick orders tasks; reads the
// best boardCandidates of them with the task of the member's claim slot
// (kv.Store.Records, one isolated read); and claims the first it can as a
// claim of Claim does: the member's slot, then the task, each with
// compare-and-set (takeSlot, fencedPut). The won entry is taken off the
// board with the entries whose tasks were found not claimable, staleBatch
// at a time.
//
// A member's active task is the one its slot names: every claim and every
// reassignment to the member writes the slot first (takeSlot), so the
// slot's task, read here, is the busy check the full read made.
func (s *Service) nextFromBoard(ctx context.Context, a Actor) (*teambus.Task, error) {
	b, err := s.store.Board(ctx, a.Team, a.Member, boardCandidates)
	if err != nil {
		return nil, err
	}
	if !b.Built {
		return nil, errBoardDry
	}
	if _, err := authorize(b.Snapshot, a); err != nil {
		return nil, err
	}
	m := b.Members[a.Member]
	order := boardOrder(b.Entries, m.Quantum, a.Member)
	if len(order) == 0 {
		return nil, errBoardDry
	}
	if len(order) > boardCandidates {
		order = order[:boardCandidates]
	}
	ids := make([]string, 0, len(order)+1)
	for _, e := range order {
		ids = append(ids, e.ID)
	}
	if m.ClaimTask != "" && !slices.Contains(ids, m.ClaimTask) {
		ids = append(ids, m.ClaimTask)
	}
	snap, err := s.store.Records(ctx, a.Team, []string{a.Member}, ids)
	if err != nil {
		return nil, err
	}
	epoch, err := mayClaim(snap, a)
	if err != nil {
		return nil, err
	}
	stale := map[string]uint64{}
	for _, e := range order {
		cand, ok := snap.Tasks[e.ID]
		if !ok || cand.Status != teambus.TaskAvailable {
			if _, bad := snap.Damage("task." + e.ID); !bad { // a damaged record is repaired, not forgotten
				stale[e.ID] = kv.Gone
				if ok {
					stale[e.ID] = snap.TaskRev[e.ID]
				}
			}
			continue
		}
		t, ok, err := s.claimCandidate(snap, a, cand, epoch)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if err := s.takeSlot(ctx, snap, a.Member, e.ID); err != nil {
			if errors.Is(err, kv.ErrConflict) {
				return nil, errBoardAgain // the member record or a fenced task moved
			}
			return nil, err
		}
		rev, err := s.fencedPut(ctx, snap, a, t, epoch)
		if errors.Is(err, errTaskTaken) {
			continue
		}
		if errors.Is(err, kv.ErrConflict) {
			return nil, errBoardAgain
		}
		if err != nil {
			return nil, err
		}
		// The won entry stays until staleBatch of them are there (each a
		// write every claim racing for the team would have to wait for).
		stale[t.ID] = rev
		if len(stale) >= staleBatch {
			s.boardTake(ctx, b, stale)
		}
		s.touch(ctx, a)
		s.LogEvent(ctx, a.Team, eventlog.EvTaskClaimed, a.Member, map[string]any{"taskId": t.ID, "agent": a.Member, "attempts": t.Attempts, "epoch": t.Epoch})
		return t, nil
	}
	s.boardTake(ctx, b, stale)
	return nil, errBoardAgain
}

// boardTake takes the entries of stale, tasks found not claimable, off
// the board (kv.Store.BoardTake). Best effort: an entry left is taken off
// by the next reader or rebuild.
func (s *Service) boardTake(ctx context.Context, b *kv.Board, stale map[string]uint64) {
	if len(stale) == 0 {
		return
	}
	if err := s.store.BoardTake(ctx, b, stale); err != nil {
		s.cfg.Logger.Debug("claim board entries not removed", "team", b.Team.ID, "entries", len(stale), "err", err)
	}
}

// fencedPut writes task t, changed by member a as read in snap (a claim:
// after its slot write), fenced on the member record as snap holds it. The
// write expects nothing in the team's state to have moved since
// (kv.PutTaskFenced); when something else did (another member's write),
// the member and the task are read again and, if neither moved, the write
// is tried again at the new position: only a move of the task
// (errTaskTaken) or of the member record (ErrConflict) gives it up. Both
// wrap kv.ErrConflict. It returns the revision written.
func (s *Service) fencedPut(ctx context.Context, snap *kv.Snapshot, a Actor, t *teambus.Task, epoch int64) (uint64, error) {
	slot, rev := snap.MemberRev[a.Member], snap.TaskRev[t.ID]
	cur := snap
	for i := 0; i < kv.MaxRetries; i++ {
		n, err := s.store.PutTaskFenced(ctx, cur, t, rev, a.Member)
		if !errors.Is(err, kv.ErrConflict) {
			return n, err
		}
		again, err := s.store.Records(ctx, a.Team, []string{a.Member}, []string{t.ID})
		if err != nil {
			return 0, err
		}
		if tk, ok := again.Tasks[t.ID]; ok && again.TaskRev[t.ID] != rev {
			snap.Tasks[t.ID], snap.TaskRev[t.ID] = tk, again.TaskRev[t.ID]
			return 0, errTaskTaken
		}
		e, err := authorize(again, a)
		if err != nil {
			return 0, err
		}
		if e != epoch || again.MemberRev[a.Member] != slot || again.TaskRev[t.ID] != rev {
			return 0, fmt.Errorf("claim task %s: member %s changed: %w", t.ID, a.Member, kv.ErrConflict)
		}
		cur = again
	}
	return 0, fmt.Errorf("claim task %s: %w", t.ID, kv.ErrConflict)
}

// boardOrder sorts entries as teambus.Pick orders tasks for a member of
// quantum. Among the leading entries tied in everything but their id
// (tasks added together, alike), those of the member's home shard (a hash
// of its id) come first: members racing for work start on different
// tasks instead of all on the first id (the id is the last key of the
// order only to make it total), and the entries a member leaves on the
// board after its claims (staleBatch) are in one shard, taken off in one
// write.
func boardOrder(entries []kv.BoardEntry, quantum, member string) []kv.BoardEntry {
	ranks := make([]teambus.Rank, len(entries))
	idx := make([]int, len(entries))
	for i, e := range entries {
		ranks[i], idx[i] = rankOf(e), i
	}
	sort.Slice(idx, func(i, j int) bool { return ranks[idx[i]].Before(ranks[idx[j]], quantum) })
	out := make([]kv.BoardEntry, len(entries))
	for i, j := range idx {
		out[i] = entries[j]
	}
	n := 1
	for n < len(idx) && ranks[idx[n]].Tied(ranks[idx[0]], quantum) {
		n++
	}
	if n > 1 {
		home := shardOf(member)
		sort.SliceStable(out[:n], func(i, j int) bool {
			return shardOf(out[i].ID) == home && shardOf(out[j].ID) != home
		})
	}
	return out
}

// boardDown refreshes the Down of the claimable tasks that new tasks
// added to tasks (the team as read before) wait on, directly or through
// others: each new task is one more downstream of them. Best effort: a
// rebuild (kv.Store.RebuildBoard) computes every Down again.
func (s *Service) boardDown(ctx context.Context, team string, tasks map[string]*teambus.Task, added ...*teambus.Task) {
	all := make(map[string]*teambus.Task, len(tasks)+len(added))
	for id, t := range tasks {
		all[id] = t
	}
	var stack []string
	for _, t := range added {
		all[t.ID] = t
		stack = append(stack, t.Dependencies...)
	}
	seen := map[string]bool{}
	var up []string
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		t, ok := all[id]
		if seen[id] || !ok {
			continue
		}
		seen[id] = true
		if t.Status == teambus.TaskAvailable {
			up = append(up, id)
		}
		stack = append(stack, t.Dependencies...)
	}
	if len(up) == 0 {
		return
	}
	set := teambus.DownstreamOf(all, up)
	if err := s.store.BoardSetDown(ctx, team, set); err != nil {
		s.cfg.Logger.Debug("claim board not updated", "team", team, "err", err)
	}
}

// boardDownAll is boardDown for an import: the new tasks' entries were
// written with Down 0 (kv.Store.CreateTasks), so every available task
// with work downstream, new or waited on by a new one, gets its Down.
func (s *Service) boardDownAll(ctx context.Context, team string, tasks map[string]*teambus.Task, added []*teambus.Task) {
	all := make(map[string]*teambus.Task, len(tasks)+len(added))
	for id, t := range tasks {
		all[id] = t
	}
	for _, t := range added {
		all[t.ID] = t
	}
	var avail []string
	for id, t := range all {
		if t.Status == teambus.TaskAvailable {
			avail = append(avail, id)
		}
	}
	set := map[string]int{}
	for id, d := range teambus.DownstreamOf(all, avail) {
		if d > 0 {
			set[id] = d
		}
	}
	if len(set) == 0 {
		return
	}
	if err := s.store.BoardSetDown(ctx, team, set); err != nil {
		s.cfg.Logger.Debug("claim board not updated", "team", team, "err", err)
	}
}

// rebuildBoard makes the claim board agree with snap, a full read of the
// team (kv.Store.RebuildBoard), and the members' claim slots with the
// tasks they hold: a member holding an active task its slot does not name
// (one claimed or reassigned before every assignment wrote the slot) gets
// the slot written, with compare-and-set, since the board's path takes a
// member's slot for its only task (nextFromBoard). Only an isolated read
// (Seq) is trusted for the slots. Best effort: what fails is done by the
// next full read.
func (s *Service) rebuildBoard(ctx context.Context, snap *kv.Snapshot) {
	if _, _, err := s.store.RebuildBoard(ctx, snap, boardWant(snap)); err != nil {
		s.cfg.Logger.Debug("claim board not rebuilt", "team", snap.Team.ID, "err", err)
	}
	if snap.Seq == 0 {
		return
	}
	for id, held := range snap.ActiveTasks() {
		m, ok := snap.Members[id]
		if !ok || m.ClaimTask == held[0].ID {
			continue
		}
		upd := *m
		upd.ClaimTask = held[0].ID
		if _, err := s.store.PutMember(ctx, snap.Team.ID, &upd, snap.MemberRev[id]); err != nil {
			s.cfg.Logger.Debug("claim slot not written", "team", snap.Team.ID, "member", id, "err", err)
		}
	}
}
