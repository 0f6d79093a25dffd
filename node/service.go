package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/member"
	"github.com/teambus/teambus/team"
)

// Defaults of Config.
const (
	// DefaultName is the micro service name ($SRV discovery).
	DefaultName = bus.ServiceName
	// DefaultQueueGroup is the queue group every instance joins.
	DefaultQueueGroup = "teambus"
	// DefaultConcurrency bounds the requests one instance runs at once.
	DefaultConcurrency = 256
	// DefaultTimeout bounds one request (an inbox wait adds its wait).
	DefaultTimeout = 30 * time.Second
	// MaxWait caps the wait of an inbox read.
	MaxWait = 10 * time.Minute
)

// RequestInfoHeader is the header the server sets on a request that
// crossed a service import with shared request info. It is looked up by
// this exact key: other casings are the caller's own headers.
const RequestInfoHeader = "Nats-Request-Info"

// Config configures the team service.
type Config struct {
	// Team configures the team operations (limits of new streams, clock).
	Team team.Config
	// Logger receives refused requests and failures; nil discards.
	Logger *slog.Logger
	// Name and QueueGroup of the micro service; defaults DefaultName and
	// DefaultQueueGroup.
	Name, QueueGroup string
	// Concurrency bounds the requests run at once; default
	// DefaultConcurrency.
	Concurrency int
	// Timeout bounds one request; default DefaultTimeout.
	Timeout time.Duration
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.Concurrency < 0 || c.Timeout < 0 {
		return teambus.Invalidf("team service: concurrency and timeout must not be negative")
	}
	return nil
}

// Service is a running team service on one connection to the data
// account.
type Service struct {
	cfg  Config
	log  *slog.Logger
	svc  *team.Service
	nc   *nats.Conn
	ms   micro.Service
	sem  chan struct{}
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// Open starts the team service on nc, a connection of the data account
// (the node token's). It answers until Close.
func Open(ctx context.Context, nc *nats.Conn, cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if cfg.QueueGroup == "" {
		cfg.QueueGroup = DefaultQueueGroup
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Team.Logger == nil {
		cfg.Team.Logger = cfg.Logger
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(256))
	if err != nil {
		return nil, fmt.Errorf("team service: jetstream: %w", err)
	}
	sctx, stop := context.WithCancel(context.Background())
	s := &Service{cfg: cfg, log: cfg.Logger, svc: team.New(js, cfg.Team), nc: nc, sem: make(chan struct{}, cfg.Concurrency), ctx: sctx, stop: stop}
	ms, err := micro.AddService(nc, micro.Config{
		Name:        cfg.Name,
		Version:     "1.0.0",
		Description: "teambus team service: the member API",
		QueueGroup:  cfg.QueueGroup,
	})
	if err != nil {
		stop()
		return nil, fmt.Errorf("team service: %w", err)
	}
	s.ms = ms
	handlers := map[string]func(context.Context, caller, []byte) (any, error){
		member.VerbSend:       s.send,
		member.VerbInbox:      s.inbox,
		member.VerbAck:        s.ack,
		member.VerbRelease:    s.release,
		member.VerbTask:       s.task,
		member.VerbCheckpoint: s.checkpoint,
		member.VerbHeartbeat:  s.heartbeat,
		member.VerbJoin:       s.join,
		member.VerbBrief:      s.brief,
		member.VerbReplay:     s.replay,
		member.VerbShow:       s.show,
		member.VerbSendBatch:  s.sendBatch,
	}
	for _, verb := range member.Verbs {
		if err := ms.AddEndpoint(verb, s.handler(verb, handlers[verb]), micro.WithEndpointSubject(bus.ServiceSubject("*", verb))); err != nil {
			_ = ms.Stop() // best effort: the endpoint error is what Start reports
			stop()
			return nil, fmt.Errorf("team service endpoint %s: %w", verb, err)
		}
	}
	return s, nil
}

// Team is the team.Service the verbs run on.
func (s *Service) Team() *team.Service { return s.svc }

// Stats are the micro service's statistics.
func (s *Service) Stats() micro.Stats { return s.ms.Stats() }

// Close stops answering, cancels the requests in flight and waits for
// them. It is safe to call more than once.
func (s *Service) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = s.ms.Stop()
		s.stop()
		s.wg.Wait()
	})
	return s.closeErr
}

