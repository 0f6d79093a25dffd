package node

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/teamapi"
)

// DisconnectEvents is the subject the data account receives the server's
// client disconnect events on (imported from the system account by
// importDisconnects): $SYS.ACCOUNT.<account>.DISCONNECT.
const DisconnectEvents = "$SYS.ACCOUNT.*.DISCONNECT"

// importDisconnects makes the system account's disconnect events of every
// account visible in the data account, where the team service listens. A
// node without a system account (none configured) has no events: the
// service then learns of a lost connection by its silence alone.
func importDisconnects(s *server.Server) error {
	sys := s.SystemAccount()
	if sys == nil {
		return errors.New("no system account")
	}
	g := s.GlobalAccount()
	if err := sys.AddStreamExport(DisconnectEvents, []*server.Account{g}); err != nil {
		return err
	}
	err := g.AddStreamImport(sys, DisconnectEvents, "")
	if errors.Is(err, server.ErrStreamImportDuplicate) {
		return nil
	}
	return err
}

// Liveness tuning of the service.
const (
	// liveWorkers run the reads and writes the judge asks for.
	liveWorkers = 8
	// liveQueue bounds the jobs waiting for a worker.
	liveQueue = 4096
	// liveSweep is how often silence is judged: the delay it adds to
	// member-timeout at most.
	liveSweep = 50 * time.Millisecond
	// liveInbound bounds the beats and events received and not handled
	// yet: a burst of every member at once fits.
	liveInbound = 1 << 16
	// liveJobTimeout bounds one job.
	liveJobTimeout = 5 * time.Second
)

// liveness is the service's liveness protocol on its connection: beats
// in (every instance receives every beat: a plain subscription, not the
// queue group), the judge, the jobs it asks for, disconnect events in,
// control messages out.
type liveness struct {
	nc    *nats.Conn
	store *kv.Store
	log   interface {
		Warn(msg string, args ...any)
		Info(msg string, args ...any)
	}
	now func() time.Time
	// updateTeam changes the team record with compare-and-set
	// (team.Service.UpdateTeam).
	updateTeam func(ctx context.Context, team string, fn func(*teambus.Team) (bool, error)) (*teambus.Team, error)

	mu    sync.Mutex
	j     *judge
	jobs  chan liveJob
	subs  []*nats.Subscription
	wg    sync.WaitGroup
	ctx   context.Context
	close context.CancelFunc
}

// startLiveness subscribes to the beats and disconnect events on nc and
// starts the judge.
func startLiveness(nc *nats.Conn, store *kv.Store, updateTeam func(ctx context.Context, team string, fn func(*teambus.Team) (bool, error)) (*teambus.Team, error), log interface {
	Warn(msg string, args ...any)
	Info(msg string, args ...any)
}) (*liveness, error) {
	ctx, cancel := context.WithCancel(context.Background())
	l := &liveness{nc: nc, store: store, updateTeam: updateTeam, log: log, now: time.Now, j: newJudge(), jobs: make(chan liveJob, liveQueue), ctx: ctx, close: cancel}
	// One channel for both: a member's last beats (a clean stop) and the
	// close of its connection are handled in the order they arrived.
	in := make(chan *nats.Msg, liveInbound)
	for _, subject := range []string{teamapi.ServiceSubject("*", teamapi.VerbBeat), DisconnectEvents} {
		s, err := nc.ChanSubscribe(subject, in)
		if err != nil {
			l.stop()
			return nil, err
		}
		l.subs = append(l.subs, s)
	}
	l.wg.Add(1)
	go l.receive(in)
	for i := 0; i < liveWorkers; i++ {
		l.wg.Add(1)
		go l.work()
	}
	l.wg.Add(1)
	go l.sweeps()
	return l, nil
}

// receive handles the beats and disconnect events until stop.
func (l *liveness) receive(in <-chan *nats.Msg) {
	defer l.wg.Done()
	for {
		select {
		case <-l.ctx.Done():
			return
		case m := <-in:
			if strings.HasPrefix(m.Subject, "$SYS.") {
				l.onDisconnect(m)
			} else {
				l.onBeat(m)
			}
		}
	}
}

