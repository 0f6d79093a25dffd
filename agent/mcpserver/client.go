package mcpserver

import (
	"context"
	"slices"
	"sync"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// ClientBackend is the Backend on the request/reply team service: every
// call is a request of a teamapi.Client (subjects tb.<verb> for a member
// credential, tbsvc.<team>.<verb> for the operator). A member credential
// has no JetStream, so this is the only backend it can use; the service
// decides who calls from the server-set request info, and a call for
// another member or team than the credential's is refused before it is
// sent.
//
// Lease is an inbox read in lease mode: the messages come with tokens, and
// the lease acks (AckLeased) or releases them by token, so the MCP
// server's ack-after-write rule holds as with ServiceBackend.
//
// The reads without a request of their own (Task, Member, Team) pick from
// the team view (Show). Reassign is a task operation of the service; the
// other lead calls (AddTask, Resume, Probe) and a replay of the whole
// team's mailbox are not offered by the service: Direct serves them when
// set, else AddTask, Resume and Probe are refused (permanent) and Replay
// returns only the caller's own mail (to it, from it, broadcasts).
type ClientBackend struct {
	// Conn is a member credential's connection (its team and member are
	// the only identity it acts as) or the operator's.
	Conn *bus.Conn
	// Direct, if set, runs what the service does not offer on the team
	// state directly. Only the operator's connection can have one (it
	// needs JetStream).
	Direct *team.Service
}

var _ Backend = ClientBackend{}

// client returns the service client acting as member of teamID in session.
// An empty member is the credential's member, or for the operator the lead
// (reads only: the operator may read everything).
func (b ClientBackend) client(teamID, memberID, session string) (*teamapi.Client, error) {
	if ct, cm, ok := b.Conn.MemberOf(); ok {
		if teamID != ct {
			return nil, teambus.Invalidf("the credential of %s in team %s reaches only team %s, not %s", cm, ct, ct, teamID)
		}
		if memberID == "" {
			memberID = cm
		}
	} else if memberID == "" {
		memberID = teambus.Lead
	}
	return teamapi.ForConn(b.Conn, teamID, memberID, session)
}

func (b ClientBackend) actor(a team.Actor) (*teamapi.Client, error) {
	return b.client(a.Team, a.Member, a.Session)
}

// errLeadCall refuses a lead call the service does not offer.
func errLeadCall(what, teamID string) error {
	return teambus.Invalidf("a member credential can not %s in team %s: use the operator's bus (the node token, e.g. `teambus` on the node's host)", what, teamID)
}

// Send implements Backend.
func (b ClientBackend) Send(ctx context.Context, a team.Actor, spec team.SendSpec) (bus.SendResult, error) {
	cl, err := b.actor(a)
	if err != nil {
		return bus.SendResult{}, err
	}
	return cl.Send(ctx, teamapi.SendRequest{To: spec.To, Type: string(spec.Type), ID: spec.ID, Body: spec.Body, Data: spec.Data})
}

// Lease implements Backend: a service inbox read in lease mode.
func (b ClientBackend) Lease(ctx context.Context, a team.Actor, opts bus.LeaseOptions) (Lease, error) {
	cl, err := b.actor(a)
	if err != nil {
		return nil, err
	}
	leased, err := cl.Read(ctx, teamapi.InboxLease, opts.Max, opts.Wait)
	if err != nil {
		return nil, err
	}
	l := &clientLease{cl: cl, held: leased, msgs: make([]teambus.Message, 0, len(leased))}
	for _, m := range leased {
		l.msgs = append(l.msgs, m.Message)
	}
	return l, nil
}

// Peek implements Backend: a service inbox read in peek mode, which
// fetches and releases the mail in the node before it answers (one
// request, where a lease and its release are two).
func (b ClientBackend) Peek(ctx context.Context, a team.Actor, opts bus.InboxOptions) ([]teambus.Message, error) {
	cl, err := b.actor(a)
	if err != nil {
		return nil, err
	}
	read, err := cl.Read(ctx, teamapi.InboxPeek, opts.Max, opts.Wait)
	if err != nil {
		return nil, err
	}
	msgs := make([]teambus.Message, 0, len(read))
	for _, m := range read {
		msgs = append(msgs, m.Message)
	}
	return msgs, nil
}

// clientLease is mail leased through the service, held by its tokens.
type clientLease struct {
	cl   *teamapi.Client
	msgs []teambus.Message

	mu   sync.Mutex
	held []teamapi.Leased // not yet acked or released
}

func (l *clientLease) Messages() []teambus.Message { return l.msgs }

// Ack acks the held messages with seqs by their tokens and returns the
// seqs acked (already acked ones included: an ack is final).
func (l *clientLease) Ack(ctx context.Context, seqs ...uint64) ([]uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var pick, rest []teamapi.Leased
	for _, m := range l.held {
		if slices.Contains(seqs, m.Seq) {
			pick = append(pick, m)
		} else {
			rest = append(rest, m)
		}
	}
	if len(pick) == 0 {
		return nil, nil
	}
	res, err := l.cl.AckLeased(ctx, pick)
	if err != nil {
		// Nothing is known acked: all stays held, and Release returns it
		// (a release of a message acked after all is harmless).
		return nil, err
	}
	l.held = rest
	acked := append(slices.Clone(res.Acked), res.Already...)
	slices.Sort(acked)
	return acked, nil
}

// Release returns every message still held to the inbox at once. It is
// idempotent.
func (l *clientLease) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.held) == 0 {
		return nil
	}
	if _, err := l.cl.ReleaseLeased(ctx, l.held); err != nil {
		return err
	}
	l.held = nil
	return nil
}

