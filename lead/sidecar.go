package lead

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/internal/clock"
	"github.com/teambus/teambus/internal/sidecar"
)

// Config says which team the lead sidecar attaches to.
type Config struct {
	Team    string
	Session string
	// Force takes over from a lead that is not yet stale.
	Force bool
	// PID is the lead agent process; 0 watches none.
	PID int
	// Adopt attaches to the lead incarnation already registered for
	// Session (by a SessionStart hook, which ran the resume validation)
	// instead of resuming again; Run fails with ErrFenced when the team's
	// lead session differs.
	Adopt  bool
	Logger *slog.Logger
	// OnAttach, if set, receives the resume report once attached.
	OnAttach func(*teambus.Report)
	// Clock is the sidecar's own clock; nil is the wall clock.
	Clock clock.Clock
	// Procs watches the lead agent process; nil is proc.Watcher.
	Procs ProcessWatcher
}

// Validate checks the ids.
func (c Config) Validate() error {
	if err := teambus.ValidateID("team", c.Team); err != nil {
		return err
	}
	if c.PID < 0 {
		return teambus.Invalidf("invalid --pid %d", c.PID)
	}
	return teambus.ValidateSession(c.Session)
}

// Sidecar is the lead sidecar.
type Sidecar struct {
	cfg    Config
	svc    Team
	clock  clock.Clock
	log    *slog.Logger
	epoch  int64
	policy teambus.Policy
	heart  sidecar.Heart
	// seenAt is when this sidecar last persisted lead_last_seen, on its
	// own clock.
	seenAt time.Time
	// seen is when this sidecar last saw each member's heartbeat, on its
	// own clock, with the incarnation that wrote it.
	seen map[string]seenBeat
	// waits is, per open probe, how long the member has had a reachable
	// bus to answer it, on this sidecar's own clock; lastCheck is when the
	// previous probe check reached the bus.
	waits     map[string]*probeWait
	lastCheck time.Time
	// activity is, per member, the last activity value seen and when this
	// sidecar saw it change, on its own clock.
	activity map[string]seenActivity
}

type seenActivity struct {
	value time.Time
	at    time.Time
}

// probeWait is the reply opportunity an open probe has had so far.
type probeWait struct {
	epoch  int64
	sentAt time.Time
	waited time.Duration
	// lastSend is when this sidecar last stored a status check for the
	// probe, on its own clock; zero when it has not (a probe recorded by
	// another lead, or a send that failed). sends counts them.
	lastSend time.Time
	sends    int
}

type seenBeat struct {
	at    time.Time
	epoch int64
}

// New returns a lead sidecar working through svc (team.SidecarAPI). It
// does no I/O.
func New(svc Team, cfg Config) (*Sidecar, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Logger, cfg.Clock, cfg.Procs = sidecar.Defaults(cfg.Logger, cfg.Clock, cfg.Procs)
	return &Sidecar{cfg: cfg, svc: svc, clock: cfg.Clock, log: cfg.Logger.With("team", cfg.Team, "role", "lead"), seen: map[string]seenBeat{}, waits: map[string]*probeWait{}, activity: map[string]seenActivity{}}, nil
}

// Epoch returns the lead epoch this sidecar attached as.
func (s *Sidecar) Epoch() int64 { return s.epoch }