// stop unsubscribes and waits for the jobs running.
func (l *liveness) stop() {
	for _, s := range l.subs {
		_ = s.Unsubscribe()
	}
	l.close()
	l.wg.Wait()
}

// onBeat handles one beat: who sent it is the server's request info for a
// member credential, the beat's own words for the operator.
func (l *liveness) onBeat(m *nats.Msg) {
	c, err := identify(m.Subject, micro.Headers(m.Header))
	if err != nil {
		return
	}
	var b teamapi.Beat
	if err := json.Unmarshal(m.Data, &b); err != nil {
		return
	}
	conn := connID{server: b.Server, id: b.Conn}
	if !c.operator {
		b.Member = c.member
		conn = connID{}
		if ri := m.Header.Get(RequestInfoHeader); ri != "" {
			var ci struct {
				ID     uint64 `json:"id"`
				Server string `json:"server"`
			}
			if json.Unmarshal([]byte(ri), &ci) == nil && ci.ID != 0 {
				conn = connID{server: ci.Server, id: ci.ID}
			}
		}
	}
	if b.Member != teambus.Lead && teambus.ValidateMemberID(b.Member) != nil {
		return
	}
	l.mu.Lock()
	jobs := l.j.beat(liveKey{team: c.team, member: b.Member}, b, conn, l.now())
	l.mu.Unlock()
	l.run(jobs)
}

// onDisconnect handles a client disconnect event.
func (l *liveness) onDisconnect(m *nats.Msg) {
	var ev server.DisconnectEventMsg
	if err := json.Unmarshal(m.Data, &ev); err != nil || ev.Client.ID == 0 {
		return
	}
	if ev.Reason == server.ServerShutdown.String() {
		// The node went away, not the member: its sidecar reconnects to
		// another node and beats on.
		return
	}
	srv := ev.Client.Server
	if srv == "" {
		srv = ev.Server.Name
	}
	l.mu.Lock()
	jobs := l.j.closed(connID{server: srv, id: ev.Client.ID}, l.now())
	l.mu.Unlock()
	l.run(jobs)
}

// sweeps judges silence every liveSweep, and gives every member a full
// timeout again after the connection was cut (the beats missed meanwhile
// are the bus's silence, not the members').
func (l *liveness) sweeps() {
	defer l.wg.Done()
	t := time.NewTicker(liveSweep)
	defer t.Stop()
	status := l.nc.StatusChanged(nats.CONNECTED)
	last := l.now()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-status:
			l.mu.Lock()
			l.j.grace(l.now())
			l.mu.Unlock()
		case <-t.C:
			now := l.now()
			l.mu.Lock()
			if now.Sub(last) > 10*liveSweep {
				// This process did not run for a while (stopped, or
				// starved): neither did its subscription.
				l.j.grace(now)
			}
			last = now
			jobs := l.j.sweep(now)
			l.mu.Unlock()
			l.run(jobs)
		}
	}
}

// run queues jobs for the workers; a job that finds the queue full is
// given up as failed (its entry tries again later).
func (l *liveness) run(jobs []liveJob) {
	for _, job := range jobs {
		select {
		case l.jobs <- job:
		default:
			l.finish(job, incarnation{}, 0, errors.New("liveness queue full"))
		}
	}
}

func (l *liveness) work() {
	defer l.wg.Done()
	for {
		select {
		case <-l.ctx.Done():
			return
		case job := <-l.jobs:
			l.do(job)
		}
	}
}