// errRefused marks a request refused for who sent it (a credential acting
// beyond itself, request info that does not check out): logged as such.
var errRefused = errors.New("refused")

// refusal is an errRefused that is also a teambus.ErrInvalid (exit 2).
type refusal struct{ msg string }

func (e *refusal) Error() string   { return e.msg }
func (e *refusal) Unwrap() []error { return []error{errRefused, teambus.ErrInvalid} }

// refusedf returns a refusal whose message starts with "refused: ".
func refusedf(format string, args ...any) error {
	return &refusal{msg: "refused: " + fmt.Sprintf(format, args...)}
}

// caller is who sent a request: a member of team through its credential,
// or the operator (who names the member in the request).
type caller struct {
	team     string
	member   string // set for a member credential
	operator bool
}

// requestInfo is the part of Nats-Request-Info the service reads.
type requestInfo struct {
	Acc  string `json:"acc"`
	User string `json:"user"`
}

// identify decides who sent a request to subject tbsvc.<team>.<verb>.
func identify(subject string, h micro.Headers) (caller, error) {
	t := strings.Split(subject, ".")
	if len(t) != 3 || t[0] != bus.ServicePrefix {
		return caller{}, teambus.Invalidf("not a team service subject")
	}
	teamID := t[1]
	if err := teambus.ValidateID("team", teamID); err != nil {
		return caller{}, err
	}
	vals, ok := h[RequestInfoHeader]
	if !ok {
		// Published inside the data account: only the operator can.
		return caller{team: teamID, operator: true}, nil
	}
	if len(vals) != 1 {
		return caller{}, refusedf("ambiguous request info")
	}
	var ri requestInfo
	if err := json.Unmarshal([]byte(vals[0]), &ri); err != nil {
		return caller{}, refusedf("unreadable request info")
	}
	if ri.Acc != bus.MemberAccount(teamID) {
		return caller{}, refusedf("account is not the member account of team %s", teamID)
	}
	ut, um, ok := strings.Cut(ri.User, ".")
	if !ok || ut != teamID {
		return caller{}, refusedf("user is not a member of team %s", teamID)
	}
	if um != teambus.Lead {
		if err := teambus.ValidateMemberID(um); err != nil {
			return caller{}, refusedf("user is not a member of team %s", teamID)
		}
	}
	return caller{team: teamID, member: um}, nil
}

// actor is the team.Actor a request acts as: the credential's member, or
// the member the operator names.
func (c caller) actor(w member.Who) (team.Actor, error) {
	m := c.member
	if c.operator {
		m = w.Member
	} else if w.Member != "" && w.Member != c.member {
		return team.Actor{}, refusedf("the credential of %s can act only as %s, not as %s", c.member, c.member, w.Member)
	}
	a := team.Actor{Team: c.team, Member: m, Session: w.Session}
	return a, a.Validate()
}

// handler runs fn for each request of verb in its own goroutine, bounded
// by the concurrency limit, and answers the caller.
func (s *Service) handler(verb string, fn func(context.Context, caller, []byte) (any, error)) micro.HandlerFunc {
	return func(req micro.Request) {
		select {
		case s.sem <- struct{}{}:
		case <-s.ctx.Done():
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-s.sem }()
			s.serve(verb, fn, req)
		}()
	}
}

