package kv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
)

// The claim board: which tasks can be claimed, without reading the team.
//
// `task next` used to read every task of the team to find the claimable
// ones. The board keeps them in BoardLayout.Shards records ("board.0",
// "board.1"…; which shard holds a task, and the order of a shard, are the
// layout's, given by the team service), one entry per available
// task with what teambus.Pick orders by (BoardEntry), so a claim reads the
// team record, its member record and the board in one isolated read, then
// its candidate tasks, and claims one with compare-and-set as before.
//
// The board is a cache of the task records, which stay the truth; a claim
// is decided on the task record, never on the board. It is kept in step,
// after the write, by whoever writes a task:
//
//   - a write of an available task (add, release, requeue, fail, reopen,
//     promotion, import) adds or refreshes its entry (PutTask,
//     PutTaskFenced, CreateTasks), with compare-and-set on the shard; a
//     record Repair restores is found by the next rebuild (below);
//   - entries of tasks no longer claimable are removed by whoever finds
//     them so: a claim takes the entries it found stale, its own won entry
//     among them, off a few at a time (BoardTake, team's staleBatch), a
//     claim by id or another transition of an available task takes its
//     own (BoardRemove), and every rebuild drops the stale ones.
//
// The shards are written as rollups (putBoard): the bucket keeps a
// shard's latest value only.
//
// Each entry carries the revision of the task write that made it
// available, and is removed only by someone who saw the task not
// claimable at that revision or a later one: a stale remove never drops
// an entry a newer write put back.
//
// A writer that dies between its task write and the board write leaves a
// claimable task off the board. Two paths find it, both from a full read
// of the team (RebuildBoard): a `task next` that finds no candidate on the
// board reads the whole team, as before the board, claims from it and
// rebuilds the board; and the lead's promotion on every heartbeat
// (team.Service.PromoteReady) reconciles the board with the team it read.
// A team created before the board has no marker record ("board"): its
// first `task next` rebuilds the board and writes the marker.
//
// An entry's Down (tasks downstream, Pick's first key) is computed from
// the dependents index when the entry is written, and refreshed by a task
// add for the claimable tasks the new task waits on (BoardSetDown) and by
// every rebuild; until then an entry may rank a task a little lower than
// a full read would.

const (
	preBoard = "board."
	keyBoard = "board"
	// rebuildStale is how many stale entries make a rebuild rewrite a
	// shard it would otherwise leave as it is.
	rebuildStale = 32
)

// BoardEntry is one claimable task on the board.
type BoardEntry struct {
	ID string
	// Rev is the revision of the task write that made it available.
	Rev      uint64
	Priority int
	Down     int
	Created  int64 // unix nanoseconds
	Quantum  string
}

// BoardLayout is how the board is laid out in records: the policy of the
// team service (team.BoardLayout), which the store only follows. Every
// store writing a team's board must use the same layout.
type BoardLayout struct {
	// Shards is the number of board records.
	Shards int
	// Shard returns the shard of task id, in [0, Shards).
	Shard func(id string) int
	// Before orders the entries of a shard: the order a member without a
	// quantum claims them in. A reader decodes only a shard's head.
	Before func(a, b BoardEntry) bool
}

// on reports whether the store keeps a board: a store without a layout
// writes no entries and finds no board.
func (l BoardLayout) on() bool { return l.Shards > 0 && l.Shard != nil && l.Before != nil }

// NewBoardEntry returns the entry of available task t written at rev with
// down tasks downstream of it.
func NewBoardEntry(t *teambus.Task, rev uint64, down int) BoardEntry {
	return BoardEntry{ID: t.ID, Rev: rev, Priority: t.Priority, Down: down, Created: t.CreatedAt.UnixNano(), Quantum: t.Quantum}
}

// A shard's value is one line per entry, "id rev down priority created
// quantum" (ids and quanta are ids: no spaces), sorted in the layout's
// order (BoardLayout.Before), so a reader parses
// only the head of each shard, not every entry: a board of 11,000 tasks
// decoded as JSON on every claim was most of a claim's time.