// Run attaches and runs until ctx is cancelled, the lead agent exits, or a
// newer lead fences this one (ErrFenced).
func (s *Sidecar) Run(ctx context.Context) (err error) {
	rep, err := s.attach(ctx)
	if err != nil {
		return err
	}
	s.epoch = rep.LeadEpoch
	s.log = s.log.With("epoch", s.epoch)
	t, err := s.svc.Team(ctx, s.cfg.Team)
	if err != nil {
		return err
	}
	s.policy = t.Policy
	if err := s.beat(ctx); err != nil {
		return err
	}
	defer s.stopBeat(ctx)
	if rep.LeadTimeoutDetectedAt != nil {
		// Advisory: a stale detection mark is cleared by the next attach.
		_, _ = s.svc.UpdateTeam(ctx, s.cfg.Team, func(t *teambus.Team) (bool, error) {
			if t.LeadTimeoutDetectedAt == nil {
				return false, nil
			}
			t.LeadTimeoutDetectedAt = nil
			return true, nil
		})
	}
	s.log.Info("lead attached", "decision", rep.Decision, "session", s.cfg.Session, "took", rep.Took)
	// This run's own session in the event log; a kill -9 leaves it
	// without session.end.
	end := s.svc.StartSession(ctx, s.cfg.Team, teambus.Lead, s.epoch, map[string]any{"command": "lead", "mode": rep.Decision, "session": s.cfg.Session, "pid": s.cfg.PID})
	outcome := "stopped"
	defer func() { end(context.WithoutCancel(ctx), outcome, err) }()
	if s.cfg.OnAttach != nil {
		s.cfg.OnAttach(rep)
	}

	wctx, stop := context.WithCancel(ctx)
	defer stop()
	hbCh, err := s.svc.WatchBeats(wctx, s.cfg.Team, false)
	if err != nil {
		return s.startErr(ctx, err)
	}
	// The lead's sidecar inbox holds the replies to its status checks.
	replies, stopReplies, err := s.svc.ConsumeSidecar(wctx, s.cfg.Team, teambus.Lead)
	if err != nil {
		return s.startErr(ctx, err)
	}
	defer func() { stopReplies() }()
	// The team service's notices that a beat of this lead was dropped: a
	// newer lead attached.
	fences, err := s.svc.Fences(wctx, s.cfg.Team, teambus.Lead, s.cfg.Session, s.epoch)
	if err != nil {
		return s.startErr(ctx, err)
	}
	agentGone := sidecar.Exited(wctx, s.cfg.Procs, s.cfg.PID)
	tick := s.clock.NewTicker(s.policy.Heartbeat)
	defer tick.Stop()
	// Probe deadlines are checked on a finer tick than the heartbeat, so a
	// crash is confirmed close to probe-timeout.
	check := s.clock.NewTicker(s.checkEvery())
	defer check.Stop()
	if s.reconcile(ctx) {
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			s.release(ctx, teambus.LeadStopped)
			s.log.Info("lead sidecar stopped")
			return nil
		case <-agentGone:
			// Stop heartbeating without removing the key: it expires after
			// lead-timeout and the teammates see the lead gone. The team is
			// released at once: the next lead session resumes it.
			s.release(ctx, teambus.LeadAgentExited)
			s.log.Warn("lead agent exited: heartbeat stopped", "pid", s.cfg.PID)
			outcome = "agent_exited"
			return nil
		case ev := <-hbCh:
			if ev.Member != teambus.Lead {
				s.onHeartbeat(ctx, ev)
			}
		case err := <-fences:
			s.log.Warn("lead replaced: stopping", "err", err)
			outcome = "fenced"
			return err
		case d := <-replies:
			s.onReply(ctx, d)
		case <-check.C():
			s.checkProbes(ctx)
		case <-tick.C():
			if err := s.beat(ctx); err != nil {
				if errors.Is(err, teambus.ErrFenced) {
					s.log.Warn("lead replaced: stopping", "err", err)
					outcome = "fenced"
					return err
				}
				s.log.Warn("lead heartbeat failed", "err", err)
				continue
			}
			if s.reconcile(ctx) {
				s.log.Info("team finished: lead sidecar stops")
				return nil
			}
		}
	}
}

// stopBeat removes this lead's own heartbeat when Run ends by ctx (a
// clean stop), so views show the lead offline at once; teammates still
// wait for lead-timeout (a delete is not an expiry to them). A kill -9 or
// an exited agent leaves the key to expire.
func (s *Sidecar) stopBeat(ctx context.Context) {
	if ctx.Err() == nil || !s.heart.Sent() {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := s.heart.Stop(sctx, s.svc, s.cfg.Team); err != nil {
		s.log.Warn("lead heartbeat not removed", "err", err)
	}
}

// attach runs the resume validation, or with Adopt checks that the session
// is the team's lead and reports the team as it is.
func (s *Sidecar) attach(ctx context.Context) (*teambus.Report, error) {
	if !s.cfg.Adopt {
		return s.svc.Resume(ctx, s.cfg.Team, s.cfg.Session, s.cfg.Force, true)
	}
	t, err := s.svc.Team(ctx, s.cfg.Team)
	if err != nil {
		return nil, fmt.Errorf("adopt lead of %s: %w", s.cfg.Team, err)
	}
	if t.LeadSession != s.cfg.Session {
		return nil, teambus.Fencedf("adopt lead of %s: session %q is not the team's lead session %q (lead epoch %d)", s.cfg.Team, s.cfg.Session, t.LeadSession, t.LeadEpoch)
	}
	rep, err := s.svc.Probe(ctx, s.cfg.Team)
	if err != nil {
		return nil, fmt.Errorf("adopt lead of %s: %w", s.cfg.Team, err)
	}
	rep.Decision = DecisionAdopt
	return rep, nil
}

// DecisionAdopt is the report decision of a lead sidecar that adopted the
// lead incarnation a SessionStart hook attached.
const DecisionAdopt = "adopt"

// startErr is what Run returns for err during its start: nothing when ctx
// was cancelled meanwhile (stopped while starting is a clean stop).
func (s *Sidecar) startErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		s.release(ctx, teambus.LeadStopped)
		s.log.Info("lead sidecar stopped")
		return nil
	}
	return err
}

