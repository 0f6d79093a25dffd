package clock

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Fake is a clock that moves only when Advance is called. Its timers and
// tickers fire, in deadline order, as Advance passes their deadlines; like
// the real ones, a tick nobody took is dropped. It is safe for concurrent
// use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*fakeTimer
	changed chan struct{} // closed and replaced when a timer is made or stopped
}

// NewFake returns a fake clock reading now.
func NewFake(now time.Time) *Fake {
	return &Fake{now: now, changed: make(chan struct{})}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a timer firing once d after the fake now.
func (f *Fake) NewTimer(d time.Duration) Timer { return f.add(d, 0) }

// NewTicker returns a ticker firing every d of fake time.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive ticker interval")
	}
	return fakeTicker{f.add(d, d)}
}

func (f *Fake) add(d, period time.Duration) *fakeTimer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{f: f, c: make(chan time.Time, 1), period: period}
	f.arm(t, d)
	return t
}

// arm (re)starts t at d from now; f.mu is held.
func (f *Fake) arm(t *fakeTimer, d time.Duration) {
	t.when = f.now.Add(d)
	if !t.active {
		t.active = true
		f.waiters = append(f.waiters, t)
	}
	f.signal()
}

// disarm stops t; f.mu is held. It reports whether t was active.
func (f *Fake) disarm(t *fakeTimer) bool {
	if !t.active {
		return false
	}
	t.active = false
	for i, w := range f.waiters {
		if w == t {
			f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
			break
		}
	}
	f.signal()
	return true
}

func (f *Fake) signal() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Advance moves the fake time forward by d, firing every timer and tick
// whose deadline it passes, in deadline order.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	end := f.now.Add(d)
	for {
		sort.SliceStable(f.waiters, func(i, j int) bool { return f.waiters[i].when.Before(f.waiters[j].when) })
		if len(f.waiters) == 0 || f.waiters[0].when.After(end) {
			break
		}
		t := f.waiters[0]
		f.now = t.when
		select {
		case t.c <- t.when:
		default: // a tick nobody took is dropped
		}
		if t.period > 0 {
			t.when = t.when.Add(t.period)
		} else {
			f.disarm(t)
		}
	}
	f.now = end
}

// Timers returns how many timers and tickers are running.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}

// WaitTimers waits until at least n timers and tickers are running: the
// code under test has armed what the test is about to fire.
func (f *Fake) WaitTimers(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		got, ch := len(f.waiters), f.changed
		f.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%d timers running, want %d: %w", got, n, ctx.Err())
		}
	}
}

type fakeTicker struct{ t *fakeTimer }

func (k fakeTicker) C() <-chan time.Time { return k.t.c }
func (k fakeTicker) Stop()               { k.t.Stop() }

type fakeTimer struct {
	f      *Fake
	c      chan time.Time
	when   time.Time
	period time.Duration
	active bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.drain()
	return t.f.disarm(t)
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	was := t.active
	t.drain()
	t.f.arm(t, d)
	return was
}

// drain drops a fired value not yet taken, as Go 1.23 timers do on Stop
// and Reset.
func (t *fakeTimer) drain() {
	select {
	case <-t.c:
	default:
	}
}
