package teammate

import (
	"context"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/internal/sidecar"
)

// Team is what the teammate sidecar needs of the team service: what both
// sidecars use (sidecar.Team: records, actions, heartbeats, the sidecar
// inbox) and what a teammate alone does. team.SidecarAPI implements it
// over the bus; the unit tests use one in memory.
type Team interface {
	sidecar.Team

	Join(ctx context.Context, team, member, session string) (*teambus.Member, error)
	SetMemberStatus(ctx context.Context, team, member string, epoch int64, status teambus.MemberStatus) error
	HeldPending(ctx context.Context, team, member string) (uint64, error)
	AutoCheckpoint(ctx context.Context, team, member, session string, files []string, lastAction string) error
	ReleaseTask(ctx context.Context, team, member, session, task string) error
	// WatchState reports the team record and the member's record,
	// current values first, then changes.
	WatchState(ctx context.Context, team, member string) (<-chan teambus.StateChange, error)
}

// ProcessWatcher watches the agent process (proc.Watcher).
type ProcessWatcher = sidecar.ProcessWatcher