// release records in the team, with compare-and-set, that this lead let
// the team go (why is teambus.LeadStopped or LeadAgentExited), so the next
// lead session resumes it at once instead of waiting for takeover-after.
// Nothing changes when another lead attached since. A release that does
// not reach the bus leaves the team to takeover-after, as a kill -9 does.
func (s *Sidecar) release(ctx context.Context, why string) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	now := s.svc.Now()
	var done bool
	_, err := s.svc.UpdateTeam(sctx, s.cfg.Team, func(t *teambus.Team) (bool, error) {
		done = t.ReleaseLead(s.cfg.Session, s.epoch, now, why)
		return done, nil
	})
	switch {
	case err != nil:
		s.log.Warn("lead release not recorded: another session takes over after takeover-after", "err", err)
	case done:
		s.log.Info("lead released the team", "why", why)
	}
}

// seenEvery is how often the lead persists lead_last_seen in the team
// record itself: a quarter of takeover-after. While it beats its liveness
// is its heartbeat key, which the team service renews; when the service
// ends the key for silence it records the last beat as lead_last_seen. A
// write of the team record per beat would be a write, and a re-read by
// every teammate's watch, per beat.
func (s *Sidecar) seenEvery() time.Duration {
	return max(s.policy.TakeoverAfter/4, s.policy.Heartbeat)
}

// beat sends the lead's beat and, every seenEvery, persists lead_last_seen
// with a compare-and-set that fails with ErrFenced when another lead
// attached since (between those writes the team service tells a replaced
// lead on its control subject: Run's fences).
func (s *Sidecar) beat(ctx context.Context) error {
	if !s.seenAt.IsZero() && s.clock.Now().Sub(s.seenAt) < s.seenEvery() {
		hb := &teambus.Heartbeat{Member: teambus.Lead, Session: s.cfg.Session, Epoch: s.epoch, PID: s.cfg.PID}
		return s.heart.Beat(ctx, s.svc, s.cfg.Team, hb)
	}
	at := s.clock.Now()
	now := s.svc.Now()
	_, err := s.svc.UpdateTeam(ctx, s.cfg.Team, func(t *teambus.Team) (bool, error) {
		if t.LeadSession != s.cfg.Session || t.LeadEpoch != s.epoch {
			return false, teambus.Fencedf("lead epoch %d (session %s) replaced this lead (epoch %d)", t.LeadEpoch, t.LeadSession, s.epoch)
		}
		t.LeadLastSeen = teambus.TimePtr(now)
		// A lead that beats holds the team again: a sidecar adopting the
		// lead after its predecessor released it (stopped by hand while the
		// agent lives on) takes the release back.
		t.LeadReleasedAt, t.LeadReleased = nil, ""
		return true, nil
	})
	if err != nil {
		return err
	}
	s.seenAt = at
	hb := &teambus.Heartbeat{Member: teambus.Lead, Session: s.cfg.Session, Epoch: s.epoch, PID: s.cfg.PID}
	return s.heart.Beat(ctx, s.svc, s.cfg.Team, hb)
}

// onHeartbeat notes a teammate's heartbeat, or probes a teammate whose
// heartbeat expired.
func (s *Sidecar) onHeartbeat(ctx context.Context, ev teambus.BeatEvent) {
	if ev.Alive {
		s.seen[ev.Member] = seenBeat{at: s.clock.Now(), epoch: ev.Epoch}
		return
	}
	delete(s.seen, ev.Member)
	m, err := s.svc.Member(ctx, s.cfg.Team, ev.Member)
	if err != nil || !watched(m) {
		return
	}
	s.probe(ctx, m, fmt.Sprintf("no heartbeat for %s", s.policy.MemberTimeout))
}

