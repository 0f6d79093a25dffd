package team

import (
	"context"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/kv"
)

// OperatorRelease requeues an active task of team with its checkpoint, on
// an operator's word (the live view): it acts as the lead in the lead's
// current session, so the lead's rules for Release apply.
func (s *Service) OperatorRelease(ctx context.Context, team, task string) (*teambus.Task, error) {
	t, _, err := s.store.Team(ctx, team)
	if err != nil {
		return nil, err
	}
	return s.Release(ctx, Actor{Team: team, Member: teambus.Lead, Session: t.LeadSession}, task)
}

// OperatorPause stops a task of team that is not done until someone
// reopens it, on an operator's word; reason says who (it is stored with
// the task). Pausing a paused task changes nothing and logs nothing.
func (s *Service) OperatorPause(ctx context.Context, team, task, reason string) (*teambus.Task, error) {
	var out *teambus.Task
	changed := false
	err := kv.Retry(ctx, func() error {
		changed = false
		snap, err := s.store.Snapshot(ctx, team)
		if err != nil {
			return err
		}
		if snap.Team.Closed() {
			return teambus.Statef("team %s is %s: nothing to pause", team, snap.Team.Status)
		}
		t, err := snap.Task(task)
		if err != nil {
			return err
		}
		out = t
		switch {
		case t.Status == teambus.TaskPaused:
			return nil
		case t.Done() || t.Status == teambus.TaskFailed:
			return teambus.Statef("task %s is %s: only open tasks can be paused", t.ID, t.Status)
		}
		teambus.Pause(t, reason, s.Now())
		if _, err := s.store.PutTask(ctx, team, t, snap.TaskRev[task]); err != nil {
			return err
		}
		changed = true
		return nil
	})
	if err == nil && changed {
		s.LogEvent(ctx, team, eventlog.EvTaskPaused, "", map[string]any{"taskId": task, "reason": "operator"})
	}
	return out, err
}
