package team

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/mailbox"
)

// The reads and watches below are what the live view, the demo, the hooks
// and the benchmarks look at. They change nothing; every change goes
// through a method that applies the team's rules.

// ListTeams returns the ids of all teams, sorted.
func (s *Service) ListTeams(ctx context.Context) ([]string, error) {
	return s.store.ListTeams(ctx)
}

// Team reads the team record.
func (s *Service) Team(ctx context.Context, team string) (*teambus.Team, error) {
	t, _, err := s.store.Team(ctx, team)
	return t, err
}

// Member reads one member of team.
func (s *Service) Member(ctx context.Context, team, member string) (*teambus.Member, error) {
	m, _, err := s.store.Member(ctx, team, member)
	return m, err
}

// Task reads one task of team.
func (s *Service) Task(ctx context.Context, team, id string) (*teambus.Task, error) {
	t, _, err := s.store.Task(ctx, team, id)
	return t, err
}

// Snapshot reads every record of team in one pass.
func (s *Service) Snapshot(ctx context.Context, team string) (*kv.Snapshot, error) {
	return s.store.Snapshot(ctx, team)
}

// WatchState watches the records of team (kv.Store.WatchState).
func (s *Service) WatchState(ctx context.Context, team string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	return s.store.WatchState(ctx, team, opts...)
}

// WatchHeartbeats watches the heartbeats of team.
func (s *Service) WatchHeartbeats(ctx context.Context, team string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	return s.store.WatchHeartbeats(ctx, team, opts...)
}

// ReplayMail calls fn with the stored mail of team that f selects, in
// order (mailbox.Mailbox.Replay); with f.Follow it waits for new mail until ctx
// ends.
func (s *Service) ReplayMail(ctx context.Context, team string, f mailbox.ReplayFilter, fn func(teambus.Message) error) error {
	return s.Mailbox(team).Replay(ctx, f, fn)
}

// MailTail is the sequence of the first of the last n messages of team's
// mailbox: where to replay from to see those n. It is 1 when the mailbox
// holds fewer, or does not exist yet.
func (s *Service) MailTail(ctx context.Context, team string, n int) (uint64, error) {
	return s.tail(ctx, s.Mailbox(team).Stream(), n)
}

// EventTail is MailTail for the event log of team.
func (s *Service) EventTail(ctx context.Context, team string, n int) (uint64, error) {
	return s.tail(ctx, s.Events(team).Stream(), n)
}

func (s *Service) tail(ctx context.Context, stream string, n int) (uint64, error) {
	st, err := s.js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 1, nil
	}
	if err != nil {
		return 0, err
	}
	last := st.CachedInfo().State.LastSeq
	if last < uint64(n) {
		return 1, nil
	}
	return last - uint64(n) + 1, nil
}

// LeaseInbox leases up to opts.Max messages of member's inbox without
// reading the member record first: for a caller that checks fencing
// itself, in parallel (the hooks, on the hot path of every prompt). It
// does not count as the member's activity; Lease is the checked form.
func (s *Service) LeaseInbox(ctx context.Context, team, member string, opts mailbox.LeaseOptions) (*mailbox.Lease, error) {
	opts.Self = member
	return s.Mailbox(team).Lease(ctx, member, opts)
}

// Touch records that member of team did work now (kv.Store.Touch): the
// lead probes a member that did nothing for a while.
func (s *Service) Touch(ctx context.Context, team, member string) error {
	return s.store.Touch(ctx, team, member)
}

// Heartbeats reads the live heartbeats of team, by key (kv.LeadKey, or
// kv.MemberKey of a member).
func (s *Service) Heartbeats(ctx context.Context, team string) (map[string]kv.HeartbeatEntry, error) {
	return s.store.Heartbeats(ctx, team)
}

// JetStream is the JetStream handle the service stores through: for
// records kept beside the team's, such as the spawn registry
// (spawn.Open, spawn.OpenExisting). The team's own records change only
// through the service's methods.
func (s *Service) JetStream() jetstream.JetStream { return s.js }
