package node

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/teambus/teambus/teamapi"
)

func TestLimiter_Budgets(t *testing.T) {
	l := newLimiter(Budgets{Member: 2, Queue: 1, Team: 3, Total: 4, Operator: 1, Beats: 1, MemberWaits: 1, TotalWaits: 2}.withDefaults(0))
	ctx := context.Background()
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	a1 := caller{team: "alpha", member: "tm1"}
	take := func(ctx context.Context, c caller, k class) func() {
		t.Helper()
		rel, err := l.acquire(ctx, c, k)
		if err != nil {
			t.Fatalf("%+v %v: %v", c, k, err)
		}
		return rel
	}
	busy := func(ctx context.Context, c caller, k class) {
		t.Helper()
		if _, err := l.acquire(ctx, c, k); !errors.Is(err, teamapi.ErrBusy) {
			t.Fatalf("%+v %v: %v, want busy", c, k, err)
		}
	}
	r1 := take(ctx, a1, classRequest)
	r2 := take(ctx, a1, classRequest)
	// The third waits in tm1's queue (and gives up, busy); a fourth is
	// past the queue while the third waits.
	waiting := make(chan error, 1)
	go func() {
		rel, err := l.acquire(ctx, a1, classRequest)
		if err == nil {
			rel()
		}
		waiting <- err
	}()
	// Once it waits in tm1's queue (3 pending: 2 running, 1 queued), a
	// fourth is past the queue.
	for {
		l.mu.Lock()
		n := l.members["alpha/tm1"].pending
		l.mu.Unlock()
		if n == 3 {
			break
		}
		runtime.Gosched()
	}
	busy(ctx, a1, classRequest)
	// Another member of the team runs meanwhile, up to the team's budget.
	a2 := take(ctx, caller{team: "alpha", member: "tm2"}, classRequest)
	busy(short, caller{team: "alpha", member: "tm3"}, classRequest)
	// Another team runs; the operator, beats and waits have their own.
	b1 := take(ctx, caller{team: "beta", member: "tm1"}, classRequest)
	op := take(ctx, caller{team: "alpha", operator: true}, classOperator)
	beat := take(ctx, a1, classBeat)
	busy(ctx, a1, classBeat)
	w := take(ctx, a1, classWait)
	busy(ctx, a1, classWait)
	w2 := take(ctx, caller{team: "beta", member: "tm1"}, classWait)
	busy(ctx, caller{team: "gamma", member: "tm1"}, classWait) // total waits
	r1()
	if err := <-waiting; err != nil {
		t.Fatalf("the queued request after a slot freed: %v", err)
	}
	for _, rel := range []func(){r2, a2, b1, op, beat, w, w2} {
		rel()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.members) != 0 || len(l.teams) != 0 || l.waits != 0 || len(l.total) != 0 || len(l.op) != 0 {
		t.Fatalf("budgets not given back: members %v teams %v waits %d total %d op %d", l.members, l.teams, l.waits, len(l.total), len(l.op))
	}
}
