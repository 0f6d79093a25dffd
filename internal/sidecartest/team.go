package sidecartest

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/internal/clock"
)

// Mail is a message a sidecar sent (Notify).
type Mail struct {
	From  string
	Epoch int64
	To    string
	Type  teambus.MessageType
	ID    string
	Body  string
	Data  any
}

// Team is an in-memory team. The zero value is not usable: use New.
type Team struct {
	clk *clock.Fake

	mu       sync.Mutex
	changed  chan struct{}
	team     *teambus.Team
	members  map[string]*teambus.Member
	tasks    map[string]*teambus.Task
	activity map[string]time.Time
	mail     []Mail
	mailIDs  map[string]bool
	beats    map[string]beat
	rev      uint64
	stopped  map[string]int // heartbeat keys removed, by member
	stored   map[string]int // heartbeats stored, by member
	held     map[string][]teambus.Message
	released map[string][]teambus.Message
	autoCP   map[string]int
	calls    map[string]int
	events   []string
	outcomes []string
	fail     map[string]error

	beatWatch  []chan teambus.BeatEvent
	fences     map[string]chan error
	stateWatch map[string][]chan teambus.StateChange
	inboxes    map[string]chan teambus.Delivery
	inboxStop  map[string]int
}

type beat struct {
	hb  teambus.Heartbeat
	ttl time.Duration
	rev uint64
}

// New returns an active team id with policy pol and members that have not
// registered yet (no session), on clk.
func New(clk *clock.Fake, id string, pol teambus.Policy, members ...string) *Team {
	now := clk.Now().UTC()
	t := &Team{
		clk: clk, changed: make(chan struct{}),
		team:     &teambus.Team{ID: id, Status: teambus.TeamActive, Policy: pol, CreatedAt: now, UpdatedAt: now},
		members:  map[string]*teambus.Member{},
		tasks:    map[string]*teambus.Task{},
		activity: map[string]time.Time{},
		mailIDs:  map[string]bool{}, beats: map[string]beat{}, stopped: map[string]int{}, stored: map[string]int{},
		held: map[string][]teambus.Message{}, released: map[string][]teambus.Message{},
		autoCP: map[string]int{}, calls: map[string]int{}, fail: map[string]error{},
		stateWatch: map[string][]chan teambus.StateChange{},
		inboxes:    map[string]chan teambus.Delivery{}, inboxStop: map[string]int{},
	}
	for _, m := range members {
		t.members[m] = &teambus.Member{ID: m, Status: teambus.MemberSpawned, CreatedAt: now, UpdatedAt: now}
	}
	return t
}

// clone deep-copies a record, as a read from the bucket would.
func clone[T any](v *T) *T {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	out := new(T)
	if err := json.Unmarshal(b, out); err != nil {
		panic(err)
	}
	return out
}

// call runs fn as the sidecars' call method under the team's lock: it
// counts the call, returns the failure Fail set for method instead of
// running fn, and wakes Wait after.
func call[R any](t *Team, method string, fn func() (R, error)) (R, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	defer t.signal()
	t.calls[method]++
	if err := t.fail[method]; err != nil {
		var zero R
		return zero, err
	}
	return fn()
}

// do is call for a method that returns only an error.
func (t *Team) do(method string, fn func() error) error {
	_, err := call(t, method, func() (struct{}, error) { return struct{}{}, fn() })
	return err
}

// read returns what fn reads under the team's lock.
func read[R any](t *Team, fn func() R) R {
	t.mu.Lock()
	defer t.mu.Unlock()
	return fn()
}

// signal wakes Wait; t.mu is held.
func (t *Team) signal() {
	close(t.changed)
	t.changed = make(chan struct{})
}

func (t *Team) now() time.Time { return t.clk.Now().UTC() }

// member returns member's record; t.mu is held.
func (t *Team) member(team, member string) (*teambus.Member, error) {
	m, ok := t.members[member]
	if !ok {
		return nil, teambus.NotFoundf("team %s has no member %s", team, member)
	}
	return m, nil
}

