package teamapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/teambus/teambus"
)

// DefaultTimeout bounds one request when the context has no deadline.
const DefaultTimeout = 10 * time.Second

// Client makes the member API calls of one caller over a NATS connection.
// With a member credential the requests go to tb.<verb> in the member's
// account and the service acts as the member the credential names; with
// the operator's token they go to tbsvc.<team>.<verb> and name the
// member in the request's Actor.
type Client struct {
	tr       Transport
	team     string
	who      Actor
	operator bool
}

// Transport carries one request to the team service: subject is where
// the client sends it on NATS (Client.Subject), verb its last token. It
// returns the answer's error code (ErrorCodeHeader; empty for an answer)
// and body. It reports a service that is not there as ErrNoResponders
// (nats.ErrNoResponders) and no answer in time as
// context.DeadlineExceeded, as a NATS request does.
type Transport interface {
	Request(ctx context.Context, subject, verb string, data []byte) (code string, resp []byte, err error)
	// MaxPayload is the largest request it carries.
	MaxPayload() int64
}

// Config says who calls: Team and Member are the caller (for a member
// credential they must be the credential's), Session its incarnation.
// Operator is true for the node token's connection: the requests then go
// to the data account's service subjects.
type Config struct {
	Team     string
	Member   string
	Session  string
	Operator bool
}

// NewWith returns a client whose requests tr carries. It does no I/O.
func NewWith(tr Transport, cfg Config) (*Client, error) {
	if cfg.Operator && cfg.Team == "" && cfg.Member == "" {
		// The operator's client of every team: each request names its
		// actor, team included.
		return &Client{tr: tr, operator: true}, nil
	}
	if err := teambus.ValidateID("team", cfg.Team); err != nil {
		return nil, err
	}
	if cfg.Member != teambus.Lead {
		if err := teambus.ValidateMemberID(cfg.Member); err != nil {
			return nil, err
		}
	}
	return &Client{tr: tr, team: cfg.Team, who: Actor{Team: cfg.Team, Member: cfg.Member, Session: cfg.Session}, operator: cfg.Operator}, nil
}

// Subject is where the client sends verb.
func (c *Client) Subject(verb string) string {
	if c.operator {
		return ServiceSubject(c.team, verb)
	}
	return MemberServiceSubject(verb)
}

// Call sends req to verb and decodes the answer into resp. A refused
// request comes back as the teambus error the service returned. A
// request the connection can not carry is refused before it is sent
// (teambus.ErrInvalid). While the bus elects a leader (teambus.ErrNoLeader:
// nothing was stored) the request is sent again as long as the context
// leaves time for the service to wait for the leader once more.
func (c *Client) Call(ctx context.Context, verb string, req, resp any) error {
	b, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode %s request: %w", verb, err)
	}
	return c.call(ctx, c.team, verb, b, resp)
}

// retryGap is the pause before a request that met an election is sent
// again.
const retryGap = 250 * time.Millisecond

