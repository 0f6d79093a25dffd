package kv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/internal/jsbatch"
	"github.com/teambus/teambus/internal/jserr"
)

// Bucket name prefixes. A team id can not contain a dot, so these never
// collide.
const (
	StatePrefix     = "TBS_"
	HeartbeatPrefix = "TBH_"
)

// Keys in the state bucket.
const (
	keyTeam     = "team"
	preMember   = "member."
	preTask     = "task."
	preActivity = "activity."
)

// DefaultStateBytes caps a team's state bucket by default: a team of
// 10,000 tasks takes about 5 MiB. Bucket limits are reserved against the
// node's store limit, like stream limits.
const DefaultStateBytes int64 = 12 << 20

// HeartbeatBytes caps a team's heartbeat bucket: one small record per
// sidecar, about 250 bytes each.
const HeartbeatBytes int64 = 2 << 20

// StateBytes returns the size limit of the team state buckets this store
// creates.
func (s *Store) StateBytes() int64 { return s.cfg.MaxBytes }

// ErrConflict is returned by a Put whose revision is stale.
var ErrConflict = fmt.Errorf("%w: record changed since it was read", teambus.ErrConflict)

// Config holds the storage settings of team buckets.
type Config struct {
	// Replicas of each bucket: 1 on a single node, 3 in a cluster.
	Replicas int
	// MaxBytes caps each team's state bucket. 0 means DefaultStateBytes.
	MaxBytes int64
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives what the store could not do without failing the
	// operation (a board or summary write it left to the next rebuild);
	// nil discards.
	Logger *slog.Logger
	// Board lays the claim board out; the zero layout keeps no board.
	Board BoardLayout
}

// Store is typed team state over JetStream KV.
type Store struct {
	js      jetstream.JetStream
	cfg     Config
	buckets bucketCache // opened bucket handles (buckets.go)
	// touched holds, by "team/member", the activity time this store last
	// wrote or read: a Touch within ActivityResolution of it reads
	// nothing (the record only moves forward).
	touched sync.Map
}

// New returns a store on js. It does no I/O.
func New(js jetstream.JetStream, cfg Config) *Store {
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultStateBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Store{js: js, cfg: cfg}
}

// Now returns the store's clock reading.
func (s *Store) Now() time.Time { return s.cfg.Now().UTC() }

// JetStream returns the JetStream context the store uses.
func (s *Store) JetStream() jetstream.JetStream { return s.js }

// Snapshot is a consistent-enough read of a whole team: every record with
// the revision it was read at.
type Snapshot struct {
	// State holds the records: Team, Members, Tasks, Activity, with
	// MemberIDs, MemberTasks and WorkStatus.
	teambus.State
	TeamRev   uint64
	MemberRev map[string]uint64
	TaskRev   map[string]uint64
	// Damaged are the records that do not decode, sorted by key
	// (record.go): they are not in the maps above.
	Damaged []DamagedRecord
	// Seq is the bucket's stream sequence the snapshot is consistent at
	// (every write up to it is in, none after it); 0 when the bucket was
	// too large for one isolated read.
	Seq uint64
	id  string // the team read
}

// TaskIDs returns the task ids in creation order, then id.
func (s *Snapshot) TaskIDs() []string {
	ids := make([]string, 0, len(s.Tasks))
	for id := range s.Tasks {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		a, b := s.Tasks[ids[i]], s.Tasks[ids[j]]
		if !a.CreatedAt.Equal(b.CreatedAt) {
			return a.CreatedAt.Before(b.CreatedAt)
		}
		return a.ID < b.ID
	})
	return ids
}

// Member returns the member or an ErrNotFound naming the team.
func (s *Snapshot) Member(id string) (*teambus.Member, error) {
	m, ok := s.Members[id]
	if !ok {
		if d, bad := s.Damage(preMember + id); bad {
			return nil, damagedError(s.Team.ID, "member "+id, d)
		}
		return nil, teambus.NotFoundf("team %s has no member %s: see `teambus team show %s`", s.Team.ID, id, s.Team.ID)
	}
	return m, nil
}

// Task returns the task or an ErrNotFound naming the team.
func (s *Snapshot) Task(id string) (*teambus.Task, error) {
	t, ok := s.Tasks[id]
	if !ok {
		if d, bad := s.Damage(preTask + id); bad {
			return nil, damagedError(s.Team.ID, "task "+id, d)
		}
		return nil, &NotFoundError{Team: s.Team.ID, Kind: "task", ID: id}
	}
	return t, nil
}

func (s *Store) stateBucket(ctx context.Context, team string) (jetstream.KeyValue, error) {
	if err := teambus.ValidateID("team", team); err != nil {
		return nil, err
	}
	kv, err := s.open(ctx, StatePrefix+team)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, teambus.NotFoundf("team %s not found: use `teambus team list`", team)
	}
	if err != nil {
		return nil, unavailable("open team "+team, err)
	}
	return kv, nil
}

