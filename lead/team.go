package lead

import (
	"context"
	"time"

	"github.com/teambus/teambus"
)

// Team is what the lead sidecar needs of the team service: domain values,
// heartbeat changes and its sidecar inbox as typed channels. team.SidecarAPI
// is the implementation over the bus; the unit tests use one in memory.
type Team interface {
	// Now is the service clock, for the times recorded in the team state.
	Now() time.Time

	Resume(ctx context.Context, team, session string, force, asLead bool) (*teambus.Report, error)
	Probe(ctx context.Context, team string) (*teambus.Report, error)

	Team(ctx context.Context, team string) (*teambus.Team, error)
	Member(ctx context.Context, team, member string) (*teambus.Member, error)
	State(ctx context.Context, team string) (*teambus.State, error)
	UpdateTeam(ctx context.Context, team string, fn func(*teambus.Team) (bool, error)) (*teambus.Team, error)
	UpdateMember(ctx context.Context, team, member string, epoch int64, fn func(*teambus.Member) bool) error

	Notify(ctx context.Context, team, from string, epoch int64, to string, typ teambus.MessageType, id, body string, data any) error
	MarkCrashed(ctx context.Context, team, member string, epoch int64, reason string) (teambus.CrashResult, error)
	ReconcileMember(ctx context.Context, team, member, reason string) ([]string, error)
	PromoteReady(ctx context.Context, team string) ([]string, error)
	ReleaseHeld(ctx context.Context, team, member string) ([]teambus.Message, error)

	LogEvent(ctx context.Context, team, typ, agent string, data any)
	StartSession(ctx context.Context, team, member string, epoch int64, data map[string]any) func(ctx context.Context, outcome string, err error)

	Beat(ctx context.Context, team string, hb *teambus.Heartbeat, ttl time.Duration, rev uint64) (uint64, error)
	StopBeatAt(ctx context.Context, team, member string, rev uint64) error
	WatchBeats(ctx context.Context, team string, updatesOnly bool, only ...string) (<-chan teambus.BeatEvent, error)
	ConsumeSidecar(ctx context.Context, team, member string) (<-chan teambus.Delivery, func(back ...teambus.Delivery), error)
}

// ProcessWatcher watches the agent process (proc.Watcher).
type ProcessWatcher interface {
	// Exited returns a channel closed when process pid exits.
	Exited(ctx context.Context, pid int) <-chan struct{}
}