func (s *Service) serve(verb string, fn func(context.Context, caller, []byte) (any, error), req micro.Request) {
	c, err := identify(req.Subject(), req.Headers())
	if err != nil {
		s.log.Warn("team service request refused", "verb", verb, "subject", req.Subject(), "err", err)
		s.fail(req, err)
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.Timeout)
	defer cancel()
	res, err := fn(ctx, c, req.Data())
	if err != nil {
		if errors.Is(err, errRefused) {
			s.log.Warn("team service request refused", "verb", verb, "team", c.team, "member", c.member, "operator", c.operator, "err", err)
		}
		s.fail(req, err)
		return
	}
	b, err := json.Marshal(res)
	if err != nil {
		s.fail(req, fmt.Errorf("encode %s reply: %w", verb, err))
		return
	}
	if err := s.respond(req, &nats.Msg{Data: b}); err != nil {
		s.log.Warn("team service reply", "verb", verb, "team", c.team, "err", err)
	}
}

// respond publishes the reply to req on the service's connection. Replies
// are sent from the request's own goroutine, after micro's handler has
// returned, so they must not go through micro.Request's Respond/Error:
// those record the outcome in the request, which micro reads when the
// handler returns (a data race). Micro's error counts then miss these
// replies; the service logs refusals itself.
func (s *Service) respond(req micro.Request, m *nats.Msg) error {
	if req.Reply() == "" {
		return nil // a publish, not a request: nobody to answer
	}
	m.Subject = req.Reply()
	return s.nc.PublishMsg(m)
}

func (s *Service) fail(req micro.Request, err error) {
	body := member.Classify(err)
	b, _ := json.Marshal(member.ErrorReply{Error: body})
	m := &nats.Msg{Data: b, Header: nats.Header{}}
	m.Header.Set(micro.ErrorHeader, body.Class)
	m.Header.Set(micro.ErrorCodeHeader, body.Kind)
	if rerr := s.respond(req, m); rerr != nil {
		s.log.Warn("team service error reply", "subject", req.Subject(), "err", rerr)
	}
}

