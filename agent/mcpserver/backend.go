package mcpserver

import (
	"context"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/team"
)

// Backend is what the tools call: the member API of a team. ServiceBackend
// implements it on a team.Service (JetStream: the operator's connection),
// ClientBackend on the request/reply team service (any connection, and the
// only one for a member credential). Member calls check the actor for
// fencing.
type Backend interface {
	Send(ctx context.Context, a team.Actor, spec team.SendSpec) (bus.SendResult, error)
	// Lease leases up to opts.Max messages of the actor's inbox.
	Lease(ctx context.Context, a team.Actor, opts bus.LeaseOptions) (Lease, error)
	// Peek returns up to opts.Max messages of the actor's inbox and
	// leaves them there: they are read and released in one step, before
	// it returns, and nothing stays held (opts.Ack is ignored).
	Peek(ctx context.Context, a team.Actor, opts bus.InboxOptions) ([]teambus.Message, error)
	Ack(ctx context.Context, a team.Actor, seqs []uint64) (bus.AckResult, error)
	// Replay calls fn for the mailbox messages that match f and that a
	// may read (the whole mailbox, or through the service its own mail).
	Replay(ctx context.Context, a team.Actor, f bus.ReplayFilter, fn func(teambus.Message) error) error

	Next(ctx context.Context, a team.Actor) (*teambus.Task, error)
	Claim(ctx context.Context, a team.Actor, id string) (*teambus.Task, error)
	Release(ctx context.Context, a team.Actor, id string) (*teambus.Task, error)
	Complete(ctx context.Context, a team.Actor, id, commit string) (*teambus.Task, bool, error)
	Fail(ctx context.Context, a team.Actor, id, reason string) (*teambus.Task, error)
	Block(ctx context.Context, a team.Actor, id, on, reason string) (*teambus.Task, error)
	Checkpoint(ctx context.Context, a team.Actor, spec team.CheckpointSpec) (*teambus.Task, error)

	// Show is the whole team with liveness.
	Show(ctx context.Context, teamID string) (*team.View, error)
	Task(ctx context.Context, teamID, id string) (*teambus.Task, error)
	Member(ctx context.Context, teamID, member string) (*teambus.Member, error)
	Team(ctx context.Context, teamID string) (*teambus.Team, error)
	Brief(ctx context.Context, teamID, member string) (*team.Brief, error)

	// Lead calls.
	AddTask(ctx context.Context, teamID string, spec team.TaskSpec) (*teambus.Task, error)
	Reassign(ctx context.Context, a team.Actor, id, to string) (*teambus.Task, error)
	Resume(ctx context.Context, teamID, session string, force bool) (*team.Report, error)
	Probe(ctx context.Context, teamID string) (*team.Report, error)
}

// Lease is leased mail: in flight until acked or released.
type Lease interface {
	// Messages are the leased messages, oldest first.
	Messages() []teambus.Message
	// Ack acknowledges the given sequences and returns those acked.
	Ack(ctx context.Context, seqs ...uint64) ([]uint64, error)
	// Release returns everything not acked to the inbox at once.
	Release(ctx context.Context) error
}

// ServiceBackend is the Backend on a team.Service.
type ServiceBackend struct {
	Svc *team.Service
}

var _ Backend = ServiceBackend{}

// Send implements Backend.
func (b ServiceBackend) Send(ctx context.Context, a team.Actor, spec team.SendSpec) (bus.SendResult, error) {
	return b.Svc.Send(ctx, a, spec)
}

// Lease implements Backend.
func (b ServiceBackend) Lease(ctx context.Context, a team.Actor, opts bus.LeaseOptions) (Lease, error) {
	l, err := b.Svc.Lease(ctx, a, opts)
	if err != nil {
		return nil, err
	}
	return busLease{l}, nil
}

// Peek implements Backend.
func (b ServiceBackend) Peek(ctx context.Context, a team.Actor, opts bus.InboxOptions) ([]teambus.Message, error) {
	opts.Ack = false
	return b.Svc.Inbox(ctx, a, opts)
}

// busLease adapts *bus.Lease.
type busLease struct{ l *bus.Lease }