// --- the sidecars' side (lead.Team, teammate.Team) ---

// Now returns the fake clock's time.
func (t *Team) Now() time.Time { return t.now() }

// Resume attaches session as the team's lead: lead epoch up.
func (t *Team) Resume(_ context.Context, team, session string, force, asLead bool) (*teambus.Report, error) {
	return call(t, "Resume", func() (*teambus.Report, error) {
		decision := "attach"
		switch {
		case t.team.LeadSession == session:
			decision = "reattach"
		case t.team.LeadSession != "":
			decision = "takeover"
		}
		if decision != "reattach" {
			t.team.LeadEpoch++
			t.team.LeadSession = session
		}
		return t.report(decision), nil
	})
}

func (t *Team) report(decision string) *teambus.Report {
	return &teambus.Report{Team: t.team.ID, Status: t.team.Status, Decision: decision, LeadSession: t.team.LeadSession, LeadEpoch: t.team.LeadEpoch,
		LeadTimeoutDetectedAt: t.team.LeadTimeoutDetectedAt, Took: "0s"}
}

// Probe reports the team.
func (t *Team) Probe(_ context.Context, team string) (*teambus.Report, error) {
	return call(t, "Probe", func() (*teambus.Report, error) { return t.report("resumable"), nil })
}

// Join registers a new incarnation of member.
func (t *Team) Join(_ context.Context, team, member, session string) (*teambus.Member, error) {
	return call(t, "Join", func() (*teambus.Member, error) {
		m, err := t.member(team, member)
		if err != nil {
			return nil, err
		}
		m.Register(session, t.now())
		return clone(m), nil
	})
}

// Team returns the team record.
func (t *Team) Team(_ context.Context, team string) (*teambus.Team, error) {
	return call(t, "Team", func() (*teambus.Team, error) { return clone(t.team), nil })
}

// Member returns a member record.
func (t *Team) Member(_ context.Context, team, member string) (*teambus.Member, error) {
	return call(t, "Member", func() (*teambus.Member, error) {
		m, err := t.member(team, member)
		if err != nil {
			return nil, err
		}
		return clone(m), nil
	})
}

// State returns every record.
func (t *Team) State(_ context.Context, team string) (*teambus.State, error) {
	return call(t, "State", func() (*teambus.State, error) { return t.state(), nil })
}

func (t *Team) state() *teambus.State {
	s := &teambus.State{Team: clone(t.team), Members: map[string]*teambus.Member{}, Tasks: map[string]*teambus.Task{}, Activity: map[string]time.Time{}}
	for id, m := range t.members {
		s.Members[id] = clone(m)
	}
	for id, k := range t.tasks {
		s.Tasks[id] = clone(k)
	}
	maps.Copy(s.Activity, t.activity)
	return s
}

// UpdateTeam applies fn to a copy of the team record and stores it when fn
// reports a change.
func (t *Team) UpdateTeam(_ context.Context, team string, fn func(*teambus.Team) (bool, error)) (*teambus.Team, error) {
	return call(t, "UpdateTeam", func() (*teambus.Team, error) {
		c := clone(t.team)
		changed, err := fn(c)
		if err != nil {
			return nil, err
		}
		if changed {
			t.team = c
		}
		return clone(t.team), nil
	})
}

// UpdateMember applies fn to a copy of the member record, if it is of
// epoch (0: any), and stores it when fn reports a change.
func (t *Team) UpdateMember(_ context.Context, team, member string, epoch int64, fn func(*teambus.Member) bool) error {
	return t.do("UpdateMember", func() error { return t.updateMember(team, member, epoch, fn) })
}

func (t *Team) updateMember(team, member string, epoch int64, fn func(*teambus.Member) bool) error {
	m, err := t.member(team, member)
	if err != nil || (epoch != 0 && m.Epoch != epoch) {
		return err
	}
	if c := clone(m); fn(c) {
		t.members[member] = c
	}
	return nil
}

