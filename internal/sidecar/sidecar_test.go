package sidecar

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/internal/clock"
	"github.com/teambus/teambus/proc"
)

type exitedNever struct{}

func (exitedNever) Exited(context.Context, int) <-chan struct{} { return nil }

func TestDefaults(t *testing.T) {
	log, clk, procs := Defaults(nil, nil, nil)
	if log == nil {
		t.Error("logger = nil, want one that discards")
	}
	if _, ok := clk.(clock.Real); !ok {
		t.Errorf("clock = %T, want clock.Real", clk)
	}
	if _, ok := procs.(proc.Watcher); !ok {
		t.Errorf("process watcher = %T, want proc.Watcher", procs)
	}

	wantLog, wantClk := slog.Default(), clock.NewFake(time.Unix(0, 0))
	log, clk, procs = Defaults(wantLog, wantClk, exitedNever{})
	if log != wantLog || clk != wantClk {
		t.Errorf("Defaults kept %p %v, want the given %p %v", log, clk, wantLog, wantClk)
	}
	if _, ok := procs.(exitedNever); !ok {
		t.Errorf("process watcher = %T, want the given one", procs)
	}
}

// beats answers each Beat with the next revision, or fails with err.
type beats struct {
	last uint64 // the rev of the last call
	next uint64
	err  error
}

func (b *beats) Beat(_ context.Context, _ string, _ *teambus.Heartbeat, _ time.Duration, rev uint64) (uint64, error) {
	b.last = rev
	if b.err != nil {
		return 0, b.err
	}
	b.next++
	return b.next, nil
}

func (*beats) WatchBeats(context.Context, string, bool, ...string) (<-chan teambus.BeatEvent, error) {
	return nil, nil
}

func TestHeart(t *testing.T) {
	ctx := context.Background()
	b := &beats{next: 6}
	var h Heart
	hb := &teambus.Heartbeat{Member: "tm1"}
	if err := h.Beat(ctx, b, "t", hb, time.Second); err != nil || b.last != 0 || h.Rev() != 7 {
		t.Fatalf("first beat: err %v, sent rev %d, rev %d; want nil, 0, 7", err, b.last, h.Rev())
	}
	if err := h.Beat(ctx, b, "t", hb, time.Second); err != nil || b.last != 7 || h.Rev() != 8 {
		t.Fatalf("second beat: err %v, sent rev %d, rev %d; want nil, 7, 8", err, b.last, h.Rev())
	}
	b.err = teambus.ErrFenced
	if err := h.Beat(ctx, b, "t", hb, time.Second); !errors.Is(err, teambus.ErrFenced) || b.last != 8 || h.Rev() != 0 {
		t.Fatalf("failed beat: err %v, sent rev %d, rev %d; want ErrFenced, 8, 0", err, b.last, h.Rev())
	}
	b.err = nil
	if err := h.Beat(ctx, b, "t", hb, time.Second); err != nil || b.last != 0 {
		t.Fatalf("beat after a failure: err %v, sent rev %d; want nil, 0 (new or expired only)", err, b.last)
	}
}

type exitedAlways struct{ ch chan struct{} }

func (p exitedAlways) Exited(context.Context, int) <-chan struct{} { return p.ch }

func TestExited(t *testing.T) {
	p := exitedAlways{ch: make(chan struct{})}
	if ch := Exited(context.Background(), p, 0); ch != nil {
		t.Error("pid 0: want no watch (nil channel)")
	}
	if ch := Exited(context.Background(), p, 42); ch != p.ch {
		t.Error("pid 42: want the watcher's channel")
	}
}
