package team

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/transcript"
)

// LiveSidecars returns the heartbeat keys of the team's sidecars that are
// alive now (lead, member.<id>), sorted. A team without a heartbeat
// bucket has none.
func (s *Service) LiveSidecars(ctx context.Context, team string) ([]string, error) {
	hbs, err := s.store.Heartbeats(ctx, team)
	if errors.Is(err, teambus.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	pol := teambus.DefaultPolicy()
	if t, _, err := s.store.Team(ctx, team); err == nil {
		pol = t.Policy
	}
	now := s.Now()
	var live []string
	for key, hb := range hbs {
		limit := pol.MemberTimeout
		if key == kv.LeadKey {
			limit = pol.LeadTimeout
		}
		if now.Sub(hb.Created) < limit {
			live = append(live, key)
		}
	}
	sort.Strings(live)
	return live, nil
}

// DeleteTeam removes everything the team holds on the bus: its mailbox,
// event and transcript streams and its state and heartbeat buckets. It refuses a
// team with live sidecars unless force. Deleting what is already gone is
// not an error, so a delete cut short can be repeated. Credentials are
// the caller's (they need the operator's connection).
func (s *Service) DeleteTeam(ctx context.Context, team string, force bool) error {
	if err := teambus.ValidateID("team", team); err != nil {
		return err
	}
	if !force {
		live, err := s.LiveSidecars(ctx, team)
		if err != nil {
			return err
		}
		if len(live) > 0 {
			return &LiveSidecarsError{Team: team, Live: live}
		}
	}
	return s.removeTeam(ctx, team)
}

// removeTeam deletes the team's streams and buckets.
func (s *Service) removeTeam(ctx context.Context, team string) error {
	var errs []error
	if err := s.Mailbox(team).Delete(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := s.Events(team).Delete(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := s.store.DeleteTeam(ctx, team); err != nil {
		errs = append(errs, err)
	}
	if err := transcript.DeleteTeam(ctx, s.js, team); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("delete team %s: %w", team, err)
	}
	return nil
}

// undoCreate removes what a failed create made, on a context of its own:
// a failed create leaves nothing behind.
func (s *Service) undoCreate(ctx context.Context, team string) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = s.removeTeam(uctx, team) // what an undo leaves, `team delete` removes; the create's error is the one to report
}

// createErr explains a create that failed because the store can not
// reserve the team's limits (NoRoomError).
func (s *Service) createErr(team string, err error) error {
	if err == nil || !noRoom(err) {
		return err
	}
	return &NoRoomError{Team: team, Mailbox: s.Mailbox(team).Config().MaxBytes, Events: s.Events(team).Config().MaxBytes,
		State: s.store.StateBytes(), Heartbeats: kv.HeartbeatBytes, cause: err}
}

func mib(n int64) string { return fmt.Sprintf("%dMiB", n>>20) }