// SetMemberStatus sets the status of member's incarnation epoch, unless it
// crashed, is paused or shut down.
func (t *Team) SetMemberStatus(_ context.Context, team, member string, epoch int64, status teambus.MemberStatus) error {
	return t.do("SetMemberStatus", func() error {
		return t.updateMember(team, member, epoch, func(m *teambus.Member) bool {
			switch m.Status {
			case status, teambus.MemberCrashed, teambus.MemberPaused, teambus.MemberShutdown:
				return false
			}
			m.Status = status
			m.ZombieSince = nil
			if status == teambus.MemberZombie {
				m.ZombieSince = teambus.TimePtr(t.now())
			}
			return true
		})
	})
}

// Notify records mail; a second message with the same id is a duplicate
// and dropped, as the mailbox's deduplication does.
func (t *Team) Notify(_ context.Context, team, from string, epoch int64, to string, typ teambus.MessageType, id, body string, data any) error {
	return t.do("Notify", func() error {
		if !t.mailIDs[id] {
			t.mailIDs[id] = true
			t.mail = append(t.mail, Mail{From: from, Epoch: epoch, To: to, Type: typ, ID: id, Body: body, Data: data})
		}
		return nil
	})
}

// MarkCrashed records the crash of member's incarnation epoch, once: crash
// count up, the member crashed, or past the crash limit paused with an
// escalation pending; its tasks follow (ReconcileMember).
func (t *Team) MarkCrashed(_ context.Context, team, member string, epoch int64, reason string) (teambus.CrashResult, error) {
	return call(t, "MarkCrashed", func() (res teambus.CrashResult, err error) {
		m, err := t.member(team, member)
		if err != nil {
			return res, err
		}
		if m.Epoch != epoch || m.CrashedEpoch == epoch || m.Status == teambus.MemberShutdown {
			res.Crashes = m.CrashCount
			return res, nil
		}
		m.CrashCount++
		m.CrashedEpoch = epoch
		m.ZombieSince = nil
		res.Counted, res.Crashes = true, m.CrashCount
		if m.CrashCount > t.team.Policy.CrashLimit {
			m.Status, m.EscalatePending, res.Paused = teambus.MemberPaused, true, true
		} else {
			m.Status = teambus.MemberCrashed
		}
		res.Tasks = t.reconcile(member, reason)
		t.events = append(t.events, eventlog.EvAgentCrashed)
		return res, nil
	})
}

// ReconcileMember requeues (crashed) or pauses (paused) member's tasks.
func (t *Team) ReconcileMember(_ context.Context, team, member, reason string) ([]string, error) {
	return call(t, "ReconcileMember", func() ([]string, error) { return t.reconcile(member, reason), nil })
}

func (t *Team) reconcile(member, reason string) []string {
	m := t.members[member]
	if m == nil || (m.Status != teambus.MemberCrashed && m.Status != teambus.MemberPaused) {
		return nil
	}
	var ids []string
	for _, k := range t.state().MemberTasks(member) {
		task := t.tasks[k.ID]
		if m.Status == teambus.MemberPaused {
			teambus.Pause(task, reason, t.now())
		} else if teambus.Requeue(task, t.tasks, t.now()) != nil {
			continue
		}
		task.Crashes++
		ids = append(ids, k.ID)
	}
	return ids
}

// PromoteReady does nothing: the in-memory team has no dependencies.
func (t *Team) PromoteReady(context.Context, string) ([]string, error) {
	return call(t, "PromoteReady", func() ([]string, error) { return nil, nil })
}

// ReleaseHeld releases member's held mail, in order, and clears its held
// mark.
func (t *Team) ReleaseHeld(_ context.Context, team, member string) ([]teambus.Message, error) {
	return call(t, "ReleaseHeld", func() ([]teambus.Message, error) {
		out := t.held[member]
		delete(t.held, member)
		t.released[member] = append(t.released[member], out...)
		if m := t.members[member]; m != nil {
			m.HeldSince = nil
		}
		return out, nil
	})
}

