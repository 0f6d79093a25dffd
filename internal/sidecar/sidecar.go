package sidecar

import (
	"context"
	"log/slog"
	"time"

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

// RenewEvery is how often the team service writes the heartbeat key of
// a member that keeps beating: every half of its timeout (member-timeout,
// lead-timeout for the lead), whatever the heartbeat interval.
func RenewEvery(timeout time.Duration) time.Duration { return timeout / 2 }

// Backstop is how long after the last write of a heartbeat key a sidecar
// judges the key's member silent by itself: its timeout and one renewal
// period. While the team service runs it ends the key after the timeout
// of silence, before the backstop; the backstop serves when no service
// does.
func Backstop(timeout time.Duration) time.Duration { return timeout + RenewEvery(timeout) }