func (c *Client) call(ctx context.Context, team, verb string, b []byte, resp any) error {
	if max := c.tr.MaxPayload(); max > 0 && int64(len(b)) > max {
		return teambus.Invalidf("the %s request is %d bytes, more than the bus carries (%d): nothing sent", verb, len(b), max)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	for {
		err := c.request(ctx, team, verb, b, resp)
		if !errors.Is(err, teambus.ErrNoLeader) {
			return err
		}
		dl, _ := ctx.Deadline()
		if time.Until(dl) < teambus.ElectionWait+retryGap+time.Second {
			return err
		}
		t := time.NewTimer(retryGap)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// request sends one request and decodes its answer.
func (c *Client) request(ctx context.Context, team, verb string, b []byte, resp any) error {
	subject := MemberServiceSubject(verb)
	if c.operator {
		subject = ServiceSubject(team, verb)
	}
	code, data, err := c.tr.Request(ctx, subject, verb, b)
	if err != nil {
		switch {
		case errors.Is(err, ErrNoResponders):
			return teambus.Unavailablef("team service (%s) is not running on the bus: start the node with `teambus bus start`, or run `teambus serve` beside an external NATS", verb)
		case errors.Is(err, errMaxPayload):
			return teambus.Invalidf("the %s request is %d bytes, more than the bus carries: nothing sent", verb, len(b))
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, errTimeout):
			return teambus.Unavailablef("team service %s in team %s: no answer in time: %w", verb, team, err)
		}
		return teambus.Unavailablef("team service %s in team %s: %w", verb, team, err)
	}
	if code != "" {
		var er ErrorReply
		if err := json.Unmarshal(data, &er); err != nil {
			return teambus.Unavailablef("team service %s in team %s: undecodable error %q", verb, team, code)
		}
		if er.Error.Code == "" {
			er.Error.Code = Code(code)
		}
		return &er.Error
	}
	if resp == nil {
		return nil
	}
	if err := json.Unmarshal(data, resp); err != nil {
		return teambus.Unavailablef("team service %s in team %s: undecodable answer: %w", verb, team, err)
	}
	return nil
}

// Send stores a message from the caller. A body that is empty, not
// UTF-8, or larger than a request of the connection carries is refused
// before any request (teambus.ErrInvalid); the team's own limit is the
// service's to check. A message without an id gets a random one here, so
// a request sent again stores it once.
func (c *Client) Send(ctx context.Context, req SendRequest) (SendResult, error) {
	req.Actor = c.actor(req.Actor)
	var res SendResult
	if err := c.reaches(req.Actor); err != nil {
		return res, err
	}
	// JSON would replace invalid UTF-8 on the way: refuse it here, where
	// the bytes are still the user's.
	if err := teambus.ValidateBody(req.Body); err != nil {
		return res, err
	}
	if req.ID == "" {
		req.ID = NewMessageID()
	}
	b, err := json.Marshal(req)
	if err != nil {
		return res, fmt.Errorf("encode %s request: %w", VerbSend, err)
	}
	if err := c.checkFit(ctx, req.Actor, int64(len(b)), len(req.Body), ""); err != nil {
		return res, err
	}
	err = c.call(ctx, req.Team, VerbSend, b, &res)
	return res, err
}

// NewMessageID returns a random message id: 24 hex digits.
func NewMessageID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}

// BatchEnvelope is the room a send_batch request keeps beside its
// messages.
const BatchEnvelope = 4 << 10

// CheckFit refuses, before any request, a message of msgs whose body is
// too large for a request of the connection, with the message a send of
// it alone gets. A caller that splits msgs over several requests checks
// them all first.
func (c *Client) CheckFit(ctx context.Context, msgs []BatchMessage) error {
	if c.tr.MaxPayload() <= 0 {
		return nil
	}
	for i, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("message %d: encode: %w", i+1, err)
		}
		where := fmt.Sprintf("message %d: ", i+1)
		if m.Line > 0 {
			where = fmt.Sprintf("line %d: ", m.Line)
		}
		if err := c.checkFit(ctx, c.who, int64(len(b))+BatchEnvelope, len(m.Body), where); err != nil {
			return err
		}
	}
	return nil
}

// checkFit refuses a body of body bytes in a request of size bytes that
// the connection can not carry. The limit it names is the smaller of the
// team's (asked from the service, which is no send) and what a request
// carries.
func (c *Client) checkFit(ctx context.Context, a Actor, size int64, body int, where string) error {
	carried := c.tr.MaxPayload()
	if carried <= 0 || size <= carried {
		return nil
	}
	limit := max(0, carried-(size-int64(body)))
	if tm := c.teamMaxBody(ctx, a); tm > 0 && tm < limit {
		limit = tm
	}
	return teambus.Invalidf("%smessage body is %d bytes, at most %d: nothing sent; put large content in a file and send its path", where, body, limit)
}

