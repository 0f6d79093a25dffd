package sidecar

import (
	"context"
	"log/slog"
	"testing"
	"time"

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