// do runs one job and hands its outcome to the judge.
func (l *liveness) do(job liveJob) {
	ctx, cancel := context.WithTimeout(l.ctx, liveJobTimeout)
	defer cancel()
	var (
		inc incarnation
		rev uint64
		err error
	)
	key := heartbeatKey(job.key.member)
	switch job.kind {
	case jobLoad:
		inc, err = l.incarnation(ctx, job.key)
	case jobWrite:
		hb := job.hb
		rev, err = l.store.Beat(ctx, job.key.team, key, &hb, job.ttl, job.rev)
	case jobEnd:
		err = l.store.EndBeat(ctx, job.key.team, key, job.rev, job.epoch, false)
		if err == nil {
			l.log.Info("heartbeat ended", "team", job.key.team, "member", job.key.member, "why", job.why)
			if job.key.member == teambus.Lead {
				l.leadLastSeen(ctx, job)
			}
		}
	case jobStop:
		err = l.store.EndBeat(ctx, job.key.team, key, job.rev, job.epoch, true)
	case jobFence:
		var b []byte
		if b, err = json.Marshal(job.control); err == nil {
			err = l.nc.Publish(teamapi.ControlSubject(job.key.team, job.key.member), b)
		}
	}
	if err != nil && l.ctx.Err() == nil && !errors.Is(err, teambus.ErrNotFound) {
		l.log.Warn("liveness", "team", job.key.team, "member", job.key.member, "job", int(job.kind), "err", err)
	}
	l.finish(job, inc, rev, err)
}

// finish hands a job's outcome to the judge and runs what follows.
func (l *liveness) finish(job liveJob, inc incarnation, rev uint64, err error) {
	now := l.now()
	l.mu.Lock()
	var jobs []liveJob
	switch job.kind {
	case jobLoad:
		jobs = l.j.loaded(job.key, inc, err, now)
	case jobWrite:
		jobs = l.j.wrote(job, rev, err, now)
	case jobEnd:
		jobs = l.j.endDone(job, err, now)
	}
	l.mu.Unlock()
	if l.ctx.Err() == nil {
		l.run(jobs)
	}
}

// leadLastSeen records the last beat of a lead judged silent as the
// team's lead_last_seen (the lead sidecar persists it itself only now and
// then), so a takeover counts takeover-after from the lead's last beat.
// It changes nothing when another lead attached or the lead released the
// team meanwhile; a failure leaves the sidecar's own, older value.
func (l *liveness) leadLastSeen(ctx context.Context, job liveJob) {
	if l.updateTeam == nil || job.at.IsZero() {
		return
	}
	at := job.at.UTC()
	_, err := l.updateTeam(ctx, job.key.team, func(t *teambus.Team) (bool, error) {
		if t.LeadEpoch != job.epoch || t.LeadSession != job.session || t.LeadReleasedAt != nil {
			return false, nil
		}
		if t.LeadLastSeen != nil && !t.LeadLastSeen.Before(at) {
			return false, nil
		}
		t.LeadLastSeen = &at
		return true, nil
	})
	if err != nil {
		l.log.Warn("record the lead's last beat", "team", job.key.team, "err", err)
	}
}

// incarnation reads the current incarnation of a member (the lead's from
// the team record).
func (l *liveness) incarnation(ctx context.Context, k liveKey) (incarnation, error) {
	t, _, err := l.store.Team(ctx, k.team)
	if err != nil {
		return incarnation{}, err
	}
	if k.member == teambus.Lead {
		return incarnation{session: t.LeadSession, epoch: t.LeadEpoch, timeout: t.Policy.LeadTimeout}, nil
	}
	m, _, err := l.store.Member(ctx, k.team, k.member)
	if err != nil {
		return incarnation{}, err
	}
	inc := incarnation{session: m.Session, epoch: m.Epoch, timeout: t.Policy.MemberTimeout}
	switch m.Status {
	case teambus.MemberCrashed, teambus.MemberPaused, teambus.MemberShutdown:
		inc.fenced = "the incarnation is " + strings.ReplaceAll(string(m.Status), "_", " ")
	}
	return inc, nil
}

// heartbeatKey is the heartbeat key of member.
func heartbeatKey(member string) string {
	if member == teambus.Lead {
		return kv.LeadKey
	}
	return kv.MemberKey(member)
}