// teamMaxBody is the team's body limit, or 0 when the service does not
// say in a moment.
func (c *Client) teamMaxBody(ctx context.Context, a Actor) int64 {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var v struct {
		Team *struct {
			MaxBody int64 `json:"max_body"`
		} `json:"team"`
	}
	raw, err := c.Show(ctx, ShowRequest{Actor: a})
	if err != nil {
		return 0
	}
	if b, ok := raw.(json.RawMessage); !ok || json.Unmarshal(b, &v) != nil || v.Team == nil {
		return 0
	}
	if v.Team.MaxBody <= 0 {
		return teambus.DefaultMaxBody
	}
	return v.Team.MaxBody
}

// SendMessages stores msgs from the caller in one request, in order, and
// returns a result for each; with check it only checks them (nothing is
// stored, no results). The service takes at most team.MaxSendBatch
// messages a request, and the request must fit the connection's
// MaxPayload: a longer list is split by the caller, checked whole first
// (CheckFit, then with check).
func (c *Client) SendMessages(ctx context.Context, msgs []BatchMessage, check bool) ([]SendResult, error) {
	for i, m := range msgs {
		// As Send: invalid UTF-8 is refused while the bytes are the user's.
		if err := teambus.ValidateBody(m.Body); err != nil {
			if m.Line > 0 {
				return nil, fmt.Errorf("line %d: %w", m.Line, err)
			}
			return nil, fmt.Errorf("message %d: %w", i+1, err)
		}
	}
	if err := c.CheckFit(ctx, msgs); err != nil {
		return nil, err
	}
	var res SendBatchReply
	err := c.Call(ctx, VerbSendBatch, SendBatchRequest{Actor: c.who, Messages: msgs, Check: check}, &res)
	if err == nil && !check && len(res.Results) != len(msgs) {
		return res.Results, teambus.Unavailablef("team service %s: %d results for %d messages", VerbSendBatch, len(res.Results), len(msgs))
	}
	return res.Results, err
}

// MaxPayload is the largest request the connection can send.
func (c *Client) MaxPayload() int64 { return c.tr.MaxPayload() }

// Read reads the caller's inbox in mode (InboxPeek, InboxLease,
// InboxAck), up to max messages, waiting up to wait for the first.
func (c *Client) Read(ctx context.Context, mode string, max int, wait time.Duration) ([]Leased, error) {
	res, err := c.Inbox(ctx, InboxRequest{Mode: mode, Max: max, WaitMS: waitMS(wait)})
	return res.Messages, err
}

// AckSeqs acknowledges the caller's mail by sequence.
func (c *Client) AckSeqs(ctx context.Context, seqs []uint64) (teambus.AckResult, error) {
	res, err := c.Ack(ctx, AckRequest{Seqs: seqs})
	return teambus.AckResult{Acked: res.Acked, Already: res.Already}, err
}

// AckLeased acknowledges leased mail by its tokens.
func (c *Client) AckLeased(ctx context.Context, msgs []Leased) (teambus.AckResult, error) {
	res, err := c.Ack(ctx, AckRequest{Tokens: tokens(msgs)})
	return teambus.AckResult{Acked: res.Acked, Already: res.Already}, err
}

// ReleaseLeased returns leased mail for redelivery now.
func (c *Client) ReleaseLeased(ctx context.Context, msgs []Leased) (int, error) {
	res, err := c.Release(ctx, ReleaseRequest{Tokens: tokens(msgs)})
	return res.Released, err
}

func tokens(msgs []Leased) []Token {
	out := make([]Token, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, Token{Seq: m.Seq, Token: m.Token})
	}
	return out
}

// Do runs one task operation of the caller.
func (c *Client) Do(ctx context.Context, req TaskRequest) (*teambus.Task, bool, error) {
	req.Actor = c.who
	res, err := c.Task(ctx, req)
	return res.Task, res.Changed, err
}

// Record records progress on the caller's task.
func (c *Client) Record(ctx context.Context, req CheckpointRequest) (*teambus.Task, error) {
	req.Actor = c.who
	res, err := c.Checkpoint(ctx, req)
	return res.Task, err
}

// Beat renews the caller's heartbeat and returns its revision.
func (c *Client) Beat(ctx context.Context, req HeartbeatRequest) (uint64, error) {
	req.Actor = c.who
	res, err := c.Heartbeat(ctx, req)
	return res.Rev, err
}

