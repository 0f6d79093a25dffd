package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// Defaults of Config.
const (
	// DefaultName is the micro service name ($SRV discovery).
	DefaultName = teamapi.ServiceName
	// DefaultQueueGroup is the queue group every instance joins.
	DefaultQueueGroup = "teambus"
	// DefaultConcurrency bounds the requests one instance runs at once.
	DefaultConcurrency = 256
	// DefaultTimeout bounds one request (an inbox wait adds its wait).
	DefaultTimeout = 30 * time.Second
	// MaxWait caps the wait of an inbox read.
	MaxWait = team.MaxWait
)

// Config configures the team service.
type Config struct {
	// Team configures the team operations (limits of new streams, clock).
	Team team.Config
	// Logger receives refused requests and failures; nil discards.
	Logger *slog.Logger
	// Name and QueueGroup of the micro service; defaults DefaultName and
	// DefaultQueueGroup.
	Name, QueueGroup string
	// Concurrency bounds the members' requests run at once; default
	// DefaultConcurrency (Budgets.Total, when set, wins).
	Concurrency int
	// Budgets bound what one member, one team and the operator run at
	// once; zero values take the defaults.
	Budgets Budgets
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
// account: the verbs of the member API (request and reply, one instance
// of the queue group answers each), and the liveness protocol (every
// instance receives every beat and judges it; see liveness.go).
type Service struct {
	cfg  Config
	log  *slog.Logger
	api  team.API
	nc   *nats.Conn
	ms   micro.Service
	lim  *limiter
	live *liveness
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
	ts := team.New(js, cfg.Team)
	s := &Service{cfg: cfg, log: cfg.Logger, api: ts.API(), nc: nc, lim: newLimiter(cfg.Budgets.withDefaults(cfg.Concurrency)), ctx: sctx, stop: stop}
	live, err := startLiveness(nc, ts.Store(), ts.UpdateTeam, cfg.Logger)
	if err != nil {
		stop()
		return nil, fmt.Errorf("team service: liveness: %w", err)
	}
	s.live = live
	ms, err := micro.AddService(nc, micro.Config{
		Name:        cfg.Name,
		Version:     "1.0.0",
		Description: "teambus team service: the member API",
		QueueGroup:  cfg.QueueGroup,
	})
	if err != nil {
		live.stop()
		stop()
		return nil, fmt.Errorf("team service: %w", err)
	}
	s.ms = ms
	for _, v := range teamapi.Verbs {
		if err := ms.AddEndpoint(v.Name, s.handler(v), micro.WithEndpointSubject(teamapi.ServiceSubject("*", v.Name))); err != nil {
			_ = ms.Stop() // best effort: the endpoint error is what Start reports
			live.stop()
			stop()
			return nil, fmt.Errorf("team service endpoint %s: %w", v.Name, err)
		}
	}
	return s, nil
}

// Stats are the micro service's statistics.
func (s *Service) Stats() micro.Stats { return s.ms.Stats() }

// Close stops answering, cancels the requests in flight and waits for
// them. It is safe to call more than once.
func (s *Service) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = s.ms.Stop()
		s.live.stop()
		s.stop()
		s.wg.Wait()
	})
	return s.closeErr
}

// handler runs each request of v in its own goroutine within its
// caller's budgets (Budgets) and answers the caller. It never blocks
// micro's dispatch: a request waits for its budget in its own goroutine.
func (s *Service) handler(v teamapi.Verb) micro.HandlerFunc {
	return func(req micro.Request) {
		if s.ctx.Err() != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serve(v, req)
		}()
	}
}

func (s *Service) serve(v teamapi.Verb, req micro.Request) {
	c, err := identify(req.Subject(), req.Headers())
	if err != nil {
		s.log.Warn("team service request refused", "verb", v.Name, "subject", req.Subject(), "err", err)
		s.fail(req, err)
		return
	}
	actx, cancel := context.WithTimeout(s.ctx, s.cfg.Timeout)
	release, err := s.lim.acquire(actx, c, classify(c, v.Name, req.Data()))
	cancel()
	if err != nil {
		s.fail(req, err)
		return
	}
	defer release()
	res, err := v.Serve(s.ctx, s.api, req.Data(), s.cfg.Timeout, c.actor)
	if err != nil {
		if errors.Is(err, teamapi.ErrRefused) {
			s.log.Warn("team service request refused", "verb", v.Name, "team", c.team, "member", c.member, "operator", c.operator, "err", err)
		}
		s.fail(req, err)
		return
	}
	b, err := json.Marshal(res)
	if err != nil {
		s.fail(req, fmt.Errorf("encode %s reply: %w", v.Name, err))
		return
	}
	// An answer the bus can not carry is answered with an error that says
	// so, never dropped: the caller would only see a timeout.
	if max := s.nc.MaxPayload(); max > 0 && int64(len(b)) > max-replyHeadroom {
		s.tooBig(req, v.Name, c, len(b), max)
		return
	}
	err = s.respond(req, &nats.Msg{Data: b})
	if errors.Is(err, nats.ErrMaxPayload) {
		s.tooBig(req, v.Name, c, len(b), s.nc.MaxPayload())
		return
	}
	if err != nil {
		s.log.Warn("team service reply", "verb", v.Name, "team", c.team, "err", err)
	}
}

// replyHeadroom is the room a reply keeps for its subject and headers
// within the bus's max payload.
const replyHeadroom = 4 << 10

// tooBig answers a request whose reply of n bytes is larger than a message
// of max bytes with a permanent error naming the verb and the sizes.
func (s *Service) tooBig(req micro.Request, verb string, c caller, n int, max int64) {
	s.log.Warn("team service reply too big", "verb", verb, "team", c.team, "member", c.member, "bytes", n, "max_payload", max)
	s.fail(req, teamapi.TooBigf("the %s answer is %d bytes, more than the bus carries (%d): nothing returned; ask for less (a smaller --limit or page)", verb, n, max-replyHeadroom))
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
	e := teamapi.ErrorOf(err)
	b, _ := json.Marshal(teamapi.ErrorReply{Error: *e})
	m := &nats.Msg{Data: b, Header: nats.Header{}}
	m.Header.Set(micro.ErrorHeader, e.Class)
	m.Header.Set(micro.ErrorCodeHeader, string(e.Code))
	if rerr := s.respond(req, m); rerr != nil {
		s.log.Warn("team service error reply", "subject", req.Subject(), "err", rerr)
	}
}