// Ack implements Backend.
func (b ClientBackend) Ack(ctx context.Context, a team.Actor, seqs []uint64) (bus.AckResult, error) {
	cl, err := b.actor(a)
	if err != nil {
		return bus.AckResult{}, err
	}
	return cl.AckSeqs(ctx, seqs)
}

// Replay implements Backend. With Direct it reads the team's mailbox;
// through the service it pages through the caller's own mail and applies
// f here.
func (b ClientBackend) Replay(ctx context.Context, a team.Actor, f bus.ReplayFilter, fn func(teambus.Message) error) error {
	if b.Direct != nil {
		return b.Direct.ReplayMailbox(ctx, a.Team, f, fn)
	}
	cl, err := b.actor(a)
	if err != nil {
		return err
	}
	return cl.ReplayOwn(ctx, f, fn)
}

func (b ClientBackend) task(ctx context.Context, a team.Actor, req teamapi.TaskRequest) (*teambus.Task, bool, error) {
	cl, err := b.actor(a)
	if err != nil {
		return nil, false, err
	}
	return cl.Do(ctx, req)
}

// Next implements Backend.
func (b ClientBackend) Next(ctx context.Context, a team.Actor) (*teambus.Task, error) {
	t, _, err := b.task(ctx, a, teamapi.TaskRequest{Op: teamapi.TaskNext})
	return t, err
}

// Claim implements Backend.
func (b ClientBackend) Claim(ctx context.Context, a team.Actor, id string) (*teambus.Task, error) {
	t, _, err := b.task(ctx, a, teamapi.TaskRequest{Op: teamapi.TaskClaim, ID: id})
	return t, err
}

// Release implements Backend.
func (b ClientBackend) Release(ctx context.Context, a team.Actor, id string) (*teambus.Task, error) {
	t, _, err := b.task(ctx, a, teamapi.TaskRequest{Op: teamapi.TaskRelease, ID: id})
	return t, err
}

// Complete implements Backend.
func (b ClientBackend) Complete(ctx context.Context, a team.Actor, id, commit string) (*teambus.Task, bool, error) {
	return b.task(ctx, a, teamapi.TaskRequest{Op: teamapi.TaskComplete, ID: id, Commit: commit})
}

// Fail implements Backend.
func (b ClientBackend) Fail(ctx context.Context, a team.Actor, id, reason string) (*teambus.Task, error) {
	t, _, err := b.task(ctx, a, teamapi.TaskRequest{Op: teamapi.TaskFail, ID: id, Reason: reason})
	return t, err
}

// Block implements Backend.
func (b ClientBackend) Block(ctx context.Context, a team.Actor, id, on, reason string) (*teambus.Task, error) {
	t, _, err := b.task(ctx, a, teamapi.TaskRequest{Op: teamapi.TaskBlock, ID: id, On: on, Reason: reason})
	return t, err
}