func (l busLease) Messages() []teambus.Message { return l.l.Messages }
func (l busLease) Ack(ctx context.Context, seqs ...uint64) ([]uint64, error) {
	return l.l.Ack(ctx, seqs...)
}
func (l busLease) Release(ctx context.Context) error { return l.l.Release(ctx) }

// Ack implements Backend.
func (b ServiceBackend) Ack(ctx context.Context, a team.Actor, seqs []uint64) (bus.AckResult, error) {
	return b.Svc.Ack(ctx, a, seqs)
}

// Replay implements Backend.
func (b ServiceBackend) Replay(ctx context.Context, a team.Actor, f bus.ReplayFilter, fn func(teambus.Message) error) error {
	return b.Svc.ReplayMailbox(ctx, a.Team, f, fn)
}

// Next implements Backend.
func (b ServiceBackend) Next(ctx context.Context, a team.Actor) (*teambus.Task, error) {
	return b.Svc.Next(ctx, a)
}

// Claim implements Backend.
func (b ServiceBackend) Claim(ctx context.Context, a team.Actor, id string) (*teambus.Task, error) {
	return b.Svc.Claim(ctx, a, id)
}

// Release implements Backend.
func (b ServiceBackend) Release(ctx context.Context, a team.Actor, id string) (*teambus.Task, error) {
	return b.Svc.Release(ctx, a, id)
}

// Complete implements Backend.
func (b ServiceBackend) Complete(ctx context.Context, a team.Actor, id, commit string) (*teambus.Task, bool, error) {
	return b.Svc.Complete(ctx, a, id, commit)
}

// Fail implements Backend.
func (b ServiceBackend) Fail(ctx context.Context, a team.Actor, id, reason string) (*teambus.Task, error) {
	return b.Svc.Fail(ctx, a, id, reason)
}

// Block implements Backend.
func (b ServiceBackend) Block(ctx context.Context, a team.Actor, id, on, reason string) (*teambus.Task, error) {
	return b.Svc.Block(ctx, a, id, on, reason)
}

// Checkpoint implements Backend.
func (b ServiceBackend) Checkpoint(ctx context.Context, a team.Actor, spec team.CheckpointSpec) (*teambus.Task, error) {
	return b.Svc.Checkpoint(ctx, a, spec)
}

// Show implements Backend.
func (b ServiceBackend) Show(ctx context.Context, teamID string) (*team.View, error) {
	return b.Svc.Show(ctx, teamID)
}

// Task implements Backend.
func (b ServiceBackend) Task(ctx context.Context, teamID, id string) (*teambus.Task, error) {
	t, err := b.Svc.TaskRecord(ctx, teamID, id)
	return t, err
}

// Member implements Backend.
func (b ServiceBackend) Member(ctx context.Context, teamID, member string) (*teambus.Member, error) {
	m, err := b.Svc.MemberRecord(ctx, teamID, member)
	return m, err
}

// Team implements Backend.
func (b ServiceBackend) Team(ctx context.Context, teamID string) (*teambus.Team, error) {
	t, err := b.Svc.TeamRecord(ctx, teamID)
	return t, err
}

// Brief implements Backend.
func (b ServiceBackend) Brief(ctx context.Context, teamID, member string) (*team.Brief, error) {
	return b.Svc.Brief(ctx, teamID, member, 10)
}

// AddTask implements Backend.
func (b ServiceBackend) AddTask(ctx context.Context, teamID string, spec team.TaskSpec) (*teambus.Task, error) {
	return b.Svc.AddTask(ctx, teamID, spec)
}

// Reassign implements Backend.
func (b ServiceBackend) Reassign(ctx context.Context, a team.Actor, id, to string) (*teambus.Task, error) {
	return b.Svc.Reassign(ctx, a, id, to)
}

// Resume implements Backend.
func (b ServiceBackend) Resume(ctx context.Context, teamID, session string, force bool) (*team.Report, error) {
	return b.Svc.Resume(ctx, teamID, session, force, false)
}

// Probe implements Backend.
func (b ServiceBackend) Probe(ctx context.Context, teamID string) (*team.Report, error) {
	return b.Svc.Probe(ctx, teamID)
}