// watched reports whether crash detection applies to the member: it has
// registered and is not crashed, paused or shut down.
func watched(m *teambus.Member) bool {
	if m.Session == "" {
		return false
	}
	switch m.Status {
	case teambus.MemberCrashed, teambus.MemberPaused, teambus.MemberShutdown:
		return false
	}
	return true
}

// probe records a probe with the team, so a new lead continues it, then
// sends a status_check to the member's sidecar. One probe per incarnation
// is open at a time; checkProbes sends its check again every resendEvery
// until it is answered or probe-timeout ends.
func (s *Sidecar) probe(ctx context.Context, m *teambus.Member, reason string) {
	now := s.svc.Now()
	var sent bool
	_, err := s.svc.UpdateTeam(ctx, s.cfg.Team, func(t *teambus.Team) (bool, error) {
		sent = false
		if p, ok := t.Probes[m.ID]; ok && p.Epoch == m.Epoch {
			return false, nil
		}
		if t.Probes == nil {
			t.Probes = map[string]teambus.Probe{}
		}
		t.Probes[m.ID] = teambus.Probe{Epoch: m.Epoch, SentAt: now, Reason: reason}
		sent = true
		return true, nil
	})
	if err != nil || !sent {
		return
	}
	// Count this probe's reply opportunity from now, not from the next
	// check that sees it.
	w := &probeWait{epoch: m.Epoch, sentAt: now}
	s.waits[m.ID] = w
	s.log.Info("probing member", "member", m.ID, "member_epoch", m.Epoch, "reason", reason)
	s.sendCheck(ctx, m.ID, w, reason)
}

// sendCheck stores a status check for the open probe w of member. Each
// send has its own id: a resend is new mail, not a duplicate of a check
// that was lost or taken by a replaced sidecar. A failed send leaves
// lastSend as it was, so the next probe check sends again.
func (s *Sidecar) sendCheck(ctx context.Context, member string, w *probeWait, reason string) {
	id := fmt.Sprintf("probe/%s/%d/%d/%d", member, w.epoch, w.sentAt.UnixNano(), w.sends)
	body := fmt.Sprintf("status check (%s): are you still working?", reason)
	if err := s.svc.Notify(ctx, s.cfg.Team, teambus.Lead, s.epoch, member, teambus.MsgStatusCheck, id, body, map[string]any{"reason": reason, "attempt": w.sends + 1}); err != nil {
		s.log.Warn("send status check", "member", member, "err", err)
		return
	}
	w.sends++
	w.lastSend = s.clock.Now()
}

// resendEvery is how often an unanswered status check is sent again: four
// times per probe-timeout, not more often than probes are checked.
func (s *Sidecar) resendEvery() time.Duration {
	return max(s.policy.ProbeTimeout/4, s.checkEvery())
}

// onReply clears the probe of a member that answered. Handling a reply
// twice is harmless.
func (s *Sidecar) onReply(ctx context.Context, d teambus.Delivery) {
	if d.Err != nil {
		_ = d.Term(ctx) // a lost Term only brings the message back to be dropped again
		return
	}
	msg := d.Msg
	if msg.Type != teambus.MsgStatus {
		_ = d.Ack(ctx) // handlers are idempotent: a lost ack redelivers, handled twice harmlessly
		return
	}
	_, err := s.svc.UpdateTeam(ctx, s.cfg.Team, func(t *teambus.Team) (bool, error) {
		p, ok := t.Probes[msg.From]
		if !ok || p.Epoch != msg.Epoch {
			return false, nil
		}
		delete(t.Probes, msg.From)
		return true, nil
	})
	if err != nil {
		_ = d.Nak(ctx) // a lost Nak only delays redelivery to the ack wait
		return
	}
	s.seen[msg.From] = seenBeat{at: s.clock.Now(), epoch: msg.Epoch}
	s.log.Info("member answered status check", "member", msg.From, "body", msg.Body)
	_ = d.Ack(ctx) // handlers are idempotent: a lost ack redelivers, handled twice harmlessly
}