// decode reads a request body into v and the caller's Who.
func decode(data []byte, v any) (member.Who, error) {
	var w member.Who
	if err := json.Unmarshal(data, &w); err != nil {
		return w, teambus.Invalidf("invalid request: %w", err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return w, teambus.Invalidf("invalid request: %w", err)
	}
	return w, nil
}

// decodeActor decodes a request and resolves its actor.
func decodeActor(c caller, data []byte, v any) (team.Actor, error) {
	w, err := decode(data, v)
	if err != nil {
		return team.Actor{}, err
	}
	return c.actor(w)
}

func (s *Service) send(ctx context.Context, c caller, data []byte) (any, error) {
	var r member.SendRequest
	a, err := decodeActor(c, data, &r)
	if err != nil {
		return nil, err
	}
	typ, to, err := sendRules(a, r.Type, r.To)
	if err != nil {
		return nil, err
	}
	return s.svc.Send(ctx, a, team.SendSpec{To: to, Type: typ, ID: r.ID, Body: r.Body, Data: r.Data})
}

// sendRules applies the service's rules of who sends what to a message of
// type typ (default info) to to (default the lead), and returns both.
func sendRules(a team.Actor, typ, to string) (teambus.MessageType, string, error) {
	t := teambus.MsgInfo
	if typ != "" {
		var err error
		if t, err = teambus.ParseMessageType(typ); err != nil {
			return "", "", err
		}
	}
	if to == "" {
		to = teambus.Lead
	}
	switch t {
	case teambus.MsgShutdownRequest:
		if !a.IsLead() {
			return "", "", teambus.Invalidf("only the lead may send %s: %s asked to shut %s down", t, a.Member, to)
		}
	case teambus.MsgShutdownResponse:
		if to != teambus.Lead {
			return "", "", teambus.Invalidf("%s goes to the lead, not to %s", t, to)
		}
	}
	return t, to, nil
}

func (s *Service) sendBatch(ctx context.Context, c caller, data []byte) (any, error) {
	var r member.SendBatchRequest
	a, err := decodeActor(c, data, &r)
	if err != nil {
		return nil, err
	}
	if len(r.Messages) > team.MaxSendBatch {
		return nil, teambus.Invalidf("%d messages in one batch, at most %d: send them in several", len(r.Messages), team.MaxSendBatch)
	}
	specs := make([]team.SendSpec, len(r.Messages))
	for i, m := range r.Messages {
		typ, to, err := sendRules(a, m.Type, m.To)
		if err != nil {
			if m.Line > 0 {
				return nil, fmt.Errorf("line %d: %w", m.Line, err)
			}
			return nil, fmt.Errorf("message %d: %w", i+1, err)
		}
		specs[i] = team.SendSpec{To: to, Type: typ, ID: m.ID, Body: m.Body, Data: m.Data, Line: m.Line}
	}
	if r.Check {
		if err := s.svc.CheckBatch(ctx, a, specs); err != nil {
			return nil, err
		}
		return member.SendBatchReply{Results: []bus.SendResult{}}, nil
	}
	res, err := s.svc.SendBatch(ctx, a, specs)
	if err != nil {
		return nil, err
	}
	return member.SendBatchReply{Results: res}, nil
}

func (s *Service) inbox(ctx context.Context, c caller, data []byte) (any, error) {
	var r member.InboxRequest
	a, err := decodeActor(c, data, &r)
	if err != nil {
		return nil, err
	}
	wait := time.Duration(r.WaitMS) * time.Millisecond
	if wait < 0 || wait > MaxWait {
		return nil, teambus.Invalidf("invalid inbox wait %s: 0 to %s", wait, MaxWait)
	}
	if r.Max < 0 || r.Max > 10000 {
		return nil, teambus.Invalidf("invalid inbox limit %d: 1 to 10000", r.Max)
	}
	if wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(s.ctx, s.cfg.Timeout+wait)
		defer cancel()
	}
	opts := bus.InboxOptions{Max: r.Max, Wait: wait}
	var out member.InboxReply
	switch r.Mode {
	case "", member.InboxPeek, member.InboxAck:
		opts.Ack = r.Mode == member.InboxAck
		msgs, err := s.svc.Inbox(ctx, a, opts)
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			out.Messages = append(out.Messages, member.Leased{Message: m})
		}
	case member.InboxLease:
		if err := s.checkActor(ctx, a); err != nil {
			return nil, err
		}
		l, err := s.svc.Mailbox(a.Team).Lease(ctx, a.Member, bus.LeaseOptions{Max: opts.Max, Wait: opts.Wait, Self: a.Member})
		if err != nil {
			return nil, err
		}
		// The service keeps no lease: the member acks or releases by token.
		for _, m := range l.Messages {
			out.Messages = append(out.Messages, member.Leased{Message: m, Token: l.Token(m.Seq)})
		}
	default:
		return nil, teambus.Invalidf("invalid inbox mode %q: %s, %s or %s", r.Mode, member.InboxPeek, member.InboxLease, member.InboxAck)
	}
	if out.Messages == nil {
		out.Messages = []member.Leased{}
	}
	return out, nil
}

// checkActor checks the actor's incarnation, as every write does: an
// unknown member is not found, an old session is fenced.
func (s *Service) checkActor(ctx context.Context, a team.Actor) error {
	if a.IsLead() {
		t, _, err := s.svc.Store().Team(ctx, a.Team)
		if err != nil {
			return err
		}
		if t.LeadSession != "" && a.Session != t.LeadSession {
			return teambus.Fencedf("session %q is not the lead session of team %s (lead epoch %d)", a.Session, t.ID, t.LeadEpoch)
		}
		return nil
	}
	m, _, err := s.svc.Store().Member(ctx, a.Team, a.Member)
	if err != nil {
		return err
	}
	return m.Fenced(a.Session)
}

func leaseTokens(ts []member.Token) []bus.LeaseToken {
	out := make([]bus.LeaseToken, 0, len(ts))
	for _, t := range ts {
		out = append(out, bus.LeaseToken{Seq: t.Seq, Reply: t.Token})
	}
	return out
}

