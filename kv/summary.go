package kv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
)

// The task summary: what a resume report needs of the tasks, without
// reading them.
//
// A resume reports the count of tasks in each status, the progress and
// each member's task. Reading every task record for that costs a team of
// 10,000 tasks a read past the 1,024 keys of one multi_last (a scan of the
// bucket's history) and 10,000 decodes. The summary record ("summary")
// holds those figures together with TaskSeq, the stream sequence of the
// last task write they were computed at. It is valid while that is still
// the last write of any task key: one direct get of the last message on
// "task.>" tells, whatever the number of tasks (a delete or purge of a
// task is a write of its key too). A valid summary is used as is; a stale
// or missing one is recomputed from a full Snapshot and written back with
// compare-and-set for the next reader.
//
// The summary is a cache, checked on every read, not a record kept in
// step with each transition: a transition writes only its task, as before,
// and makes the summary stale. The first report after task writes pays
// the full read; the ones after it (a resume, a probe, a forced takeover
// while nothing moves) read O(members) records. Writing it twice, or an
// older one after a newer one, is harmless: a summary that does not match
// the last task write is never used.

const keySummary = "summary"

// TaskSummary is the task figures of a team at one task write.
type TaskSummary struct {
	// TaskSeq is the stream sequence of the last task write the figures
	// include; 0 for a team that never had a task.
	TaskSeq uint64 `json:"task_seq"`
	// Counts is the number of tasks in each status (every status present).
	Counts map[teambus.TaskStatus]int `json:"counts"`
	// Progress is teambus.Progress of the tasks.
	Progress int `json:"progress"`
	// Active are the active tasks (in progress or blocked), by id.
	Active []*teambus.Task `json:"active"`
	// Cached reports that the figures came from a valid summary record,
	// not from reading every task.
	Cached bool `json:"-"`
}

// summarize computes the summary of snap's tasks at task write seq.
func summarize(snap *Snapshot, seq uint64) *TaskSummary {
	sum := &TaskSummary{TaskSeq: seq, Counts: teambus.CountByStatus(snap.Tasks), Progress: teambus.Progress(snap.Tasks), Active: []*teambus.Task{}}
	for _, id := range snap.TaskIDs() {
		if t := snap.Tasks[id]; t.Active() {
			sum.Active = append(sum.Active, t)
		}
	}
	return sum
}

