package clock_test

import (
	"context"
	"testing"
	"time"

	"github.com/teambus/teambus/internal/clock"
)

func TestFake_TimersFireInOrder(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := clock.NewFake(start)
	tm := f.NewTimer(3 * time.Second)
	tk := f.NewTicker(time.Second)
	f.Advance(999 * time.Millisecond)
	select {
	case <-tk.C():
		t.Fatal("ticker fired before its interval")
	default:
	}
	f.Advance(time.Millisecond)
	if got := <-tk.C(); !got.Equal(start.Add(time.Second)) {
		t.Fatalf("tick at %v, want %v", got, start.Add(time.Second))
	}
	f.Advance(2 * time.Second)
	if got := <-tm.C(); !got.Equal(start.Add(3 * time.Second)) {
		t.Fatalf("timer at %v", got)
	}
	if got, want := f.Now(), start.Add(3*time.Second); !got.Equal(want) {
		t.Fatalf("now %v, want %v", got, want)
	}
	if got := f.Timers(); got != 1 {
		t.Fatalf("timers = %d, want the ticker only", got)
	}
	if tm.Reset(time.Second) {
		t.Fatal("reset of a fired timer reports active")
	}
	if !tm.Stop() {
		t.Fatal("stop of a reset timer reports inactive")
	}
	tk.Stop()
	if err := f.WaitTimers(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
}
