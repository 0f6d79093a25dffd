package teammate

import (
	"context"
	"time"

	"github.com/teambus/teambus"
)

// Team is what the teammate sidecar needs of the team service: domain
// values, the lead's heartbeat, its own state records and its sidecar inbox
// as typed channels. team.SidecarAPI is the implementation over the bus;
// the unit tests use one in memory.
type Team interface {
	// Now is the service clock, for the times recorded in the team state.
	Now() time.Time

	Join(ctx context.Context, team, member, session string) (*teambus.Member, error)
	Team(ctx context.Context, team string) (*teambus.Team, error)
	Member(ctx context.Context, team, member string) (*teambus.Member, error)
	State(ctx context.Context, team string) (*teambus.State, error)
	UpdateTeam(ctx context.Context, team string, fn func(*teambus.Team) (bool, error)) (*teambus.Team, error)
	SetMemberStatus(ctx context.Context, team, member string, epoch int64, status teambus.MemberStatus) error

	Notify(ctx context.Context, team, from string, epoch int64, to string, typ teambus.MessageType, id, body string, data any) error
	ReleaseHeld(ctx context.Context, team, member string) ([]teambus.Message, error)
	HeldPending(ctx context.Context, team, member string) (uint64, error)
	AutoCheckpoint(ctx context.Context, team, member, session string, files []string, lastAction string) error
	ReleaseTask(ctx context.Context, team, member, session, task string) error
	MarkCrashed(ctx context.Context, team, member string, epoch int64, reason string) (teambus.CrashResult, error)

	StartSession(ctx context.Context, team, member string, epoch int64, data map[string]any) func(ctx context.Context, outcome string, err error)

	Beat(ctx context.Context, team string, hb *teambus.Heartbeat, ttl time.Duration, rev uint64) (uint64, error)
	StopBeat(ctx context.Context, team, member string) error
	WatchBeats(ctx context.Context, team string, updatesOnly bool, only ...string) (<-chan teambus.BeatEvent, error)
	WatchState(ctx context.Context, team, member string) (<-chan teambus.StateChange, error)
	ConsumeSidecar(ctx context.Context, team, member string) (<-chan teambus.Delivery, func(back ...teambus.Delivery), error)
}

// ProcessWatcher watches the agent process (proc.Watcher).
type ProcessWatcher interface {
	// Exited returns a channel closed when process pid exits.
	Exited(ctx context.Context, pid int) <-chan struct{}
}