// checkProbes confirms the crash of every member whose probe went
// unanswered for probe-timeout of real reply opportunity: time is counted
// on this sidecar's own clock (never from the probe's timestamp, which may
// come from another lead's clock), from when it first saw the probe, and
// only while the bus answers its checks promptly. A stretch in which the
// bus (or this sidecar) was stopped or stalled does not count: a member
// cannot answer through a stopped bus.
func (s *Sidecar) checkProbes(ctx context.Context) {
	start := s.clock.Now()
	t, err := s.svc.Team(ctx, s.cfg.Team)
	end := s.clock.Now()
	if err != nil {
		s.lastCheck = time.Time{}
		return
	}
	every := s.checkEvery()
	stall := max(s.policy.ProbeTimeout/4, 250*time.Millisecond)
	var credit time.Duration
	if gap := end.Sub(s.lastCheck); !s.lastCheck.IsZero() && end.Sub(start) < stall && gap < every+stall {
		credit = gap
	}
	s.lastCheck = end
	for id := range s.waits {
		if _, ok := t.Probes[id]; !ok {
			delete(s.waits, id)
		}
	}
	for id, p := range t.Probes {
		w := s.waits[id]
		if w == nil || w.epoch != p.Epoch || !w.sentAt.Equal(p.SentAt) {
			// A probe this sidecar did not send (another lead recorded it):
			// it can not know the check reached the member, so it sends one.
			w = &probeWait{epoch: p.Epoch, sentAt: p.SentAt}
			s.waits[id] = w
			s.sendCheck(ctx, id, w, p.Reason)
			continue
		}
		w.waited += credit
		if w.waited < s.policy.ProbeTimeout {
			// Unanswered: send the check again until probe-timeout ends.
			if w.lastSend.IsZero() || s.clock.Now().Sub(w.lastSend) >= s.resendEvery() {
				s.sendCheck(ctx, id, w, p.Reason)
			}
			continue
		}
		s.confirmCrash(ctx, id, p)
	}
}

// checkEvery is the interval of probe checks: a twentieth of probe-timeout
// (at least 50ms, at most a heartbeat), so a crash is confirmed within
// about 5% of probe-timeout after it passes.
func (s *Sidecar) checkEvery() time.Duration {
	return min(s.policy.Heartbeat, max(s.policy.ProbeTimeout/20, 50*time.Millisecond))
}

func (s *Sidecar) confirmCrash(ctx context.Context, member string, p teambus.Probe) {
	reason := fmt.Sprintf("%s, no status reply within %s", p.Reason, s.policy.ProbeTimeout)
	res, err := s.svc.MarkCrashed(ctx, s.cfg.Team, member, p.Epoch, reason)
	if err != nil {
		s.log.Warn("record crash", "member", member, "err", err)
		return
	}
	if res.Counted {
		s.log.Warn("member crashed", "member", member, "member_epoch", p.Epoch, "tasks", res.Tasks, "crashes", res.Crashes, "paused", res.Paused)
		body := teambus.CrashNotice(s.cfg.Team, member, reason, res)
		if err := s.svc.Notify(ctx, s.cfg.Team, teambus.Lead, s.epoch, teambus.Lead, teambus.MsgSystem, fmt.Sprintf("crash/%s/%d", member, p.Epoch), body,
			map[string]any{"member": member, "epoch": p.Epoch, "tasks": res.Tasks, "crashes": res.Crashes, "paused": res.Paused}); err != nil {
			s.log.Warn("notice of a crash", "member", member, "err", err) // the crash is recorded; past the limit the escalation is sent from the record
		}
	}
	// A probe record left behind is cleared on the next confirm or answer.
	_, _ = s.svc.UpdateTeam(ctx, s.cfg.Team, func(t *teambus.Team) (bool, error) {
		if q, ok := t.Probes[member]; !ok || q.Epoch != p.Epoch {
			return false, nil
		}
		delete(t.Probes, member)
		return true, nil
	})
	s.sendEscalations(ctx)
}

