package team

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/teamapi"
)

// maxCondition caps a member's liveness condition.
const maxCondition = 60

// Status implements teamapi.API: the caller's team, its member record
// (not for the lead), the tasks it holds when asked, and the task named.
// It never fails on a fenced session: a hook learns from the records that
// it was replaced. Touch and Condition change the member's record only
// while the caller is its current incarnation.
func (x API) Status(ctx context.Context, r teamapi.StatusRequest) (teamapi.StatusReply, error) {
	out := teamapi.StatusReply{Held: []*teambus.Task{}}
	a, err := actor(r.Actor)
	if err != nil {
		return out, err
	}
	if r.Task != "" {
		if err := teambus.ValidateID("task", r.Task); err != nil {
			return out, err
		}
	}
	if r.Condition != nil && (len(*r.Condition) > maxCondition || !teambus.Printable(*r.Condition)) {
		return out, teambus.Invalidf("invalid condition: at most %d printable characters", maxCondition)
	}
	if out.Team, _, err = x.s.store.Team(ctx, a.Team); err != nil {
		return out, err
	}
	if !a.IsLead() {
		if out.Member, _, err = x.s.store.Member(ctx, a.Team, a.Member); err != nil {
			return out, err
		}
		if out.Member.Fenced(a.Session) == nil {
			if r.Touch {
				_ = x.s.Touch(ctx, a.Team, a.Member) // advisory, as the activity stamp always is
			}
			if r.Condition != nil {
				if err := x.s.setCondition(ctx, a.Team, a.Member, out.Member.Epoch, *r.Condition); err != nil {
					return out, err
				}
			}
		}
	}
	if r.Task != "" {
		t, _, err := x.s.store.Task(ctx, a.Team, r.Task)
		if err != nil && !errors.Is(err, teambus.ErrNotFound) {
			return out, err
		}
		out.Task = t
	}
	if r.Held && !a.IsLead() {
		snap, err := x.s.store.Snapshot(ctx, a.Team)
		if err != nil {
			return out, err
		}
		held := slices.Clone(snap.MemberTasks(a.Member))
		slices.SortStableFunc(held, func(p, q *teambus.Task) int {
			return boolInt(q.Status == teambus.TaskInProgress) - boolInt(p.Status == teambus.TaskInProgress)
		})
		out.Held = append(out.Held, held...)
	}
	return out, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// setCondition records (or clears, with "") member's liveness condition
// while epoch is its incarnation.
func (s *Service) setCondition(ctx context.Context, team, member string, epoch int64, cond string) error {
	now := s.Now().UTC()
	return s.UpdateMember(ctx, team, member, epoch, func(m *teambus.Member) bool {
		if m.Condition == cond {
			return false
		}
		m.Condition, m.ConditionAt = cond, nil
		if cond != "" {
			m.ConditionAt = &now
		}
		return true
	})
}

// Event implements teamapi.API: an event of the caller's session, of one
// of the types a session logs of itself, in the team's event log.
func (x API) Event(ctx context.Context, r teamapi.EventRequest) (teamapi.EventReply, error) {
	a, err := actor(r.Actor)
	if err != nil {
		return teamapi.EventReply{}, err
	}
	if !slices.Contains(teamapi.SessionEventTypes, r.Type) && !(a.IsLead() && slices.Contains(teamapi.LeadEventTypes, r.Type)) {
		return teamapi.EventReply{}, teamapi.Refusedf("a session does not log events of type %q", r.Type)
	}
	if len(r.Data) > teamapi.MaxEventData {
		return teamapi.EventReply{}, teambus.Invalidf("event data of %d bytes: at most %d", len(r.Data), teamapi.MaxEventData)
	}
	var data any
	if len(r.Data) > 0 {
		if !json.Valid(r.Data) || r.Data[0] != '{' {
			return teamapi.EventReply{}, teambus.Invalidf("event data must be a JSON object")
		}
		data = r.Data
	}
	if err := x.s.checkActor(ctx, a); err != nil {
		return teamapi.EventReply{}, err
	}
	d := 5 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		d = time.Until(dl)
	}
	x.s.LogEventWithin(ctx, a.Team, r.Type, a.Member, data, d)
	return teamapi.EventReply{}, nil
}

// Resume implements teamapi.API: the caller's session attaches as the
// lead (the lead's credential, or the operator naming the lead).
func (x API) Resume(ctx context.Context, r teamapi.ResumeRequest) (*teambus.Report, error) {
	a, err := leadActor(r.Actor, "resume the team")
	if err != nil {
		return nil, err
	}
	if a.Session == "" {
		return nil, teambus.Invalidf("resume: no session given")
	}
	return x.s.Resume(ctx, a.Team, a.Session, r.Force, r.AsLead)
}

// Probe implements teamapi.API.
func (x API) Probe(ctx context.Context, r teamapi.ProbeRequest) (*teambus.Report, error) {
	a, err := leadActor(r.Actor, "probe the team")
	if err != nil {
		return nil, err
	}
	return x.s.Probe(ctx, a.Team)
}

// leadActor validates the actor of a request only the lead makes.
func leadActor(a teamapi.Actor, what string) (Actor, error) {
	if err := a.Validate(); err != nil {
		return a, err
	}
	if !a.IsLead() {
		return a, teamapi.Refusedf("only the lead may %s, not %s", what, a.Member)
	}
	return a, nil
}

// errPageDone ends an events page.
var errPageDone = errors.New("page done")

// Events implements teamapi.API: a page of the team's event log, each
// event as stored, for the lead (and the operator).
func (x API) Events(ctx context.Context, r teamapi.EventsRequest) (teamapi.EventsReply, error) {
	out := teamapi.EventsReply{Events: []json.RawMessage{}}
	a, err := leadActor(r.Actor, "read the team's event log")
	if err != nil {
		return out, err
	}
	if r.Limit < 0 || r.Limit > teamapi.EventsMax {
		return out, teambus.Invalidf("invalid limit %d: 0 (the most) to %d", r.Limit, teamapi.EventsMax)
	}
	limit := r.Limit
	if limit == 0 {
		limit = teamapi.EventsMax
	}
	if _, _, err := x.s.incarnation(ctx, a); err != nil {
		return out, err
	}
	size := 0
	err = x.s.Events(a.Team).Replay(ctx, eventlog.EventFilter{SinceSeq: r.SinceSeq, Type: r.Type}, func(rec *eventlog.EventRecord) error {
		if len(out.Events) == limit || (len(out.Events) > 0 && size+len(rec.Raw) > teamapi.EventsMaxBytes) {
			out.Next = rec.StreamSeq
			return errPageDone
		}
		raw := json.RawMessage(slices.Clone(rec.Raw))
		if !json.Valid(raw) {
			// Not written by teambus, and not JSON: its text, quoted.
			raw, _ = json.Marshal(string(rec.Raw))
		}
		size += len(raw)
		out.Events = append(out.Events, raw)
		return nil
	})
	if err != nil && !errors.Is(err, errPageDone) {
		return out, err
	}
	return out, nil
}
