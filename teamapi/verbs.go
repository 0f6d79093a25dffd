package teamapi

import (
	"context"
	"encoding/json"
	"time"

	"github.com/teambus/teambus"
)

// Verbs of the team service: the last token of its subjects.
const (
	VerbSend       = "send"
	VerbInbox      = "inbox"
	VerbAck        = "ack"
	VerbRelease    = "release"
	VerbTask       = "task"
	VerbCheckpoint = "checkpoint"
	VerbHeartbeat  = "heartbeat"
	VerbJoin       = "join"
	VerbBrief      = "brief"
	VerbReplay     = "replay"
	VerbShow       = "show"
	VerbSendBatch  = "send_batch"
)

// SendResult is what a send stored: the message's sequence, and whether
// an earlier send of the same id had stored it already.
type SendResult = teambus.SendResult

// API is the member API: what a member (or the operator on a member's
// behalf) asks of its team. Every request names its Actor; over the
// wire the service decides the actor's team and, for a member's
// credential, its member. team.Service implements it locally (package
// team, Service.API); the team service (package node) answers it on
// NATS, one endpoint per entry of Verbs.
type API interface {
	Send(ctx context.Context, req SendRequest) (SendResult, error)
	SendBatch(ctx context.Context, req SendBatchRequest) (SendBatchReply, error)
	Inbox(ctx context.Context, req InboxRequest) (InboxReply, error)
	Ack(ctx context.Context, req AckRequest) (AckReply, error)
	Release(ctx context.Context, req ReleaseRequest) (ReleaseReply, error)
	Task(ctx context.Context, req TaskRequest) (TaskReply, error)
	Checkpoint(ctx context.Context, req CheckpointRequest) (TaskReply, error)
	Heartbeat(ctx context.Context, req HeartbeatRequest) (HeartbeatReply, error)
	Join(ctx context.Context, req JoinRequest) (*teambus.Member, error)
	// Brief is the respawn prompt, a team.Brief.
	Brief(ctx context.Context, req BriefRequest) (any, error)
	Replay(ctx context.Context, req ReplayRequest) (ReplayReply, error)
	// Show is the team as `team show` prints it, a team.View.
	Show(ctx context.Context, req ShowRequest) (any, error)
	// Status reads the caller's own records at once (what a hook checks
	// before each delivery).
	Status(ctx context.Context, req StatusRequest) (StatusReply, error)
	// Event logs an event of the caller's session.
	Event(ctx context.Context, req EventRequest) (EventReply, error)
	// Resume attaches the caller as the lead; Probe says what a resume
	// would find. Both are the lead's (or the operator's).
	Resume(ctx context.Context, req ResumeRequest) (*teambus.Report, error)
	Probe(ctx context.Context, req ProbeRequest) (*teambus.Report, error)
	// Events reads a page of the team's event log (the lead's).
	Events(ctx context.Context, req EventsRequest) (EventsReply, error)
}

// Verb is one entry of the verb table: its name (the last token of its
// subject) and how a request of it is served.
type Verb struct {
	Name  string
	serve func(ctx context.Context, api API, data []byte, limit time.Duration, who func(*Actor) error) (any, error)
}

// Verbs is the table of every verb the service answers. The service
// registers one endpoint per entry; the relay forwards these and no
// other.
var Verbs = []Verb{
	verb(VerbSend, API.Send),
	verb(VerbInbox, API.Inbox),
	verb(VerbAck, API.Ack),
	verb(VerbRelease, API.Release),
	verb(VerbTask, API.Task),
	verb(VerbCheckpoint, API.Checkpoint),
	verb(VerbHeartbeat, API.Heartbeat),
	verb(VerbJoin, API.Join),
	verb(VerbBrief, API.Brief),
	verb(VerbReplay, API.Replay),
	verb(VerbShow, API.Show),
	verb(VerbSendBatch, API.SendBatch),
	verb(VerbStatus, API.Status),
	verb(VerbEvent, API.Event),
	verb(VerbResume, API.Resume),
	verb(VerbProbe, API.Probe),
	verb(VerbEvents, API.Events),
}

// IsVerb reports whether name is a verb of the table.
func IsVerb(name string) bool {
	for _, v := range Verbs {
		if v.Name == name {
			return true
		}
	}
	return false
}

// Serve runs one request of the verb on api: it decodes data once into
// the verb's request type, lets who set the request's actor (the caller
// as the server identified it, or a refusal), and calls api within limit
// (an inbox read adds its wait).
func (v Verb) Serve(ctx context.Context, api API, data []byte, limit time.Duration, who func(*Actor) error) (any, error) {
	return v.serve(ctx, api, data, limit, who)
}

// request is a request type: it embeds Actor.
type request[R any] interface {
	*R
	Caller() *Actor
}

func verb[R any, P request[R], Rep any](name string, call func(API, context.Context, R) (Rep, error)) Verb {
	return Verb{Name: name, serve: func(ctx context.Context, api API, data []byte, limit time.Duration, who func(*Actor) error) (any, error) {
		var req R
		if err := json.Unmarshal(data, &req); err != nil {
			return nil, teambus.Invalidf("invalid request: %w", err)
		}
		if err := who(P(&req).Caller()); err != nil {
			return nil, err
		}
		if w, ok := any(req).(interface{ Wait() time.Duration }); ok && w.Wait() > 0 {
			limit += w.Wait()
		}
		ctx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		return call(api, ctx, req)
	}}
}

// Wait is how long an inbox read blocks for mail: the service's time
// limit of the request grows by it.
func (r InboxRequest) Wait() time.Duration { return time.Duration(r.WaitMS) * time.Millisecond }

// VerbNames are the names of Verbs, in order.
func VerbNames() []string {
	out := make([]string, len(Verbs))
	for i, v := range Verbs {
		out[i] = v.Name
	}
	return out
}
