package clock

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Fake is a clock that moves only when Advance is called. Its timers and
// tickers fire as Advance passes their deadlines, in deadline order (ties
// in the order they were made), and Advance hands each tick over: it
// returns once the code under test has received every tick due (a tick of
// a timer stopped meanwhile is withdrawn). So after Advance every tick but
// the last has been handled, and none is lost to a busy receiver. Time
// read while a tick is handled may already be that of the next tick due.
// One goroutine advances the clock; any may read it and make timers.
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
	t := &fakeTimer{f: f, c: make(chan time.Time), period: period, stop: make(chan struct{})}
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

// disarm takes t off the list of running timers; f.mu is held. It reports
// whether t was running.
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

// next returns the running timer due first at or before end; f.mu is held.
func (f *Fake) next(end time.Time) *fakeTimer {
	var first *fakeTimer
	for _, t := range f.waiters {
		if !t.when.After(end) && (first == nil || t.when.Before(first.when)) {
			first = t
		}
	}
	return first
}

// Advance moves the fake time forward by d, firing every timer and tick
// whose deadline it passes, in deadline order, each handed to its receiver
// before the next fires.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	end := f.now.Add(d)
	for t := f.next(end); t != nil; t = f.next(end) {
		when, stop := t.when, t.stop
		f.now = when
		if t.period > 0 {
			t.when = when.Add(t.period)
		} else {
			f.disarm(t)
		}
		f.mu.Unlock()
		select {
		case t.c <- when:
		case <-stop: // stopped or reset meanwhile: the tick is withdrawn
		}
		f.mu.Lock()
	}
	f.now = end
	f.mu.Unlock()
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
	stop   chan struct{} // closed by Stop and Reset: withdraws a tick being handed over
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.withdraw()
	return t.f.disarm(t)
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	was := t.active
	t.withdraw()
	t.f.arm(t, d)
	return was
}

func (t *fakeTimer) withdraw() {
	close(t.stop)
	t.stop = make(chan struct{})
}