func (s *Service) ack(ctx context.Context, c caller, data []byte) (any, error) {
	var r member.AckRequest
	a, err := decodeActor(c, data, &r)
	if err != nil {
		return nil, err
	}
	if len(r.Tokens) > 0 && len(r.Seqs) > 0 {
		return nil, teambus.Invalidf("ack by sequences or by tokens, not both")
	}
	var res bus.AckResult
	if len(r.Tokens) > 0 {
		if err := s.checkActor(ctx, a); err != nil {
			return nil, err
		}
		res, err = s.svc.Mailbox(a.Team).AckLeased(ctx, a.Member, leaseTokens(r.Tokens))
	} else {
		res, err = s.svc.Ack(ctx, a, r.Seqs)
	}
	if err != nil {
		return nil, err
	}
	return member.AckReply{Acked: nonNil(res.Acked), Already: nonNil(res.Already)}, nil
}

func nonNil(s []uint64) []uint64 {
	if s == nil {
		return []uint64{}
	}
	return s
}

func (s *Service) release(ctx context.Context, c caller, data []byte) (any, error) {
	var r member.ReleaseRequest
	a, err := decodeActor(c, data, &r)
	if err != nil {
		return nil, err
	}
	if err := s.checkActor(ctx, a); err != nil {
		return nil, err
	}
	n, err := s.svc.Mailbox(a.Team).ReleaseLeased(ctx, a.Member, leaseTokens(r.Tokens))
	if err != nil {
		return nil, err
	}
	return member.ReleaseReply{Released: n}, nil
}

func (s *Service) task(ctx context.Context, c caller, data []byte) (any, error) {
	var r member.TaskRequest
	a, err := decodeActor(c, data, &r)
	if err != nil {
		return nil, err
	}
	if r.Op != member.TaskNext {
		if err := teambus.ValidateID("task", r.ID); err != nil {
			return nil, err
		}
	}
	var (
		t       *teambus.Task
		changed = true
	)
	switch r.Op {
	case member.TaskClaim:
		t, err = s.svc.Claim(ctx, a, r.ID)
	case member.TaskNext:
		t, err = s.svc.Next(ctx, a)
	case member.TaskComplete:
		t, changed, err = s.svc.Complete(ctx, a, r.ID, r.Commit)
	case member.TaskFail:
		t, err = s.svc.Fail(ctx, a, r.ID, r.Reason)
	case member.TaskBlock:
		t, err = s.svc.Block(ctx, a, r.ID, r.On, r.Reason)
	case member.TaskRelease:
		t, err = s.svc.Release(ctx, a, r.ID)
	case member.TaskReassign:
		t, err = s.svc.Reassign(ctx, a, r.ID, r.To)
	case member.TaskReopen:
		t, err = s.svc.Reopen(ctx, a, r.ID)
	default:
		return nil, teambus.Invalidf("invalid task operation %q", r.Op)
	}
	if err != nil {
		// Complete reports a failed promotion with the task it completed.
		if t != nil && r.Op == member.TaskComplete {
			s.log.Warn("promote after complete", "team", a.Team, "task", t.ID, "err", err)
			return member.TaskReply{Task: t, Changed: changed}, nil
		}
		return nil, err
	}
	return member.TaskReply{Task: t, Changed: changed}, nil
}

func (s *Service) checkpoint(ctx context.Context, c caller, data []byte) (any, error) {
	var r member.CheckpointRequest
	a, err := decodeActor(c, data, &r)
	if err != nil {
		return nil, err
	}
	t, err := s.svc.Checkpoint(ctx, a, team.CheckpointSpec{Done: r.Done, Remaining: r.Remaining, LastAction: r.LastAction, Files: r.Files, Data: r.Data, Auto: r.Auto, Task: r.Task})
	if err != nil {
		return nil, err
	}
	return member.TaskReply{Task: t, Changed: true}, nil
}

