package clock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus/internal/clock"
)

// TestFake_TicksHandedOver: Advance fires timers and ticks in deadline
// order and returns once each was received; a stopped timer's tick is
// withdrawn.
func TestFake_TicksHandedOver(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := clock.NewFake(start)
	tm := f.NewTimer(3 * time.Second)
	tk := f.NewTicker(time.Second)
	got := make(chan string, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case at := <-tk.C():
				got <- "tick " + at.Sub(start).String()
			case at := <-tm.C():
				got <- "timer " + at.Sub(start).String()
				tk.Stop()
				return
			}
		}
	}()
	f.Advance(999 * time.Millisecond)
	if len(got) != 0 {
		t.Fatalf("fired before the first deadline: %q", <-got)
	}
	f.Advance(5 * time.Second)
	<-done
	close(got)
	var all []string
	for s := range got {
		all = append(all, s)
	}
	// The timer was made first: at 3s it fires before the tick, and the
	// receiver's Stop withdraws the tick.
	want := []string{"tick 1s", "tick 2s", "timer 3s"}
	if strings.Join(all, ",") != strings.Join(want, ",") {
		t.Fatalf("got %q, want %q", all, want)
	}
	if got, want := f.Now(), start.Add(5999*time.Millisecond); !got.Equal(want) {
		t.Fatalf("now %v, want %v", got, want)
	}
	if n := f.Timers(); n != 0 {
		t.Fatalf("timers running = %d, want 0", n)
	}
	if tm.Reset(time.Second) {
		t.Fatal("reset of a fired timer reports it running")
	}
	if err := f.WaitTimers(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if !tm.Stop() {
		t.Fatal("stop of a reset timer reports it stopped")
	}
	f.Advance(time.Hour) // nothing running: returns at once
}