// CreateTeam creates the team's buckets and records. It fails with ErrState
// when the team exists. Creating the buckets is idempotent, so a create that
// died half-way can be repeated.
func (s *Store) CreateTeam(ctx context.Context, t *teambus.Team, members []*teambus.Member) error {
	if err := teambus.ValidateID("team", t.ID); err != nil {
		return err
	}
	kv, err := s.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      StatePrefix + t.ID,
		Description: "teambus team state",
		History:     8,
		Storage:     jetstream.FileStorage,
		Replicas:    s.cfg.Replicas,
		MaxBytes:    s.cfg.MaxBytes,
	})
	if err != nil {
		return unavailable("create state bucket of team "+t.ID, err)
	}
	// Fenced writes are atomic batches (fence.go).
	if err := jsbatch.AllowAtomic(ctx, s.js, "KV_"+StatePrefix+t.ID); err != nil {
		return unavailable("create state bucket of team "+t.ID, err)
	}
	if _, err := s.heartbeats(ctx, t.ID, true); err != nil {
		return err
	}
	if e, err := kv.Get(ctx, keyTeam); err == nil {
		var old teambus.Team
		if json.Unmarshal(e.Value(), &old) == nil && old.ID != "" {
			return teambus.Statef("team %s already exists (created %s): pick another id, or see `teambus team show %s`", t.ID, old.CreatedAt.Format(time.RFC3339), t.ID)
		}
	}
	for _, m := range members {
		b, _ := json.Marshal(m)
		if _, err := kv.Create(ctx, preMember+m.ID, b); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return unavailable("create member "+m.ID, err)
		}
	}
	// The dependents index is complete from the first task (dependents.go).
	if err := markIndexed(ctx, kv); err != nil {
		return unavailable("create team "+t.ID, err)
	}
	// So is the claim board (board.go), when the store keeps one.
	if s.cfg.Board.on() {
		if _, err := kv.Create(ctx, keyBoard, []byte(`{"board":true}`)); err != nil && !isConflict(err) {
			return unavailable("create team "+t.ID, err)
		}
	}
	// The team record goes last: a team exists once its record does.
	b, _ := json.Marshal(t)
	if _, err := kv.Create(ctx, keyTeam, b); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return teambus.Statef("team %s already exists: pick another id", t.ID)
		}
		return unavailable("create team "+t.ID, err)
	}
	return nil
}