// HeldPending returns how many held messages of member wait.
func (t *Team) HeldPending(_ context.Context, team, member string) (uint64, error) {
	return call(t, "HeldPending", func() (uint64, error) { return uint64(len(t.held[member])), nil })
}

// AutoCheckpoint counts an automatic checkpoint of member's task; without
// a task it fails with ErrState, as the service does.
func (t *Team) AutoCheckpoint(_ context.Context, team, member, session string, files []string, lastAction string) error {
	return t.do("AutoCheckpoint", func() error {
		ts := t.state().MemberTasks(member)
		if len(ts) == 0 {
			return teambus.Statef("%s holds no task to checkpoint", member)
		}
		t.autoCP[member]++
		t.tasks[ts[0].ID].Checkpoint = &teambus.Checkpoint{Member: member, LastAction: lastAction, Files: files, Auto: true, At: t.now()}
		return nil
	})
}

// ReleaseTask gives member's task back to the queue.
func (t *Team) ReleaseTask(_ context.Context, team, member, session, task string) error {
	return t.do("ReleaseTask", func() error {
		k, ok := t.tasks[task]
		if !ok {
			return teambus.NotFoundf("no task %s", task)
		}
		return teambus.Release(k, member, t.tasks, t.now())
	})
}

// LogEvent records the event type.
func (t *Team) LogEvent(_ context.Context, team, typ, agent string, data any) {
	_ = t.do("LogEvent", func() error { t.events = append(t.events, typ); return nil })
}

// StartSession returns an end that records the run's outcome.
func (t *Team) StartSession(_ context.Context, team, member string, epoch int64, data map[string]any) func(context.Context, string, error) {
	return func(_ context.Context, outcome string, _ error) {
		_ = t.do("EndSession", func() error { t.outcomes = append(t.outcomes, outcome); return nil })
	}
}

// Beat stores hb, as the team service keeps the latest beat of each
// member.
func (t *Team) Beat(_ context.Context, team string, hb *teambus.Heartbeat) error {
	return t.do("Beat", func() error {
		t.rev++
		t.beats[hb.Member] = beat{hb: *hb, rev: t.rev}
		t.stored[hb.Member]++
		return nil
	})
}

// EndBeat removes hb's heartbeat key unless a newer incarnation holds it.
func (t *Team) EndBeat(_ context.Context, team string, hb *teambus.Heartbeat) error {
	return t.do("EndBeat", func() error {
		if cur, ok := t.beats[hb.Member]; ok && cur.hb.Epoch <= hb.Epoch {
			delete(t.beats, hb.Member)
			t.stopped[hb.Member]++
		}
		return nil
	})
}

// Fences returns a channel of the fence notices PushFence sends to
// member.
func (t *Team) Fences(_ context.Context, team, member, session string, epoch int64) (<-chan error, error) {
	return call(t, "Fences", func() (<-chan error, error) {
		if t.fences == nil {
			t.fences = map[string]chan error{}
		}
		ch, ok := t.fences[member]
		if !ok {
			ch = make(chan error, 4)
			t.fences[member] = ch
		}
		return ch, nil
	})
}

// PushFence tells member's sidecar that its incarnation is fenced, as the
// team service does when it drops a stale beat.
func (t *Team) PushFence(member string, err error) {
	t.mu.Lock()
	if t.fences == nil {
		t.fences = map[string]chan error{}
	}
	ch, ok := t.fences[member]
	if !ok {
		ch = make(chan error, 4)
		t.fences[member] = ch
	}
	t.mu.Unlock()
	ch <- err
}

// WatchBeats returns the channel PushBeat writes to (only is not applied:
// the sidecars filter what they are sent as well).
func (t *Team) WatchBeats(ctx context.Context, team string, updatesOnly bool, only ...string) (<-chan teambus.BeatEvent, error) {
	return call(t, "WatchBeats", func() (<-chan teambus.BeatEvent, error) {
		// Unbuffered: PushBeat returns once the sidecar took the event.
		ch := make(chan teambus.BeatEvent)
		t.beatWatch = append(t.beatWatch, ch)
		return ch, nil
	})
}