// ReportSnapshot reads what a resume report needs: the team record, the
// members and their activity in one isolated read, and the task summary.
// The snapshot's Tasks hold only the active tasks (so MemberTasks and
// ActiveTasks work); the summary holds the counts. With a valid summary
// record that is three small reads however many tasks the team has;
// otherwise the whole team is read once (Snapshot) and the summary
// written back.
func (s *Store) ReportSnapshot(ctx context.Context, team string) (*Snapshot, *TaskSummary, error) {
	kv, err := s.stateBucket(ctx, team)
	if err != nil {
		return nil, nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	bucket := kv.Bucket()
	last, err := lastSeqOf(ctx, s, bucket, preTask+">")
	if err != nil {
		return nil, nil, unavailable("read team "+team, err)
	}
	pre := "$KV." + bucket + "."
	// The members and their activity in two reads at once, so a team of
	// up to 1,022 members fits the 1,024 keys of one multi_last each.
	var (
		activity []entry
		actErr   error
		wg       sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		activity, _, actErr = readLastAt(ctx, s.js.Conn(), bucket, pre+preActivity+">")
	}()
	entries, _, err := readLastAt(ctx, s.js.Conn(), bucket, pre+keyTeam, pre+keySummary, pre+preMember+">")
	wg.Wait()
	if err == nil {
		err = actErr
	}
	entries = append(entries, activity...)
	if err != nil && !errors.Is(err, errTooMany) {
		return nil, nil, unavailable("read team "+team, err)
	}
	var (
		sumRev uint64
		sum    *TaskSummary
	)
	if err == nil {
		snap := newSnapshot(team)
		var rest []entry
		for _, e := range entries {
			if e.key != keySummary {
				rest = append(rest, e)
				continue
			}
			sumRev = e.rev
			var ts TaskSummary
			if json.Unmarshal(e.value, &ts) == nil && ts.Counts != nil && ts.TaskSeq == last {
				sum = &ts
			}
		}
		if sum == nil && last == 0 {
			sum = summarize(snap, 0) // no task was ever written
		}
		if sum != nil {
			snap.addAll(rest)
			if err := snap.check(team); err != nil {
				return nil, nil, err
			}
			for _, t := range sum.Active {
				if validID(t.ID) {
					snap.Tasks[t.ID] = t
				}
			}
			sum.Cached = true
			return snap, sum, nil
		}
	}
	// Stale, missing or damaged: read everything once and write it back.
	snap, err := s.Snapshot(ctx, team)
	if err != nil {
		return nil, nil, err
	}
	sum = summarize(snap, last)
	s.saveSummary(ctx, kv, snap, sum, sumRev)
	return snap, sum, nil
}

// TaskSeq returns the stream sequence of the team's last task write, 0
// if none: read it before a Snapshot to pass to SaveSummary.
func (s *Store) TaskSeq(ctx context.Context, team string) (uint64, error) {
	kv, err := s.stateBucket(ctx, team)
	if err != nil {
		return 0, err
	}
	last, err := lastSeqOf(ctx, s, kv.Bucket(), preTask+">")
	if err != nil {
		return 0, unavailable("read team "+team, err)
	}
	return last, nil
}

// SaveSummary writes the task summary of snap, read after TaskSeq
// returned last, unless the record is already at last: whoever reads the
// whole team anyway (the lead's promotion on each heartbeat) keeps the
// summary current for the next resume. Best effort: it reports nothing.
func (s *Store) SaveSummary(ctx context.Context, snap *Snapshot, last uint64) {
	kv, err := s.stateBucket(ctx, snap.Team.ID)
	if err != nil {
		return
	}
	var rev uint64
	e, err := kv.Get(ctx, keySummary)
	switch {
	case err == nil:
		var ts TaskSummary
		if json.Unmarshal(e.Value(), &ts) == nil && ts.Counts != nil && ts.TaskSeq == last {
			return
		}
		rev = e.Revision()
	case !isNotFound(err):
		return
	}
	s.saveSummary(ctx, kv, snap, summarize(snap, last), rev)
}

// saveSummary writes sum, computed from snap, over the summary record at
// rev (0: absent), unless a task write newer than sum.TaskSeq is in snap.
func (s *Store) saveSummary(ctx context.Context, kv jetstream.KeyValue, snap *Snapshot, sum *TaskSummary, rev uint64) {
	for _, r := range snap.TaskRev {
		if r > sum.TaskSeq {
			// A task write landed between the two reads: the figures are
			// right for this reader but not at TaskSeq; leave the record.
			return
		}
	}
	b, _ := json.Marshal(sum)
	if _, err := update(ctx, kv, keySummary, b, rev); err != nil {
		// Another reader wrote it, or this connection may not write; the
		// next report recomputes.
		s.cfg.Logger.Debug("task summary not written", "team", snap.Team.ID, "err", err)
	}
}

// newSnapshot returns an empty snapshot of team.
func newSnapshot(team string) *Snapshot {
	return &Snapshot{
		id: team,
		State: teambus.State{
			Members:  map[string]*teambus.Member{},
			Tasks:    map[string]*teambus.Task{},
			Activity: map[string]time.Time{},
		},
		MemberRev: map[string]uint64{}, TaskRev: map[string]uint64{},
	}
}

// check refuses a snapshot without a (decodable) team record.
func (snap *Snapshot) check(team string) error {
	if d, bad := snap.Damage(keyTeam); bad {
		return damagedTeamError(team, d)
	}
	if snap.Team == nil {
		return teambus.NotFoundf("team %s not found: use `teambus team list`", team)
	}
	return nil
}

// lastSeqOf returns the stream sequence of the last message on filter
// (a key pattern of bucket), 0 when there is none: one direct get.
func lastSeqOf(ctx context.Context, s *Store, bucket, filter string) (uint64, error) {
	nc := s.js.Conn()
	body, _ := json.Marshal(map[string]string{"last_by_subj": "$KV." + bucket + "." + filter})
	m, err := nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET.KV_"+bucket, body)
	if err != nil {
		return 0, fmt.Errorf("read bucket %s: %w", bucket, err)
	}
	switch status := m.Header.Get("Status"); status {
	case "":
	case "404":
		return 0, nil
	case "503":
		return 0, noResponders(ctx, nc, bucket)
	default:
		return 0, fmt.Errorf("read bucket %s: status %s %s", bucket, status, m.Header.Get("Description"))
	}
	seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read bucket %s: bad sequence %q", bucket, m.Header.Get(jetstream.SequenceHeader))
	}
	return seq, nil
}

// Records reads the team record, the given members and tasks in one
// isolated read: a Snapshot holding only those records, consistent at its
// Seq, so a fenced write decided on it is one message (PutTaskFenced). A
// transition that needs no other record (a completion, a failure, a
// checkpoint) reads O(1) records, not the team.
func (s *Store) Records(ctx context.Context, team string, members, tasks []string) (*Snapshot, error) {
	ctx, cancel, bucket, pre, err := s.isolatedRead(ctx, team)
	if err != nil {
		return nil, err
	}
	defer cancel()
	subjects := []string{pre + keyTeam}
	for _, id := range members {
		if err := teambus.ValidateMemberID(id); err != nil {
			return nil, err
		}
		subjects = append(subjects, pre+preMember+id)
	}
	for _, id := range tasks {
		if err := teambus.ValidateID("task", id); err != nil {
			return nil, err
		}
		subjects = append(subjects, pre+preTask+id)
	}
	entries, seq, err := readLastAt(ctx, s.js.Conn(), bucket, subjects...)
	if err != nil {
		return nil, unavailable("read team "+team, err)
	}
	snap := newSnapshot(team)
	snap.Seq = seq
	snap.addAll(entries)
	if err := snap.check(team); err != nil {
		return nil, err
	}
	return snap, nil
}

// isolatedRead prepares one isolated direct read of team's state bucket:
// ctx with a 10 s deadline unless it has one, the bucket's name and its
// subject prefix.
func (s *Store) isolatedRead(ctx context.Context, team string) (context.Context, context.CancelFunc, string, string, error) {
	kv, err := s.stateBucket(ctx, team)
	if err != nil {
		return ctx, func() {}, "", "", err
	}
	cancel := func() {}
	if _, ok := ctx.Deadline(); !ok {
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
	}
	return ctx, cancel, kv.Bucket(), "$KV." + kv.Bucket() + ".", nil
}