// TeamExists reports whether the team's record exists.
func (s *Store) TeamExists(ctx context.Context, team string) (bool, error) {
	_, _, err := s.Team(ctx, team)
	if errors.Is(err, teambus.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// ListTeams returns the ids of all teams, sorted.
func (s *Store) ListTeams(ctx context.Context) ([]string, error) {
	lister := s.js.KeyValueStoreNames(ctx)
	var out []string
	for name := range lister.Name() {
		if id, ok := strings.CutPrefix(name, StatePrefix); ok {
			out = append(out, id)
		}
	}
	if err := lister.Error(); err != nil {
		return nil, unavailable("list teams", err)
	}
	sort.Strings(out)
	return out, nil
}

// DeleteTeam removes the team's state and heartbeat buckets.
func (s *Store) DeleteTeam(ctx context.Context, team string) error {
	s.forget(StatePrefix+team, HeartbeatPrefix+team)
	for _, b := range []string{StatePrefix + team, HeartbeatPrefix + team} {
		if err := s.js.DeleteKeyValue(ctx, b); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
			return unavailable("delete bucket "+b, err)
		}
	}
	return nil
}

// Team reads the team record and its revision.
func (s *Store) Team(ctx context.Context, team string) (*teambus.Team, uint64, error) {
	kv, err := s.stateBucket(ctx, team)
	if err != nil {
		return nil, 0, err
	}
	r, rev, err := get(ctx, kv, team, keyTeam)
	if errors.Is(err, teambus.ErrNotFound) {
		return nil, 0, teambus.NotFoundf("team %s not found: use `teambus team list`", team)
	}
	if err != nil {
		return nil, 0, err
	}
	return r.Team, rev, nil
}

// Snapshot reads every record of the team in one pass over the bucket.
func (s *Store) Snapshot(ctx context.Context, team string) (*Snapshot, error) {
	kv, err := s.stateBucket(ctx, team)
	if err != nil {
		return nil, err
	}
	snap := newSnapshot(team)
	// A direct read, not a watch: it needs no consumer, so a member
	// credential, which may not create one, can read its team (direct.go).
	var entries []entry
	// Only the records: the index and summary records (dependents.go,
	// summary.go) do not count toward the keys of one isolated read.
	pre := "$KV." + kv.Bucket() + "."
	snap.Seq, err = readBucketAt(ctx, s.js.Conn(), kv.Bucket(), func(e entry) error {
		if recordKey(e.key) {
			entries = append(entries, e)
		}
		return nil
	}, pre+keyTeam, pre+preMember+">", pre+preTask+">", pre+preActivity+">")
	if err != nil {
		return nil, unavailable("read team "+team, err)
	}
	snap.addAll(entries)
	if err := snap.check(team); err != nil {
		return nil, err
	}
	return snap, nil
}

// Member reads one member and its revision.
func (s *Store) Member(ctx context.Context, team, id string) (*teambus.Member, uint64, error) {
	kv, err := s.stateBucket(ctx, team)
	if err != nil {
		return nil, 0, err
	}
	r, rev, err := get(ctx, kv, team, preMember+id)
	if errors.Is(err, teambus.ErrNotFound) {
		return nil, 0, teambus.NotFoundf("team %s has no member %s: see `teambus team show %s`", team, id, team)
	}
	if err != nil {
		return nil, 0, err
	}
	return r.Member, rev, nil
}

// Task reads one task and its revision.
func (s *Store) Task(ctx context.Context, team, id string) (*teambus.Task, uint64, error) {
	kv, err := s.stateBucket(ctx, team)
	if err != nil {
		return nil, 0, err
	}
	r, rev, err := get(ctx, kv, team, preTask+id)
	if errors.Is(err, teambus.ErrNotFound) {
		return nil, 0, &NotFoundError{Team: team, Kind: "task", ID: id}
	}
	if err != nil {
		return nil, 0, err
	}
	return r.Task, rev, nil
}

// PutTeam writes the team record if its revision is still rev.
func (s *Store) PutTeam(ctx context.Context, t *teambus.Team, rev uint64) (uint64, error) {
	t.UpdatedAt = s.Now()
	return s.put(ctx, t.ID, keyTeam, t, rev)
}

// PutMember writes a member if its revision is still rev; rev 0 creates it.
func (s *Store) PutMember(ctx context.Context, team string, m *teambus.Member, rev uint64) (uint64, error) {
	if err := teambus.ValidateMemberID(m.ID); err != nil {
		return 0, err
	}
	m.UpdatedAt = s.Now()
	return s.put(ctx, team, preMember+m.ID, m, rev)
}

// PutTask writes a task if its revision is still rev; rev 0 creates it.
// An available task is then put on the claim board (board.go).
func (s *Store) PutTask(ctx context.Context, team string, t *teambus.Task, rev uint64) (uint64, error) {
	if err := teambus.ValidateID("task", t.ID); err != nil {
		return 0, err
	}
	n, err := s.put(ctx, team, preTask+t.ID, t, rev)
	if err == nil {
		s.boardAfter(ctx, team, t, n)
	}
	return n, err
}

// ActivityResolution is the precision of a member's recorded activity: a
// Touch within this long of the recorded time writes nothing. Activity
// feeds stuck detection, whose timeouts are seconds to minutes; an agent
// that sends a burst of mail or claims and completes in a row costs one
// write (and one fsync) a second, not one per command.
const ActivityResolution = time.Second

// Touch records that member did work at the store's clock. It only moves
// the time forward, with compare-and-set, and at most once per
// ActivityResolution.
func (s *Store) Touch(ctx context.Context, team, member string) error {
	kv, err := s.stateBucket(ctx, team)
	if err != nil {
		return err
	}
	now := s.Now()
	memo := team + "/" + member
	if at, ok := s.touched.Load(memo); ok && now.Sub(at.(time.Time)) < ActivityResolution && !now.Before(at.(time.Time)) {
		return nil
	}
	return Retry(ctx, func() error {
		var at time.Time
		r, rev, err := get(ctx, kv, team, preActivity+member)
		switch {
		case err == nil:
			at = *r.Activity
		case errors.Is(err, ErrDamaged):
			// A damaged activity record would stop the member's activity
			// from ever being recorded: overwrite it (compare-and-set).
		case !errors.Is(err, teambus.ErrNotFound):
			return err
		}
		if now.Sub(at) < ActivityResolution {
			s.touched.Store(memo, at)
			return nil
		}
		b, _ := json.Marshal(now)
		if _, err = update(ctx, kv, preActivity+member, b, rev); err == nil {
			s.touched.Store(memo, now)
		}
		return err
	})
}

// Activity returns when member last did work, zero if never.
func (s *Store) Activity(ctx context.Context, team, member string) (time.Time, error) {
	kv, err := s.stateBucket(ctx, team)
	if err != nil {
		return time.Time{}, err
	}
	r, _, err := get(ctx, kv, team, preActivity+member)
	if errors.Is(err, teambus.ErrNotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	return *r.Activity, nil
}

// WatchState watches every record of the team's state bucket. The first
// updates are the current values, then a nil entry, then changes.
func (s *Store) WatchState(ctx context.Context, team string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	kv, err := s.stateBucket(ctx, team)
	if err != nil {
		return nil, err
	}
	w, err := kv.WatchAll(ctx, opts...)
	if err != nil {
		return nil, unavailable("watch team "+team, err)
	}
	return w, nil
}

// WatchTeamAndMember reports the team record and member's record of
// team, current values first, then their writes, until ctx ends: a
// watcher that needs those two is not sent every task write of the team
// (nor, when it starts, every record).
func (s *Store) WatchTeamAndMember(ctx context.Context, team, member string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	kv, err := s.stateBucket(ctx, team)
	if err != nil {
		return nil, err
	}
	w, err := kv.WatchFiltered(ctx, []string{keyTeam, MemberKey(member)}, opts...)
	if err != nil {
		return nil, unavailable("watch team "+team, err)
	}
	return w, nil
}

func (s *Store) put(ctx context.Context, team, key string, v any, rev uint64) (uint64, error) {
	kv, b, err := s.encode(ctx, team, key, v)
	if err != nil {
		return 0, err
	}
	return update(ctx, kv, key, b, rev)
}

// encode returns the team's state bucket and v encoded as the value of
// key: what a write of key needs.
func (s *Store) encode(ctx context.Context, team, key string, v any) (jetstream.KeyValue, []byte, error) {
	kv, err := s.stateBucket(ctx, team)
	if err != nil {
		return nil, nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, nil, fmt.Errorf("encode %s: %w", key, err)
	}
	return kv, b, nil
}

// update is the one compare-and-set write: rev 0 creates the key.
func update(ctx context.Context, kv jetstream.KeyValue, key string, b []byte, rev uint64) (uint64, error) {
	var (
		n   uint64
		err error
	)
	if rev == 0 {
		n, err = kv.Create(ctx, key, b)
	} else {
		n, err = kv.Update(ctx, key, b, rev)
	}
	switch {
	case err == nil:
		return n, nil
	case isConflict(err):
		return 0, fmt.Errorf("write %s: %w", key, ErrConflict)
	default:
		return 0, unavailable("write "+key, err)
	}
}

// get reads key of team's state bucket and decodes it (DecodeRecord). A
// record that does not decode is an ErrDamaged error, returned with the
// record's revision.
func get(ctx context.Context, kv jetstream.KeyValue, team, key string) (Record, uint64, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return Record{}, 0, teambus.NotFoundf("%s not found", key)
	}
	if err != nil {
		return Record{}, 0, unavailable("read "+key, err)
	}
	r, err := DecodeRecord(team, key, e.Value())
	if err != nil {
		d := DamagedRecord{Key: key, Revision: e.Revision(), Reason: reason(err)}
		if key == keyTeam {
			return r, d.Revision, damagedTeamError(team, d)
		}
		return r, d.Revision, damagedError(team, describeKey(key), d)
	}
	return r, e.Revision(), nil
}

// isConflict matches a compare-and-set failure. ErrKeyExists matches the
// same API code as a revision mismatch; replicated streams use 10164.
func isConflict(err error) bool {
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
		return true
	}
	return jserr.WrongLastSequence(err)
}