// WatchState returns a channel with the team record and member's record,
// then what PushState writes.
func (t *Team) WatchState(ctx context.Context, team, member string) (<-chan teambus.StateChange, error) {
	return call(t, "WatchState", func() (<-chan teambus.StateChange, error) {
		ch := make(chan teambus.StateChange, 64)
		ch <- teambus.StateChange{Team: clone(t.team)}
		if m, ok := t.members[member]; ok {
			ch <- teambus.StateChange{Member: clone(m)}
		}
		t.stateWatch[member] = append(t.stateWatch[member], ch)
		return ch, nil
	})
}

// ConsumeSidecar returns member's sidecar inbox, which Deliver writes to;
// stop gives back (naks) the deliveries passed to it and those not taken.
func (t *Team) ConsumeSidecar(ctx context.Context, team, member string) (<-chan teambus.Delivery, func(...teambus.Delivery), error) {
	ch, err := call(t, "ConsumeSidecar", func() (chan teambus.Delivery, error) { return t.inbox(member), nil })
	if err != nil {
		return nil, nil, err
	}
	var once sync.Once
	stop := func(back ...teambus.Delivery) {
		once.Do(func() {
			for _, d := range teambus.TakeBuffered(ch, back) {
				_ = d.Nak(context.Background())
			}
			_ = t.do("StopInbox", func() error { t.inboxStop[member]++; return nil })
		})
	}
	return ch, stop, nil
}

func (t *Team) inbox(member string) chan teambus.Delivery {
	ch, ok := t.inboxes[member]
	if !ok {
		ch = make(chan teambus.Delivery, 64)
		t.inboxes[member] = ch
	}
	return ch
}

// --- the test's side ---

// Fail makes every later call of method fail with err (nil: succeed).
func (t *Team) Fail(method string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.fail[method] = err
}

// Calls returns how often method was called.
func (t *Team) Calls(method string) int { return read(t, func() int { return t.calls[method] }) }

// Edit changes the records under the team's lock.
func (t *Team) Edit(fn func(team *teambus.Team, members map[string]*teambus.Member, tasks map[string]*teambus.Task, activity map[string]time.Time)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fn(t.team, t.members, t.tasks, t.activity)
	t.signal()
}

// Snapshot returns a copy of every record.
func (t *Team) Snapshot() *teambus.State { return read(t, func() *teambus.State { return t.state() }) }

// AddTask gives member task id, in progress for its current incarnation.
func (t *Team) AddTask(id, member string) {
	t.Edit(func(_ *teambus.Team, ms map[string]*teambus.Member, ts map[string]*teambus.Task, _ map[string]time.Time) {
		now := t.now()
		ts[id] = &teambus.Task{ID: id, Status: teambus.TaskInProgress, AssignedTo: member, Epoch: ms[member].Epoch, CreatedAt: now, UpdatedAt: now, StartedAt: teambus.TimePtr(now)}
	})
}

// Hold adds a held message from member (sent in zombie mode).
func (t *Team) Hold(member, body string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.held[member] = append(t.held[member], teambus.Message{From: member, To: teambus.Lead, Type: teambus.MsgInfo, Body: body, HeldSince: &now})
	if m := t.members[member]; m != nil && m.HeldSince == nil {
		m.HeldSince = teambus.TimePtr(now)
	}
	t.signal()
}

// Released returns the held mail of member released so far.
func (t *Team) Released(member string) []teambus.Message {
	return read(t, func() []teambus.Message { return slices.Clone(t.released[member]) })
}