func (s *Service) heartbeat(ctx context.Context, c caller, data []byte) (any, error) {
	var r member.HeartbeatRequest
	a, err := decodeActor(c, data, &r)
	if err != nil {
		return nil, err
	}
	t, _, err := s.svc.Store().Team(ctx, a.Team)
	if err != nil {
		return nil, err
	}
	hb := &kv.Heartbeat{Member: a.Member, Session: a.Session, Status: r.Status, Task: r.Task, ContextPct: r.ContextPct, PID: r.PID}
	key, ttl := kv.LeadKey, t.Policy.LeadTimeout
	if a.IsLead() {
		if t.LeadSession != "" && a.Session != t.LeadSession {
			return nil, teambus.Fencedf("session %q is not the lead session of team %s (lead epoch %d)", a.Session, t.ID, t.LeadEpoch)
		}
		hb.Epoch = t.LeadEpoch
	} else {
		m, _, err := s.svc.Store().Member(ctx, a.Team, a.Member)
		if err != nil {
			return nil, err
		}
		if err := m.Fenced(a.Session); err != nil {
			return nil, err
		}
		hb.Epoch, key, ttl = m.Epoch, kv.MemberKey(a.Member), t.Policy.MemberTimeout
	}
	rev, err := s.svc.Store().Beat(ctx, a.Team, key, hb, ttl, r.Rev)
	if err != nil {
		return nil, err
	}
	return member.HeartbeatReply{Rev: rev}, nil
}

func (s *Service) join(ctx context.Context, c caller, data []byte) (any, error) {
	var r member.JoinRequest
	a, err := decodeActor(c, data, &r)
	if err != nil {
		return nil, err
	}
	if a.IsLead() {
		return nil, teambus.Invalidf("the lead attaches with `teambus lead` or `teambus team resume`, not join")
	}
	return s.svc.Join(ctx, a.Team, a.Member, a.Session)
}

func (s *Service) brief(ctx context.Context, c caller, data []byte) (any, error) {
	var r member.BriefRequest
	a, err := decodeActor(c, data, &r)
	if err != nil {
		return nil, err
	}
	of := r.Of
	if of == "" {
		of = a.Member
	}
	if of != a.Member && !a.IsLead() && !c.operator {
		return nil, refusedf("%s may read only its own brief, not the brief of %s", a.Member, of)
	}
	mail := r.Mail
	if mail < 0 || mail > member.ReplayMax {
		return nil, teambus.Invalidf("invalid mail count %d: 0 to %d", mail, member.ReplayMax)
	}
	return s.svc.Brief(ctx, a.Team, of, mail)
}

// errPageFull ends a replay page.
var errPageFull = errors.New("page full")

func (s *Service) replay(ctx context.Context, c caller, data []byte) (any, error) {
	var r member.ReplayRequest
	a, err := decodeActor(c, data, &r)
	if err != nil {
		return nil, err
	}
	if err := s.checkActor(ctx, a); err != nil {
		return nil, err
	}
	limit := r.Limit
	if limit <= 0 || limit > member.ReplayMax {
		limit = member.ReplayMax
	}
	out := member.ReplayReply{Messages: []teambus.Message{}}
	err = s.svc.Mailbox(a.Team).Replay(ctx, bus.ReplayFilter{SinceSeq: r.SinceSeq}, func(m teambus.Message) error {
		if m.To != a.Member && m.From != a.Member && m.To != teambus.All {
			return nil
		}
		if len(out.Messages) == limit {
			out.Next = m.Seq
			return errPageFull
		}
		out.Messages = append(out.Messages, m)
		return nil
	})
	if err != nil && !errors.Is(err, errPageFull) {
		return nil, err
	}
	return out, nil
}

// show returns the caller's team: its state, members and tasks, which
// every member of the team may read.
func (s *Service) show(ctx context.Context, c caller, data []byte) (any, error) {
	var r member.ShowRequest
	a, err := decodeActor(c, data, &r)
	if err != nil {
		return nil, err
	}
	if !a.IsLead() {
		if _, _, err := s.svc.Store().Member(ctx, a.Team, a.Member); err != nil {
			return nil, err
		}
	}
	return s.svc.Show(ctx, a.Team)
}