// JoinSession registers the caller's session as its new incarnation.
func (c *Client) JoinSession(ctx context.Context) (*teambus.Member, error) {
	return c.Join(ctx, JoinRequest{Actor: c.who})
}

// BriefInto returns the respawn prompt of member as the service's JSON (a
// team.Brief), decoded into out.
func (c *Client) BriefInto(ctx context.Context, member string, mail int, out any) error {
	return c.Call(ctx, VerbBrief, BriefRequest{Actor: c.who, Of: member, Mail: mail}, out)
}

// ReplayPage returns one page of the caller's own mail from since on: at
// most limit messages, fewer when the service's byte budget ends the page
// first. Follow Next for the rest (ReplayOwn does).
func (c *Client) ReplayPage(ctx context.Context, since uint64, limit int) (ReplayReply, error) {
	return c.Replay(ctx, ReplayRequest{Actor: c.who, SinceSeq: since, Limit: limit})
}

// ShowInto returns the caller's team as the service's JSON (a team.View),
// decoded into out.
func (c *Client) ShowInto(ctx context.Context, out any) error {
	return c.Call(ctx, VerbShow, ShowRequest{Actor: c.who}, out)
}

// The member API over the transport: each call sends its request as it
// is, acting as the request's actor (the client's own when the request
// names none; over the wire the service decides who calls).

var _ API = (*Client)(nil)

// actor is the actor a request acts as: the client's unless it names a
// member. A request for another team than the client's is not sent: the
// subject, not the request, decides the team.
func (c *Client) actor(a Actor) Actor {
	if a.Member == "" {
		return c.who
	}
	if a.Team == "" {
		a.Team = c.team
	}
	return a
}

func callAPI[Rep any](ctx context.Context, c *Client, verb string, a Actor, req any) (Rep, error) {
	var rep Rep
	if err := c.reaches(a); err != nil {
		return rep, err
	}
	b, err := json.Marshal(req)
	if err != nil {
		return rep, fmt.Errorf("encode %s request: %w", verb, err)
	}
	err = c.call(ctx, a.Team, verb, b, &rep)
	return rep, err
}

// reaches refuses, before it is sent, a request the client can not make:
// one without a team, or, on a member's credential, for another team or
// member than the credential's (the service would refuse it).
func (c *Client) reaches(a Actor) error {
	if a.Team == "" || a.Member == "" {
		return teambus.Invalidf("no team or member given")
	}
	if c.operator {
		return nil
	}
	if a.Team != c.team {
		return teambus.Invalidf("the credential of %s in team %s reaches only team %s, not %s", c.who.Member, c.team, c.team, a.Team)
	}
	return nil
}

// SendBatch implements API.
func (c *Client) SendBatch(ctx context.Context, req SendBatchRequest) (SendBatchReply, error) {
	req.Actor = c.actor(req.Actor)
	return callAPI[SendBatchReply](ctx, c, VerbSendBatch, req.Actor, req)
}

// Inbox implements API. The request outlasts the wait.
func (c *Client) Inbox(ctx context.Context, req InboxRequest) (InboxReply, error) {
	req.Actor = c.actor(req.Actor)
	if wait := req.Wait(); wait > 0 {
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) < wait+5*time.Second {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, wait+5*time.Second)
			defer cancel()
		}
	}
	return callAPI[InboxReply](ctx, c, VerbInbox, req.Actor, req)
}

// Ack implements API.
func (c *Client) Ack(ctx context.Context, req AckRequest) (AckReply, error) {
	req.Actor = c.actor(req.Actor)
	return callAPI[AckReply](ctx, c, VerbAck, req.Actor, req)
}

// Release implements API.
func (c *Client) Release(ctx context.Context, req ReleaseRequest) (ReleaseReply, error) {
	req.Actor = c.actor(req.Actor)
	return callAPI[ReleaseReply](ctx, c, VerbRelease, req.Actor, req)
}