// PushBeat hands a heartbeat event of member (teambus.Lead for the lead)
// to every heartbeat watch: alive with epoch, or expired. It returns once
// each watcher took it, so a clock advanced next comes after it; it fails
// the test when a watcher does not take it within 5s (a hang).
func (t *Team) PushBeat(tb testing.TB, member string, alive bool, epoch int64) {
	tb.Helper()
	t.mu.Lock()
	ws := slices.Clone(t.beatWatch)
	t.mu.Unlock()
	if len(ws) == 0 {
		tb.Fatalf("heartbeat event of %s: nobody watches", member)
	}
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	for _, ch := range ws {
		select {
		case ch <- teambus.BeatEvent{Member: member, Alive: alive, Epoch: epoch}:
		case <-deadline.C:
			tb.Fatalf("heartbeat event of %s not taken in 5s", member)
		}
	}
}

// PushState writes the current team record, or with member its record, to
// the state watches of member (every watch for the team record).
func (t *Team) PushState(member string) {
	t.mu.Lock()
	var (
		ws []chan teambus.StateChange
		ch teambus.StateChange
	)
	if member == "" {
		for _, w := range t.stateWatch {
			ws = append(ws, w...)
		}
		ch.Team = clone(t.team)
	} else {
		ws = slices.Clone(t.stateWatch[member])
		ch.Member = clone(t.members[member])
	}
	t.mu.Unlock()
	for _, w := range ws {
		w <- ch
	}
}

// Settled is what became of a delivered message.
type Settled struct {
	t     *Team
	state string // "", "ack", "nak", "term"
	n     int
}

// Ack records an ack.
func (s *Settled) Ack(context.Context) error { s.set("ack"); return nil }

// Nak records a nak.
func (s *Settled) Nak(context.Context) error { s.set("nak"); return nil }

// Term records a term.
func (s *Settled) Term(context.Context) error { s.set("term"); return nil }

func (s *Settled) set(state string) {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	s.state = state
	s.n++
	s.t.signal()
}

// State returns "ack", "nak", "term", or "" when not settled yet.
func (s *Settled) State() string {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	return s.state
}

// Deliver puts msg (or, with err, an unreadable message) in member's
// sidecar inbox.
func (t *Team) Deliver(member string, msg teambus.Message, err error) *Settled {
	s := &Settled{t: t}
	t.mu.Lock()
	ch := t.inbox(member)
	t.mu.Unlock()
	ch <- teambus.Delivery{Msg: msg, Err: err, Settle: s}
	return s
}

// InboxStops returns how often member's sidecar inbox was stopped.
func (t *Team) InboxStops(member string) int {
	return read(t, func() int { return t.inboxStop[member] })
}

// Mail returns the mail sent so far of type typ ("" for all).
func (t *Team) Mail(typ teambus.MessageType) []Mail {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Mail
	for _, m := range t.mail {
		if typ == "" || m.Type == typ {
			out = append(out, m)
		}
	}
	return out
}

// Beating returns member's stored heartbeat, if any.
func (t *Team) Beating(member string) (teambus.Heartbeat, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b, ok := t.beats[member]
	return b.hb, ok
}

// Beats returns how many heartbeats of member were stored.
func (t *Team) Beats(member string) int { return read(t, func() int { return t.stored[member] }) }

// BeatStops returns how often member's heartbeat key was removed.
func (t *Team) BeatStops(member string) int { return read(t, func() int { return t.stopped[member] }) }

// AutoCheckpoints returns how many automatic checkpoints member took.
func (t *Team) AutoCheckpoints(member string) int {
	return read(t, func() int { return t.autoCP[member] })
}

// Events returns the event types logged.
func (t *Team) Events() []string { return read(t, func() []string { return slices.Clone(t.events) }) }

// Outcomes returns the outcomes of the ended event log sessions.
func (t *Team) Outcomes() []string {
	return read(t, func() []string { return slices.Clone(t.outcomes) })
}

// Wait waits until cond holds, re-checking it after every change of the
// team; it fails the test after 5s of wall time (a hang, not a timing).
func (t *Team) Wait(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	for {
		t.mu.Lock()
		ch := t.changed
		t.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			tb.Fatalf("waited 5s for %s", what)
		}
	}
}
