package lead

import (
	"context"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/internal/sidecar"
)

// Team is what the lead sidecar needs of the team service: what both
// sidecars use (sidecar.Team: records, actions, heartbeats, the sidecar
// inbox) and what the lead alone does. team.SidecarAPI implements it over
// the bus; the unit tests use one in memory.
type Team interface {
	sidecar.Team

	Resume(ctx context.Context, team, session string, force, asLead bool) (*teambus.Report, error)
	Probe(ctx context.Context, team string) (*teambus.Report, error)
	UpdateMember(ctx context.Context, team, member string, epoch int64, fn func(*teambus.Member) bool) error
	ReconcileMember(ctx context.Context, team, member, reason string) ([]string, error)
	PromoteReady(ctx context.Context, team string) ([]string, error)
	LogEvent(ctx context.Context, team, typ, agent string, data any)
}

// ProcessWatcher watches the agent process (proc.Watcher).
type ProcessWatcher = sidecar.ProcessWatcher