// Task implements API.
func (c *Client) Task(ctx context.Context, req TaskRequest) (TaskReply, error) {
	req.Actor = c.actor(req.Actor)
	rep, err := callAPI[TaskReply](ctx, c, VerbTask, req.Actor, req)
	if err == nil && rep.Task == nil {
		err = teambus.Unavailablef("team service task %s: no task in the answer", req.Op)
	}
	return rep, err
}

// Checkpoint implements API.
func (c *Client) Checkpoint(ctx context.Context, req CheckpointRequest) (TaskReply, error) {
	req.Actor = c.actor(req.Actor)
	// The caps are checked here too, so a checkpoint too large for a
	// request is refused with them, not with the bus's payload limit.
	if err := teambus.ValidateCheckpoint(req.Done, req.Remaining, req.LastAction, req.Files, req.Data); err != nil {
		return TaskReply{}, err
	}
	rep, err := callAPI[TaskReply](ctx, c, VerbCheckpoint, req.Actor, req)
	if err == nil && rep.Task == nil {
		err = teambus.Unavailablef("team service checkpoint: no task in the answer")
	}
	return rep, err
}

// Heartbeat implements API.
func (c *Client) Heartbeat(ctx context.Context, req HeartbeatRequest) (HeartbeatReply, error) {
	req.Actor = c.actor(req.Actor)
	return callAPI[HeartbeatReply](ctx, c, VerbHeartbeat, req.Actor, req)
}

// Join implements API.
func (c *Client) Join(ctx context.Context, req JoinRequest) (*teambus.Member, error) {
	req.Actor = c.actor(req.Actor)
	return callAPI[*teambus.Member](ctx, c, VerbJoin, req.Actor, req)
}

// Brief implements API: the brief as the service's JSON.
func (c *Client) Brief(ctx context.Context, req BriefRequest) (any, error) {
	req.Actor = c.actor(req.Actor)
	return callAPI[json.RawMessage](ctx, c, VerbBrief, req.Actor, req)
}

// Replay implements API.
func (c *Client) Replay(ctx context.Context, req ReplayRequest) (ReplayReply, error) {
	req.Actor = c.actor(req.Actor)
	return callAPI[ReplayReply](ctx, c, VerbReplay, req.Actor, req)
}

// Show implements API: the team view as the service's JSON.
func (c *Client) Show(ctx context.Context, req ShowRequest) (any, error) {
	req.Actor = c.actor(req.Actor)
	return callAPI[json.RawMessage](ctx, c, VerbShow, req.Actor, req)
}

// Status implements API.
func (c *Client) Status(ctx context.Context, req StatusRequest) (StatusReply, error) {
	req.Actor = c.actor(req.Actor)
	rep, err := callAPI[StatusReply](ctx, c, VerbStatus, req.Actor, req)
	if err == nil && rep.Team == nil {
		err = teambus.Unavailablef("team service status: no team in the answer")
	}
	return rep, err
}

// Event implements API.
func (c *Client) Event(ctx context.Context, req EventRequest) (EventReply, error) {
	req.Actor = c.actor(req.Actor)
	return callAPI[EventReply](ctx, c, VerbEvent, req.Actor, req)
}

// Resume implements API.
func (c *Client) Resume(ctx context.Context, req ResumeRequest) (*teambus.Report, error) {
	req.Actor = c.actor(req.Actor)
	return reportOf(callAPI[*teambus.Report](ctx, c, VerbResume, req.Actor, req))
}

// Probe implements API.
func (c *Client) Probe(ctx context.Context, req ProbeRequest) (*teambus.Report, error) {
	req.Actor = c.actor(req.Actor)
	return reportOf(callAPI[*teambus.Report](ctx, c, VerbProbe, req.Actor, req))
}

func reportOf(r *teambus.Report, err error) (*teambus.Report, error) {
	if err == nil && r == nil {
		err = teambus.Unavailablef("team service: no report in the answer")
	}
	return r, err
}

// Events implements API.
func (c *Client) Events(ctx context.Context, req EventsRequest) (EventsReply, error) {
	req.Actor = c.actor(req.Actor)
	return callAPI[EventsReply](ctx, c, VerbEvents, req.Actor, req)
}
