package sidecar

import (
	"context"
	"log/slog"

	"github.com/teambus/teambus/internal/clock"
	"github.com/teambus/teambus/proc"
)

// ProcessWatcher watches the agent process; lead.ProcessWatcher and
// teammate.ProcessWatcher have its method.
type ProcessWatcher interface {
	// Exited returns a channel closed when process pid exits.
	Exited(ctx context.Context, pid int) <-chan struct{}
}

// Defaults returns log, clk and procs with each nil one replaced by its
// default: a logger that discards, the wall clock, proc.Watcher.
func Defaults(log *slog.Logger, clk clock.Clock, procs ProcessWatcher) (*slog.Logger, clock.Clock, ProcessWatcher) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if clk == nil {
		clk = clock.Real{}
	}
	if procs == nil {
		procs = proc.Watcher{}
	}
	return log, clk, procs
}
