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

// beats records the beats sent and the stops asked, or fails with err.
type beats struct {
	sent    []teambus.Heartbeat
	stopped []teambus.Heartbeat
	err     error
}

func (b *beats) Beat(_ context.Context, _ string, hb *teambus.Heartbeat) error {
	if b.err != nil {
		return b.err
	}
	b.sent = append(b.sent, *hb)
	return nil
}

func (b *beats) EndBeat(_ context.Context, _ string, hb *teambus.Heartbeat) error {
	b.stopped = append(b.stopped, *hb)
	return nil
}

func (*beats) Fences(context.Context, string, string, string, int64) (<-chan error, error) {
	return nil, nil
}

func (*beats) WatchBeats(context.Context, string, bool, ...string) (<-chan teambus.BeatEvent, error) {
	return nil, nil
}

func TestHeart(t *testing.T) {
	ctx := context.Background()
	b := &beats{}
	var h Heart
	if err := h.Stop(ctx, b, "t"); err != nil || len(b.stopped) != 0 || h.Sent() {
		t.Fatalf("stop before any beat: err %v, %d stops, sent %v; want nothing asked", err, len(b.stopped), h.Sent())
	}
	b.err = teambus.ErrUnavailable
	if err := h.Beat(ctx, b, "t", &teambus.Heartbeat{Member: "tm1", Epoch: 1}); !errors.Is(err, teambus.ErrUnavailable) || h.Sent() {
		t.Fatalf("failed beat: err %v, sent %v; want ErrUnavailable, false", err, h.Sent())
	}
	b.err = nil
	if err := h.Beat(ctx, b, "t", &teambus.Heartbeat{Member: "tm1", Epoch: 2}); err != nil || len(b.sent) != 1 || !h.Sent() {
		t.Fatalf("beat: err %v, %d sent; want nil, 1", err, len(b.sent))
	}
	if err := h.Stop(ctx, b, "t"); err != nil || len(b.stopped) != 1 || b.stopped[0].Epoch != 2 {
		t.Fatalf("stop: err %v, stops %+v; want the last beat's incarnation (epoch 2)", err, b.stopped)
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