// encodeBoard returns the value of a shard holding entries, sorted.
func (s *Store) encodeBoard(entries []BoardEntry) []byte {
	sort.Slice(entries, func(i, j int) bool { return s.cfg.Board.Before(entries[i], entries[j]) })
	var b []byte
	for _, e := range entries {
		b = append(b, e.ID...)
		b = append(b, ' ')
		b = strconv.AppendUint(b, e.Rev, 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(e.Down), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(e.Priority), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, e.Created, 10)
		b = append(b, ' ')
		b = append(b, e.Quantum...)
		b = append(b, '\n')
	}
	return b
}

// parseBoardLine decodes one line of a shard.
func parseBoardLine(line string) (BoardEntry, error) {
	f := strings.Split(line, " ")
	if len(f) != 6 || !validID(f[0]) || (f[5] != "" && !validID(f[5])) {
		return BoardEntry{}, fmt.Errorf("bad board entry %q", clip(line))
	}
	e := BoardEntry{ID: f[0], Quantum: f[5]}
	var err [4]error
	e.Rev, err[0] = strconv.ParseUint(f[1], 10, 64)
	down, e1 := strconv.Atoi(f[2])
	prio, e2 := strconv.Atoi(f[3])
	e.Created, err[3] = strconv.ParseInt(f[4], 10, 64)
	err[1], err[2] = e1, e2
	e.Down, e.Priority = down, prio
	for _, x := range err {
		if x != nil {
			return BoardEntry{}, fmt.Errorf("bad board entry %q", clip(line))
		}
	}
	return e, nil
}

