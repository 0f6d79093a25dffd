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

// Beats are the liveness protocol as a sidecar sees it: beats sent to
// the team service (which keeps the heartbeat keys), the notices that an
// incarnation was fenced, and a watch of the keys' writes and expiries.
type Beats interface {
	// Beat sends hb to the team service without waiting: the service
	// writes the heartbeat key when the incarnation or status changes and
	// renews it while beats come, and ends it when they stop.
	Beat(ctx context.Context, team string, hb *teambus.Heartbeat) error
	// EndBeat asks the service to remove hb's heartbeat key, as a clean
	// shutdown does; the key of a newer incarnation is left alone.
	EndBeat(ctx context.Context, team string, hb *teambus.Heartbeat) error
	// Fences reports, as a teambus.ErrFenced error, each notice that a
	// beat of member's incarnation (session, epoch) was dropped because
	// the incarnation is no longer current.
	Fences(ctx context.Context, team, member, session string, epoch int64) (<-chan error, error)
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

// Heart sends one sidecar's beats and remembers the last, so a clean
// stop removes the key of this incarnation only.
type Heart struct {
	last *teambus.Heartbeat
}

// Beat sends hb through b. A beat that could not be sent is no silence
// of the member: the service judges silence by the beats it receives.
func (h *Heart) Beat(ctx context.Context, b Beats, team string, hb *teambus.Heartbeat) error {
	if err := b.Beat(ctx, team, hb); err != nil {
		return err
	}
	c := *hb
	h.last = &c
	return nil
}

// Stop asks the service to remove the key of the last beat sent, if any.
func (h *Heart) Stop(ctx context.Context, b Beats, team string) error {
	if h.last == nil {
		return nil
	}
	return b.EndBeat(ctx, team, h.last)
}

// Sent reports whether a beat was sent.
func (h *Heart) Sent() bool { return h.last != nil }

// Exited returns a channel closed when the agent process pid exits, or
// nil (never ready) when pid is 0: no process is watched.
func Exited(ctx context.Context, procs ProcessWatcher, pid int) <-chan struct{} {
	if pid <= 0 {
		return nil
	}
	return procs.Exited(ctx, pid)
}
