package mcpserver

import (
	"context"
	"slices"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// The team calls of the tools: the member API (Config.API) with the
// identity as every request's actor, and the team state (Config.Direct)
// for what the member API does not offer.

// calls are the team calls of the tools.
type calls struct {
	api    teamapi.API
	direct *team.Service
}

func (s calls) send(ctx context.Context, a team.Actor, req teamapi.SendRequest) (mailbox.SendResult, error) {
	req.Actor = a
	return s.api.Send(ctx, req)
}

// peek returns up to max messages of the actor's inbox and leaves them
// there: read and released in one step.
func (s calls) peek(ctx context.Context, a team.Actor, max int, wait int64) ([]teambus.Message, error) {
	res, err := s.api.Inbox(ctx, teamapi.InboxRequest{Actor: a, Mode: teamapi.InboxPeek, Max: max, WaitMS: wait})
	if err != nil {
		return nil, err
	}
	msgs := make([]teambus.Message, 0, len(res.Messages))
	for _, m := range res.Messages {
		msgs = append(msgs, m.Message)
	}
	return msgs, nil
}

// lease leases up to max messages of the actor's inbox: in flight until
// acked or released by their tokens.
func (s calls) lease(ctx context.Context, a team.Actor, max int, wait int64) (*lease, error) {
	return teamapi.LeaseInbox(ctx, s.api, a, max, time.Duration(wait)*time.Millisecond)
}

// lease is leased mail, held by its tokens until acked or released.
type lease = teamapi.Lease

func (s calls) ack(ctx context.Context, a team.Actor, seqs []uint64) (mailbox.AckResult, error) {
	res, err := s.api.Ack(ctx, teamapi.AckRequest{Actor: a, Seqs: seqs})
	return mailbox.AckResult{Acked: res.Acked, Already: res.Already}, err
}

// replay calls fn for the mailbox messages that match f and that a may
// read: the whole mailbox on the team state, else the actor's own mail
// (to it, from it, broadcasts) through the member API.
func (s calls) replay(ctx context.Context, a team.Actor, f mailbox.ReplayFilter, fn func(teambus.Message) error) error {
	if s.direct != nil {
		return s.direct.ReplayMail(ctx, a.Team, f, fn)
	}
	return teamapi.ReplayOwn(ctx, s.api, a, f, fn)
}

func (s calls) task(ctx context.Context, a team.Actor, req teamapi.TaskRequest) (*teambus.Task, bool, error) {
	req.Actor = a
	res, err := s.api.Task(ctx, req)
	return res.Task, res.Changed, err
}

func (s calls) checkpoint(ctx context.Context, a team.Actor, req teamapi.CheckpointRequest) (*teambus.Task, error) {
	req.Actor = a
	res, err := s.api.Checkpoint(ctx, req)
	return res.Task, err
}

// show is the whole team with liveness.
func (s calls) show(ctx context.Context, a team.Actor) (*team.View, error) {
	if s.direct != nil {
		return s.direct.Show(ctx, a.Team)
	}
	v, err := teamapi.As[team.View](s.api.Show(ctx, teamapi.ShowRequest{Actor: a}))
	if err != nil {
		return nil, err
	}
	if v.Team == nil {
		return nil, teambus.Unavailablef("team service show of team %s: no team in the answer", a.Team)
	}
	return v, nil
}

// taskRecord is the task id: its record, or the task of the team view.
func (s calls) taskRecord(ctx context.Context, a team.Actor, id string) (*teambus.Task, error) {
	if s.direct != nil {
		return s.direct.Task(ctx, a.Team, id)
	}
	v, err := s.show(ctx, a)
	if err != nil {
		return nil, err
	}
	if i := slices.IndexFunc(v.Tasks, func(t *teambus.Task) bool { return t.ID == id }); i >= 0 {
		return v.Tasks[i], nil
	}
	return nil, teambus.NotFoundf("task %s not found in team %s: see task_list", id, a.Team)
}

// memberRecord is the member: its record, or the member of the team
// view (its record's identity fields: status, epoch, session).
func (s calls) memberRecord(ctx context.Context, a team.Actor, memberID string) (*teambus.Member, error) {
	if s.direct != nil {
		return s.direct.Member(ctx, a.Team, memberID)
	}
	v, err := s.show(ctx, a)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(v.Members, func(m team.MemberView) bool { return m.ID == memberID })
	if i < 0 {
		return nil, teambus.NotFoundf("member %s not found in team %s", memberID, a.Team)
	}
	m := v.Members[i]
	return &teambus.Member{ID: m.ID, Name: m.Name, Role: m.Role, Quantum: m.Quantum, Status: m.Status, Epoch: m.Epoch,
		Session: m.Session, ContextPct: m.ContextPct, CrashCount: m.CrashCount, ZombieSince: m.ZombieSince}, nil
}

// teamRecord is the team record.
func (s calls) teamRecord(ctx context.Context, a team.Actor) (*teambus.Team, error) {
	if s.direct != nil {
		return s.direct.Team(ctx, a.Team)
	}
	v, err := s.show(ctx, a)
	if err != nil {
		return nil, err
	}
	return v.Team, nil
}

// brief is the respawn prompt of member. A member may read only its own
// brief; the lead and the operator any.
func (s calls) brief(ctx context.Context, a team.Actor, memberID string) (*team.Brief, error) {
	if s.direct != nil {
		return s.direct.Brief(ctx, a.Team, memberID, 10)
	}
	return teamapi.As[team.Brief](s.api.Brief(ctx, teamapi.BriefRequest{Actor: a, Of: memberID, Mail: 10}))
}

func (s calls) addTask(ctx context.Context, a team.Actor, spec team.TaskSpec) (*teambus.Task, error) {
	res, err := s.api.Task(ctx, teamapi.TaskRequest{Actor: a, Op: teamapi.TaskAdd, ID: spec.ID, Description: spec.Description, Deps: spec.Deps, Priority: spec.Priority, Quantum: spec.Quantum})
	return res.Task, err
}

func (s calls) resume(ctx context.Context, a team.Actor, force bool) (*team.Report, error) {
	return s.api.Resume(ctx, teamapi.ResumeRequest{Actor: a, Force: force})
}

func (s calls) probe(ctx context.Context, a team.Actor) (*team.Report, error) {
	return s.api.Probe(ctx, teamapi.ProbeRequest{Actor: a})
}

// waitMS is a wait in the member API's milliseconds.
func waitMS(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return max(d.Milliseconds(), 1)
}

// MemberOf is the record of the identity's member as the tools read it:
// on the team state when direct is set, else from the team view of the
// member API.
func MemberOf(ctx context.Context, api teamapi.API, direct *team.Service, id Identity) (*teambus.Member, error) {
	return calls{api: api, direct: direct}.memberRecord(ctx, id.Actor(), id.Member)
}