// decodeBoard decodes every entry of a shard's value.
func decodeBoard(b []byte) ([]BoardEntry, error) {
	var out []BoardEntry
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		e, err := parseBoardLine(line)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// headBoard decodes the entries of a shard's value a member of quantum
// would try first: the first k (a shard is in the layout's order), and with a
// quantum the first k of that quantum and the first k of others.
func headBoard(b []byte, quantum string, k int) ([]BoardEntry, error) {
	var out []BoardEntry
	mine, other := 0, 0
	rest := string(b)
	for rest != "" && (mine < k || (other < k && quantum != "")) {
		line, tail, _ := strings.Cut(rest, "\n")
		rest = tail
		if line == "" {
			continue
		}
		if quantum != "" {
			q := line[strings.LastIndexByte(line, ' ')+1:]
			if q == quantum && mine >= k || q != quantum && other >= k {
				continue
			}
		}
		e, err := parseBoardLine(line)
		if err != nil {
			return nil, err
		}
		if quantum == "" || e.Quantum == quantum {
			mine++
		} else {
			other++
		}
		out = append(out, e)
	}
	return out, nil
}

func boardKey(n int) string { return preBoard + strconv.Itoa(n) }

// Board is the head of the claim board read together with the team
// record and one member record (Snapshot, consistent at its Seq).
type Board struct {
	*Snapshot
	// Built reports a complete board: the marker record is there and
	// every shard decodes. A board that is not built means nothing.
	Built bool
	// Entries are the first entries of each shard for the member
	// (headBoard), in no order across shards.
	Entries []BoardEntry
	// shards are the values read, by shard, and their revisions.
	shards map[int]entry
}

// Board reads the team record, member's record and the claim board in one
// isolated read, and decodes the k first entries of each shard for the
// member's quantum.
func (s *Store) Board(ctx context.Context, team, member string, k int) (*Board, error) {
	if err := teambus.ValidateMemberID(member); err != nil {
		return nil, err
	}
	if !s.cfg.Board.on() {
		snap, err := s.Snapshot(ctx, team)
		if err != nil {
			return nil, err
		}
		return &Board{Snapshot: snap}, nil
	}
	ctx, cancel, bucket, pre, err := s.isolatedRead(ctx, team)
	if err != nil {
		return nil, err
	}
	defer cancel()
	entries, seq, err := readLastAt(ctx, s.js.Conn(), bucket, pre+keyTeam, pre+preMember+member, pre+keyBoard, pre+preBoard+">")
	if err != nil {
		return nil, unavailable("read the claim board of team "+team, err)
	}
	b := &Board{Snapshot: newSnapshot(team), shards: map[int]entry{}}
	b.Seq = seq
	var records []entry
	for _, e := range entries {
		switch {
		case e.key == keyBoard:
			b.Built = true
		case strings.HasPrefix(e.key, preBoard):
			n, err := strconv.Atoi(strings.TrimPrefix(e.key, preBoard))
			if err == nil && n >= 0 && n < s.cfg.Board.Shards {
				b.shards[n] = e
			}
		default:
			records = append(records, e)
		}
	}
	b.addAll(records)
	if err := b.check(team); err != nil {
		return nil, err
	}
	quantum := ""
	if m, ok := b.Members[member]; ok {
		quantum = m.Quantum
	}
	for _, e := range b.shards {
		head, err := headBoard(e.value, quantum, k)
		if err != nil {
			b.Built = false // rebuilt by the full read
			break
		}
		b.Entries = append(b.Entries, head...)
	}
	return b, nil
}

// BoardTake takes entries read in b off the board: seen holds, by task
// id, a revision at which the task was read not claimable (Gone: the task
// is gone), as BoardRemove's. A shard nobody wrote since b was read is
// written without reading it again.
func (s *Store) BoardTake(ctx context.Context, b *Board, seen map[string]uint64) error {
	if !s.cfg.Board.on() {
		return nil
	}
	kv, err := s.stateBucket(ctx, b.Team.ID)
	if err != nil {
		return err
	}
	byShard := map[int]map[string]uint64{}
	for id, rev := range seen {
		n := s.cfg.Board.Shard(id)
		if byShard[n] == nil {
			byShard[n] = map[string]uint64{}
		}
		byShard[n][id] = rev
	}
	for n, ids := range byShard {
		drop := func(have []BoardEntry) ([]BoardEntry, bool) {
			out := make([]BoardEntry, 0, len(have))
			for _, e := range have {
				if r, ok := ids[e.ID]; ok && e.Rev <= r {
					continue
				}
				out = append(out, e)
			}
			return out, len(out) != len(have)
		}
		if e, ok := b.shards[n]; ok {
			if have, err := decodeBoard(e.value); err == nil {
				out, changed := drop(have)
				if !changed {
					continue
				}
				val := s.encodeBoard(out)
				rev, err := s.putBoard(ctx, kv.Bucket(), n, val, e.rev)
				if err == nil {
					b.shards[n] = entry{key: e.key, value: val, rev: rev}
					continue
				}
				if !errors.Is(err, ErrConflict) {
					return err
				}
			}
		}
		if err := s.editBoard(ctx, b.Team.ID, n, drop); err != nil {
			return err
		}
	}
	return nil
}

// BoardAdd puts entries on the board, replacing an entry of the same task
// unless that one is newer (a higher Rev).
func (s *Store) BoardAdd(ctx context.Context, team string, entries ...BoardEntry) error {
	if !s.cfg.Board.on() {
		return nil
	}
	byShard := map[int][]BoardEntry{}
	for _, e := range entries {
		n := s.cfg.Board.Shard(e.ID)
		byShard[n] = append(byShard[n], e)
	}
	for n, add := range byShard {
		err := s.editBoard(ctx, team, n, func(have []BoardEntry) ([]BoardEntry, bool) {
			changed := false
			at := make(map[string]int, len(have))
			for i, e := range have {
				at[e.ID] = i
			}
			for _, e := range add {
				i, ok := at[e.ID]
				switch {
				case !ok:
					at[e.ID] = len(have)
					have = append(have, e)
					changed = true
				case have[i].Rev <= e.Rev && have[i] != e:
					have[i] = e
					changed = true
				}
			}
			return have, changed
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// BoardRemove takes task id off the board if its entry is not newer than
// seen: a revision at which the task was read not claimable (math.MaxUint64
// for a task that is gone).
func (s *Store) BoardRemove(ctx context.Context, team, id string, seen uint64) error {
	if !s.cfg.Board.on() {
		return nil
	}
	return s.editBoard(ctx, team, s.cfg.Board.Shard(id), func(have []BoardEntry) ([]BoardEntry, bool) {
		for i, e := range have {
			if e.ID == id && e.Rev <= seen {
				return append(have[:i:i], have[i+1:]...), true
			}
		}
		return have, false
	})
}

// BoardSetDown sets the Down of the entries of the tasks in down that are
// on the board.
func (s *Store) BoardSetDown(ctx context.Context, team string, down map[string]int) error {
	if !s.cfg.Board.on() {
		return nil
	}
	byShard := map[int]bool{}
	for id := range down {
		byShard[s.cfg.Board.Shard(id)] = true
	}
	for n := range byShard {
		err := s.editBoard(ctx, team, n, func(have []BoardEntry) ([]BoardEntry, bool) {
			changed := false
			for i, e := range have {
				if d, ok := down[e.ID]; ok && e.Down != d {
					have[i].Down = d
					changed = true
				}
			}
			return have, changed
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// editBoard applies fn to shard n with compare-and-set, reading it again
// on a conflict. A shard that does not decode is replaced and the board's
// marker deleted, so the next `task next` rebuilds it.
func (s *Store) editBoard(ctx context.Context, team string, n int, fn func([]BoardEntry) ([]BoardEntry, bool)) error {
	kv, err := s.stateBucket(ctx, team)
	if err != nil {
		return err
	}
	key := boardKey(n)
	return Retry(ctx, func() error {
		var (
			have []BoardEntry
			rev  uint64
		)
		e, err := kv.Get(ctx, key)
		switch {
		case err == nil:
			rev = e.Revision()
			if have, err = decodeBoard(e.Value()); err != nil {
				have = nil
				if err := kv.Delete(ctx, keyBoard); err != nil && !isNotFound(err) {
					return unavailable("mark the claim board of team "+team+" for a rebuild", err)
				}
			}
		case isNotFound(err):
			// A deleted shard: the write expects its delete marker.
			if rev, err = lastSeqOf(ctx, s, kv.Bucket(), key); err != nil {
				return unavailable("read "+key, err)
			}
		default:
			return unavailable("read "+key, err)
		}
		tasks, changed := fn(have)
		if !changed {
			return nil
		}
		_, err = s.putBoard(ctx, kv.Bucket(), n, s.encodeBoard(tasks), rev)
		return err
	})
}

// putBoard writes shard n of bucket if its revision is still rev (0:
// absent), as a rollup of the key: the bucket keeps only the shard's
// latest value, not the eight revisions of its history, since a board of
// 11,000 entries is ~400 KB and is rewritten by every few claims.
func (s *Store) putBoard(ctx context.Context, bucket string, n int, val []byte, rev uint64) (uint64, error) {
	key := boardKey(n)
	msg := &nats.Msg{Subject: subject(bucket, key), Data: val, Header: nats.Header{
		jetstream.ExpectedLastSubjSeqHeader: []string{strconv.FormatUint(rev, 10)},
		"Nats-Rollup":                       []string{"sub"},
	}}
	ack, err := s.js.PublishMsg(ctx, msg)
	switch {
	case err == nil:
		return ack.Sequence, nil
	case isConflict(err):
		return 0, fmt.Errorf("write %s: %w", key, ErrConflict)
	default:
		return 0, unavailable("write "+key, err)
	}
}

// RebuildBoard makes the board agree with snap, a full read of the team
// (Snapshot), and want, the entries of the tasks snap holds claimable
// (the team service decides which, and their Down): every one of want on
// it, no entry of a task snap holds not claimable at or after the entry's
// revision, and the marker written. Entries newer than snap are kept as
// they are. It is idempotent, writes only the shards that differ (a shard
// that differs only by fewer than rebuildStale stale entries is left to
// the claims), and returns how many entries it added and removed.
func (s *Store) RebuildBoard(ctx context.Context, snap *Snapshot, want []BoardEntry) (added, removed int, err error) {
	if !s.cfg.Board.on() {
		return 0, 0, nil
	}
	team := snap.Team.ID
	kv, err := s.stateBucket(ctx, team)
	if err != nil {
		return 0, 0, err
	}
	byShard := make([]map[string]BoardEntry, s.cfg.Board.Shards)
	for i := range byShard {
		byShard[i] = map[string]BoardEntry{}
	}
	for _, e := range want {
		byShard[s.cfg.Board.Shard(e.ID)][e.ID] = e
	}
	// Entries written after snap was read are kept as they are.
	upTo := snap.Seq
	if upTo == 0 {
		for _, r := range snap.TaskRev {
			upTo = max(upTo, r)
		}
	}
	for n := 0; n < s.cfg.Board.Shards; n++ {
		var a, r int
		err := s.editBoard(ctx, team, n, func(have []BoardEntry) ([]BoardEntry, bool) {
			a, r = 0, 0
			out := make([]BoardEntry, 0, len(byShard[n]))
			seen := map[string]bool{}
			changed := false
			for _, e := range have {
				_, ok := snap.Tasks[e.ID]
				w, claimable := byShard[n][e.ID]
				switch {
				case claimable:
					seen[e.ID] = true
					if e.Rev <= w.Rev && e != w {
						e, changed = w, true
					}
				case e.Rev > upTo, ok && e.Rev > snap.TaskRev[e.ID]:
					// Written after snap was read: keep.
				default:
					r++
					continue
				}
				out = append(out, e)
			}
			for id, w := range byShard[n] {
				if !seen[id] {
					out = append(out, w)
					a++
					changed = true
				}
			}
			// Stale entries alone are left to the claims that find them
			// (a few a member, taken off in batches) unless there are
			// many: the lead rebuilds on every heartbeat, and a write of
			// the team bucket makes every fenced write in flight retry.
			if !changed && r < rebuildStale {
				r = 0
			}
			return out, changed || r > 0
		})
		if err != nil {
			return added, removed, err
		}
		added, removed = added+a, removed+r
	}
	if _, err := kv.Create(ctx, keyBoard, []byte(`{"board":true}`)); err != nil && !isConflict(err) {
		return added, removed, unavailable("mark the claim board of team "+team, err)
	}
	return added, removed, nil
}

// boardAfter keeps the board in step with a write of task t at rev: an
// available task gets its entry. Best effort: a failure is logged and
// repaired by the next rebuild (see the board's comment).
func (s *Store) boardAfter(ctx context.Context, team string, t *teambus.Task, rev uint64) {
	if t.Status != teambus.TaskAvailable || !s.cfg.Board.on() {
		return
	}
	down, err := s.downstream(ctx, team, t.ID)
	if err == nil {
		err = s.BoardAdd(ctx, team, NewBoardEntry(t, rev, down))
	}
	if err != nil {
		s.cfg.Logger.Debug("claim board not updated", "team", team, "task", t.ID, "err", err)
	}
}

// boardAfterAll is boardAfter for tasks created together, the last at rev
// last: their entries have Down 0 (the importer sets it, BoardSetDown).
func (s *Store) boardAfterAll(ctx context.Context, team string, tasks []*teambus.Task, last uint64) {
	var add []BoardEntry
	for i, t := range tasks {
		if t.Status == teambus.TaskAvailable {
			add = append(add, NewBoardEntry(t, last-uint64(len(tasks)-1-i), 0))
		}
	}
	if err := s.BoardAdd(ctx, team, add...); err != nil {
		s.cfg.Logger.Debug("claim board not updated", "team", team, "tasks", len(add), "err", err)
	}
}

// downstream counts the tasks not done that wait on task id, directly or
// through others, as teambus.Downstream does, from the dependents index:
// one read per level of the graph, then one of the tasks found.
func (s *Store) downstream(ctx context.Context, team, id string) (int, error) {
	kv, err := s.stateBucket(ctx, team)
	if err != nil {
		return 0, err
	}
	pre := "$KV." + kv.Bucket() + "."
	seen := map[string]bool{id: true}
	var found []string
	for frontier := []string{id}; len(frontier) > 0; {
		var next []string
		for page := range slices.Chunk(frontier, 256) {
			subjects := make([]string, len(page))
			for i, x := range page {
				subjects[i] = pre + preDependents + x
			}
			entries, _, err := readLastAt(ctx, s.js.Conn(), kv.Bucket(), subjects...)
			if err != nil {
				return 0, unavailable("read the dependents of task "+id, err)
			}
			for _, e := range entries {
				var rec dependentsRecord
				if json.Unmarshal(e.value, &rec) != nil {
					continue
				}
				for _, d := range rec.Tasks {
					if !seen[d] && validID(d) {
						seen[d] = true
						next = append(next, d)
						found = append(found, d)
					}
				}
			}
		}
		frontier = next
	}
	n := 0
	for page := range slices.Chunk(found, 256) {
		subjects := make([]string, len(page))
		for i, x := range page {
			subjects[i] = pre + preTask + x
		}
		entries, _, err := readLastAt(ctx, s.js.Conn(), kv.Bucket(), subjects...)
		if err != nil {
			return 0, unavailable("read the dependents of task "+id, err)
		}
		for _, e := range entries {
			if r, err := DecodeRecord(team, e.key, e.value); err == nil && r.Task != nil && !r.Task.Done() {
				n++
			}
		}
	}
	return n, nil
}

// Gone is the revision to pass BoardRemove for a task that no longer
// exists.
const Gone uint64 = math.MaxUint64