// Checkpoint implements Backend.
func (b ClientBackend) Checkpoint(ctx context.Context, a team.Actor, spec team.CheckpointSpec) (*teambus.Task, error) {
	cl, err := b.actor(a)
	if err != nil {
		return nil, err
	}
	return cl.Record(ctx, teamapi.CheckpointRequest{Task: spec.Task, Done: spec.Done, Remaining: spec.Remaining, LastAction: spec.LastAction, Files: spec.Files, Data: spec.Data, Auto: spec.Auto})
}

// Show implements Backend.
func (b ClientBackend) Show(ctx context.Context, teamID string) (*team.View, error) {
	cl, err := b.client(teamID, "", "")
	if err != nil {
		return nil, err
	}
	var v team.View
	if err := cl.ShowInto(ctx, &v); err != nil {
		return nil, err
	}
	if v.Team == nil {
		return nil, teambus.Unavailablef("team service show of team %s: no team in the answer", teamID)
	}
	return &v, nil
}

// Task implements Backend: the task of the team view.
func (b ClientBackend) Task(ctx context.Context, teamID, id string) (*teambus.Task, error) {
	v, err := b.Show(ctx, teamID)
	if err != nil {
		return nil, err
	}
	if i := slices.IndexFunc(v.Tasks, func(t *teambus.Task) bool { return t.ID == id }); i >= 0 {
		return v.Tasks[i], nil
	}
	return nil, teambus.NotFoundf("task %s not found in team %s: see task_list", id, teamID)
}

// Member implements Backend: the member of the team view (its record's
// identity fields: status, epoch, session).
func (b ClientBackend) Member(ctx context.Context, teamID, memberID string) (*teambus.Member, error) {
	v, err := b.Show(ctx, teamID)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(v.Members, func(m team.MemberView) bool { return m.ID == memberID })
	if i < 0 {
		return nil, teambus.NotFoundf("member %s not found in team %s", memberID, teamID)
	}
	m := v.Members[i]
	return &teambus.Member{ID: m.ID, Name: m.Name, Role: m.Role, Quantum: m.Quantum, Status: m.Status, Epoch: m.Epoch,
		Session: m.Session, ContextPct: m.ContextPct, CrashCount: m.CrashCount, ZombieSince: m.ZombieSince}, nil
}

// Team implements Backend: the team record of the team view.
func (b ClientBackend) Team(ctx context.Context, teamID string) (*teambus.Team, error) {
	v, err := b.Show(ctx, teamID)
	if err != nil {
		return nil, err
	}
	return v.Team, nil
}

// Brief implements Backend. A member may read only its own brief; the
// lead and the operator any.
func (b ClientBackend) Brief(ctx context.Context, teamID, memberID string) (*team.Brief, error) {
	cl, err := b.client(teamID, "", "")
	if err != nil {
		return nil, err
	}
	var br team.Brief
	if err := cl.BriefInto(ctx, memberID, 10, &br); err != nil {
		return nil, err
	}
	return &br, nil
}

// AddTask implements Backend: Direct only.
func (b ClientBackend) AddTask(ctx context.Context, teamID string, spec team.TaskSpec) (*teambus.Task, error) {
	if b.Direct == nil {
		return nil, errLeadCall("add tasks", teamID)
	}
	return b.Direct.AddTask(ctx, teamID, spec)
}

// Reassign implements Backend: a task operation of the service.
func (b ClientBackend) Reassign(ctx context.Context, a team.Actor, id, to string) (*teambus.Task, error) {
	t, _, err := b.task(ctx, a, teamapi.TaskRequest{Op: teamapi.TaskReassign, ID: id, To: to})
	return t, err
}

// Resume implements Backend: Direct only.
func (b ClientBackend) Resume(ctx context.Context, teamID, session string, force bool) (*team.Report, error) {
	if b.Direct == nil {
		return nil, errLeadCall("resume the team", teamID)
	}
	return b.Direct.Resume(ctx, teamID, session, force, false)
}

// Probe implements Backend: Direct only.
func (b ClientBackend) Probe(ctx context.Context, teamID string) (*team.Report, error) {
	if b.Direct == nil {
		return nil, errLeadCall("probe the team", teamID)
	}
	return b.Direct.Probe(ctx, teamID)
}
