package sidecar

import (
	"context"
	"time"

	"github.com/teambus/teambus"
)

// Records is the team state both sidecars read and change: the service
// clock, the team and member records, a snapshot of every record, and a
// compare-and-set change of the team record.
type Records interface {
	// Now is the service clock, for the times recorded in the team state.
	Now() time.Time
	Team(ctx context.Context, team string) (*teambus.Team, error)
	Member(ctx context.Context, team, member string) (*teambus.Member, error)
	State(ctx context.Context, team string) (*teambus.State, error)
	UpdateTeam(ctx context.Context, team string, fn func(*teambus.Team) (bool, error)) (*teambus.Team, error)
}

// Actions are the team changes both sidecars make: mail from a member
// incarnation, a crash record, the release of mail held in zombie mode,
// and the event log session of a run.
type Actions interface {
	Notify(ctx context.Context, team, from string, epoch int64, to string, typ teambus.MessageType, id, body string, data any) error
	MarkCrashed(ctx context.Context, team, member string, epoch int64, reason string) (teambus.CrashResult, error)
	ReleaseHeld(ctx context.Context, team, member string) ([]teambus.Message, error)
	// StartSession starts the event log session of a sidecar run and
	// returns its end.
	StartSession(ctx context.Context, team, member string, epoch int64, data map[string]any) func(ctx context.Context, outcome string, err error)
}

// Beats are the heartbeat keys: a compare-and-set write with a time to
// live, and a watch of writes and expiries.
type Beats interface {
	// Beat writes hb with time to live ttl if the key's last revision is
	// rev (0: new or expired); it returns the new revision.
	Beat(ctx context.Context, team string, hb *teambus.Heartbeat, ttl time.Duration, rev uint64) (uint64, error)
	WatchBeats(ctx context.Context, team string, updatesOnly bool, only ...string) (<-chan teambus.BeatEvent, error)
}

// Inbox is a member's sidecar inbox as a channel of deliveries; stop
// ends the consumer and gives back the deliveries passed to it.
type Inbox interface {
	ConsumeSidecar(ctx context.Context, team, member string) (<-chan teambus.Delivery, func(back ...teambus.Delivery), error)
}

// Team is what both sidecars need of the team service. lead.Team and
// teammate.Team add what each alone uses; team.SidecarAPI implements
// both over the bus.
type Team interface {
	Records
	Actions
	Beats
	Inbox
}

// Heart writes one sidecar's heartbeat, each write a compare-and-set on
// the revision of its own last one, so a second writer of the key (a
// replaced incarnation) fails instead of overwriting it.
type Heart struct{ rev uint64 }

// Beat writes hb through b with time to live ttl. A failed write forgets
// the revision: the next one writes only if the key is new or expired.
func (h *Heart) Beat(ctx context.Context, b Beats, team string, hb *teambus.Heartbeat, ttl time.Duration) error {
	rev, err := b.Beat(ctx, team, hb, ttl, h.rev)
	if err != nil {
		h.rev = 0
		return err
	}
	h.rev = rev
	return nil
}

// Rev is the revision of the last heartbeat written, 0 when none is.
func (h *Heart) Rev() uint64 { return h.rev }

// Exited returns a channel closed when the agent process pid exits, or
// nil (never ready) when pid is 0: no process is watched.
func Exited(ctx context.Context, procs ProcessWatcher, pid int) <-chan struct{} {
	if pid <= 0 {
		return nil
	}
	return procs.Exited(ctx, pid)
}
