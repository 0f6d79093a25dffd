package team

import (
	"context"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/kv"
)

// The reads of the team state the operator's commands and the MCP server
// make: the records as they are stored, without the liveness of a View.

// TeamRecord returns the record of team.
func (s *Service) TeamRecord(ctx context.Context, team string) (*teambus.Team, error) {
	t, _, err := s.store.Team(ctx, team)
	return t, err
}

// MemberRecord returns the record of member in team.
func (s *Service) MemberRecord(ctx context.Context, team, member string) (*teambus.Member, error) {
	m, _, err := s.store.Member(ctx, team, member)
	return m, err
}

// TaskRecord returns the record of task id in team.
func (s *Service) TaskRecord(ctx context.Context, team, id string) (*teambus.Task, error) {
	t, _, err := s.store.Task(ctx, team, id)
	return t, err
}

// ListTeams returns the ids of every team.
func (s *Service) ListTeams(ctx context.Context) ([]string, error) { return s.store.ListTeams(ctx) }

// Snapshot reads team, its members and tasks in one pass.
func (s *Service) Snapshot(ctx context.Context, team string) (*kv.Snapshot, error) {
	return s.store.Snapshot(ctx, team)
}

// ReplayMailbox calls fn for the messages of team's mailbox that match f,
// oldest first.
func (s *Service) ReplayMailbox(ctx context.Context, team string, f bus.ReplayFilter, fn func(teambus.Message) error) error {
	return s.Mailbox(team).Replay(ctx, f, fn)
}