// reconcile runs every heartbeat: silent and stuck members are probed,
// crashed members' tasks requeued, dependents of completed tasks made
// available, pending escalations sent. Every step is idempotent.
func (s *Sidecar) reconcile(ctx context.Context) (finished bool) {
	snap, err := s.svc.State(ctx, s.cfg.Team)
	if err != nil {
		s.log.Warn("read team", "err", err)
		return false
	}
	if snap.Team.Closed() {
		return true
	}
	now := s.clock.Now()
	for _, id := range snap.MemberIDs() {
		m := snap.Members[id]
		if m.HeldSince != nil && m.Status != teambus.MemberZombie {
			// Mail the member held in zombie mode that nobody released:
			// its sidecar shut down, was killed or replaced.
			if rel, err := s.svc.ReleaseHeld(ctx, s.cfg.Team, id); err != nil {
				s.log.Warn("release held mail", "member", id, "err", err)
			} else if len(rel) > 0 {
				s.log.Info("held mail released", "member", id, "released", len(rel))
			}
		}
		switch m.Status {
		case teambus.MemberCrashed, teambus.MemberPaused:
			if ids, err := s.svc.ReconcileMember(ctx, s.cfg.Team, id, "crash recorded earlier"); err == nil && len(ids) > 0 {
				s.log.Info("requeued tasks of crashed member", "member", id, "tasks", ids)
			}
			continue
		}
		if !watched(m) {
			continue
		}
		seen, ok := s.seen[id]
		if !ok {
			// Never seen by this sidecar: judge from attach time.
			s.seen[id] = seenBeat{at: now, epoch: m.Epoch}
			continue
		}
		// The team service ends the key of a member silent for
		// member-timeout (an expiry, onHeartbeat); it writes a key that
		// beats every half member-timeout, so a key not written for the
		// backstop means no service judges: judge here.
		if seen.epoch == m.Epoch && now.Sub(seen.at) >= sidecar.Backstop(s.policy.MemberTimeout) {
			s.probe(ctx, m, fmt.Sprintf("no heartbeat for %s", s.policy.MemberTimeout))
			continue
		}
		if len(snap.MemberTasks(id)) > 0 {
			// The activity time is the member's clock; judge it on this
			// sidecar's own clock instead, by when the value last changed,
			// so clock skew makes no member look stuck or busy.
			last := snap.Activity[id]
			a, ok := s.activity[id]
			if !ok || !a.value.Equal(last) {
				a = seenActivity{value: last, at: now}
				s.activity[id] = a
			}
			if !last.IsZero() && now.Sub(a.at) >= s.policy.StuckTimeout {
				s.probe(ctx, m, fmt.Sprintf("heartbeat fresh but no activity for %s", s.policy.StuckTimeout))
			}
		}
	}
	if ids, err := s.svc.PromoteReady(ctx, s.cfg.Team); err == nil && len(ids) > 0 {
		s.log.Info("tasks unblocked", "tasks", ids)
	}
	s.sendEscalations(ctx)
	return false
}

// sendEscalations sends one escalation per paused incarnation to the
// lead's inbox. The message id derives from the incarnation and the flag is
// cleared after the send, so restarts and re-checks send it once.
func (s *Sidecar) sendEscalations(ctx context.Context) {
	snap, err := s.svc.State(ctx, s.cfg.Team)
	if err != nil {
		return
	}
	for _, id := range snap.MemberIDs() {
		m := snap.Members[id]
		if !m.EscalatePending {
			continue
		}
		body := fmt.Sprintf("escalation: %s crashed %d times (crash limit %d); the member and its task are paused. Decide: `teambus task reassign TASK --to MEMBER --member lead`, or `teambus task reopen TASK --member lead` after fixing the cause.", id, m.CrashCount, s.policy.CrashLimit)
		if err := s.svc.Notify(ctx, s.cfg.Team, teambus.Lead, s.epoch, teambus.Lead, teambus.MsgEscalation,
			fmt.Sprintf("escalation/%s/%d", id, m.CrashedEpoch), body, map[string]any{"member": id, "crashes": m.CrashCount, "epoch": m.CrashedEpoch}); err != nil {
			s.log.Warn("send escalation", "member", id, "err", err)
			continue
		}
		// If this fails the escalation is sent again with the same id:
		// stored once (dedupe), so nothing is lost or doubled.
		_ = s.svc.UpdateMember(ctx, s.cfg.Team, id, 0, func(m *teambus.Member) bool {
			if !m.EscalatePending {
				return false
			}
			m.EscalatePending = false
			return true
		})
		s.svc.LogEvent(ctx, s.cfg.Team, eventlog.EvEscalation, id, map[string]any{"name": id, "crashes": m.CrashCount, "epoch": m.CrashedEpoch, "crash_limit": s.policy.CrashLimit})
		s.log.Warn("escalated", "member", id)
	}
}
