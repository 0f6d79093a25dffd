package node

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/teambus/teambus/teamapi"
)

// Budgets bound what the team service runs at once, so that one member,
// or one team, can at most slow itself: a member's requests beyond its
// own budget wait in its own queue, and past that queue are answered
// "busy" at once; a team's beyond the team's budget wait for the team.
// The operator's requests and the sidecars' heartbeats have budgets of
// their own and never wait behind members'. An inbox read that waits for
// mail (a long-poll) holds no request slot at all: it counts against the
// long-poll budgets, and past them it is answered "busy" at once.
type Budgets struct {
	// Member is how many requests of one member run at once.
	Member int
	// Queue is how many more of one member may wait for a slot; past it
	// the request is answered busy.
	Queue int
	// Team is how many requests of one team's members run at once.
	Team int
	// Total is how many members' requests run at once on this instance.
	Total int
	// Operator is how many of the operator's requests run at once.
	Operator int
	// Beats is how many heartbeats of one member run at once (more are
	// answered busy: the next beat follows anyway).
	Beats int
	// MemberWaits and TotalWaits are how many long-polls one member, and
	// all together, hold at once.
	MemberWaits, TotalWaits int
}

// Default budgets.
const (
	DefaultMemberBudget      = 16
	DefaultQueueBudget       = 256
	DefaultTeamBudget        = 64
	DefaultOperatorBudget    = 128
	DefaultBeatBudget        = 2
	DefaultMemberWaitsBudget = 8
	DefaultTotalWaitsBudget  = 8192
)

func (b Budgets) withDefaults(total int) Budgets {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&b.Member, DefaultMemberBudget)
	def(&b.Queue, DefaultQueueBudget)
	def(&b.Team, DefaultTeamBudget)
	def(&b.Total, total)
	def(&b.Operator, DefaultOperatorBudget)
	def(&b.Beats, DefaultBeatBudget)
	def(&b.MemberWaits, DefaultMemberWaitsBudget)
	def(&b.TotalWaits, DefaultTotalWaitsBudget)
	return b
}

// class is how a request is budgeted.
type class int

const (
	classRequest  class = iota // a member's request: member, team, total
	classOperator              // the operator's own budget
	classBeat                  // a heartbeat: the member's beat budget
	classWait                  // a long-poll: the wait budgets
)

// classify decides the budget of a request of verb by c.
func classify(c caller, verb string, data []byte) class {
	switch {
	case c.operator:
		return classOperator
	case verb == teamapi.VerbHeartbeat:
		return classBeat
	case verb == teamapi.VerbInbox && waits(data):
		return classWait
	}
	return classRequest
}

// waits reports whether an inbox request asks to wait for mail. A request
// that does not decode is budgeted as a plain one (and refused by its
// verb).
func waits(data []byte) bool {
	var r struct {
		WaitMS int64 `json:"wait_ms"`
	}
	return json.Unmarshal(data, &r) == nil && r.WaitMS > 0
}

// limiter holds the budgets' counters.
type limiter struct {
	b     Budgets
	total chan struct{}
	op    chan struct{}

	mu      sync.Mutex
	members map[string]*memberSlots // team/member
	teams   map[string]*teamSlots
	waits   int
}

type memberSlots struct {
	run     chan struct{}
	pending int // running and waiting requests
	beats   int
	waits   int
}

type teamSlots struct {
	run  chan struct{}
	refs int
}

func newLimiter(b Budgets) *limiter {
	return &limiter{b: b, total: make(chan struct{}, b.Total), op: make(chan struct{}, b.Operator),
		members: map[string]*memberSlots{}, teams: map[string]*teamSlots{}}
}

// busyf is the answer to a request past a budget: transient, nothing ran.
func busyf(format string, args ...any) error { return teamapi.Busyf(format, args...) }

// acquire takes the budget of a request of class k by c, waiting (for a
// member's request within its queue, for the operator's) until ctx is
// done; it returns the release, or a busy error at once.
func (l *limiter) acquire(ctx context.Context, c caller, k class) (func(), error) {
	switch k {
	case classOperator:
		select {
		case l.op <- struct{}{}:
			return func() { <-l.op }, nil
		case <-ctx.Done():
			return nil, busyf("the team service is busy with the operator's requests: retry in a moment")
		}
	case classBeat:
		return l.count(c, func(m *memberSlots) *int { return &m.beats }, l.b.Beats, "heartbeats")
	case classWait:
		l.mu.Lock()
		if l.waits >= l.b.TotalWaits {
			l.mu.Unlock()
			return nil, busyf("the team service holds %d inbox waits: read without --wait, or retry in a moment", l.b.TotalWaits)
		}
		l.waits++
		l.mu.Unlock()
		rel, err := l.count(c, func(m *memberSlots) *int { return &m.waits }, l.b.MemberWaits, "inbox waits")
		if err != nil {
			l.mu.Lock()
			l.waits--
			l.mu.Unlock()
			return nil, err
		}
		return func() {
			rel()
			l.mu.Lock()
			l.waits--
			l.mu.Unlock()
		}, nil
	}
	return l.request(ctx, c)
}

// count takes one of max of a member's counter, or answers busy.
func (l *limiter) count(c caller, ctr func(*memberSlots) *int, max int, what string) (func(), error) {
	key := c.team + "/" + c.member
	l.mu.Lock()
	m := l.member(key)
	n := ctr(m)
	if *n >= max {
		l.mu.Unlock()
		return nil, busyf("%s of team %s has %d %s in flight, its limit: retry when one ends", c.member, c.team, max, what)
	}
	*n++
	m.pending++
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		*n--
		l.done(key, m)
		l.mu.Unlock()
	}, nil
}

// request takes a member's slot, then its team's, then one of all, in
// that order, waiting in the member's own queue.
func (l *limiter) request(ctx context.Context, c caller) (func(), error) {
	key := c.team + "/" + c.member
	l.mu.Lock()
	m := l.member(key)
	if m.pending >= l.b.Member+l.b.Queue {
		l.mu.Unlock()
		return nil, busyf("%s of team %s has %d requests waiting for the team service: retry when they end", c.member, c.team, m.pending)
	}
	m.pending++
	t := l.teams[c.team]
	if t == nil {
		t = &teamSlots{run: make(chan struct{}, l.b.Team)}
		l.teams[c.team] = t
	}
	t.refs++
	l.mu.Unlock()
	undo := func(held ...chan struct{}) {
		for _, ch := range held {
			<-ch
		}
		l.mu.Lock()
		l.done(key, m)
		if t.refs--; t.refs == 0 {
			delete(l.teams, c.team)
		}
		l.mu.Unlock()
	}
	var held []chan struct{}
	for _, ch := range []chan struct{}{m.run, t.run, l.total} {
		select {
		case ch <- struct{}{}:
			held = append(held, ch)
		case <-ctx.Done():
			undo(held...)
			return nil, busyf("the team service had no room for a request of %s of team %s in time: retry in a moment", c.member, c.team)
		}
	}
	return func() { undo(held...) }, nil
}

func (l *limiter) member(key string) *memberSlots {
	m := l.members[key]
	if m == nil {
		m = &memberSlots{run: make(chan struct{}, l.b.Member)}
		l.members[key] = m
	}
	return m
}

// done ends one pending request of the member at key; l.mu is held.
func (l *limiter) done(key string, m *memberSlots) {
	if m.pending--; m.pending == 0 {
		delete(l.members, key)
	}
}