// MaxRetries bounds Retry.
const MaxRetries = 64

// Retry runs fn until it does not fail with ErrConflict from a stale
// revision, so fn can re-read and decide again. A conflict the transition
// itself reports (a task claimed by someone else) is returned as is: fn
// returns that from its own check, not from a Put, and Retry can not tell
// them apart except through ErrConflict from kv, which it retries.
func Retry(ctx context.Context, fn func() error) error {
	var err error
	for i := 0; i < MaxRetries; i++ {
		err = fn()
		if !errors.Is(err, ErrConflict) {
			return err
		}
		if ctx.Err() != nil {
			break
		}
		backoff(ctx, i)
	}
	return err
}

func backoff(ctx context.Context, i int) {
	if i < 2 {
		return
	}
	d := time.Duration(i) * time.Millisecond
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func unavailable(what string, err error) error {
	// The cause is kept: the CLI says "interrupted" for a Ctrl-C and adds
	// the bus hint to a deadline (cmd/teambus errorLine).
	return teambus.Unavailablef("%s: %w", what, err)
}

// recordKey reports whether key is a team, member, task or activity
// record (a scan reads the other keys too).
func recordKey(key string) bool {
	return key == keyTeam || strings.HasPrefix(key, preMember) || strings.HasPrefix(key, preTask) || strings.HasPrefix(key, preActivity)
}
