package teammate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/internal/clock"
	"github.com/teambus/teambus/internal/sidecar"
	"github.com/teambus/teambus/proc"
)

// Config says which member the sidecar stands for.
type Config struct {
	Team    string
	Member  string
	Session string
	// PID is the agent process to watch; 0 watches none.
	PID int
	// WorkDir is the agent's working tree: automatic checkpoints list the
	// files git reports changed there. Empty skips that.
	WorkDir string
	// Adopt attaches to the incarnation already registered for Session
	// (by a SessionStart hook) instead of registering a new one; Run fails
	// with ErrFenced when the member's current session differs.
	Adopt  bool
	Logger *slog.Logger
	// Clock is the sidecar's own clock; nil is the wall clock.
	Clock clock.Clock
	// Procs watches the agent process; nil is proc.Watcher.
	Procs ProcessWatcher
}

// Validate checks the ids.
func (c Config) Validate() error {
	if err := teambus.ValidateID("team", c.Team); err != nil {
		return err
	}
	if err := teambus.ValidateMemberID(c.Member); err != nil {
		return err
	}
	if err := teambus.ValidateSession(c.Session); err != nil {
		return err
	}
	if c.PID < 0 {
		return teambus.Invalidf("invalid --pid %d", c.PID)
	}
	return nil
}

// Outcome says why the sidecar stopped.
type Outcome string

// Outcomes of Run.
const (
	OutcomeShutdown  Outcome = "shutdown"   // clean shutdown: signal or approved shutdown_request
	OutcomeCrashed   Outcome = "crashed"    // the agent exited holding a task; the crash is recorded
	OutcomeAgentDone Outcome = "agent_done" // the agent exited holding no task
	OutcomeZombieMax Outcome = "zombie_max" // zombie longer than zombie-max: task released
	OutcomeFenced    Outcome = "fenced"     // a newer incarnation replaced this one
	OutcomeTeamDone  Outcome = "team_done"  // the team completed or was aborted
)

// Sidecar is the teammate sidecar.
type Sidecar struct {
	cfg   Config
	svc   Team
	clock clock.Clock
	log   *slog.Logger

	epoch  int64
	policy teambus.Policy
	heart  sidecar.Heart
	// rec is the member record as last read or watched.
	rec      *teambus.Member
	zombie   bool
	zombieAt time.Time
	// stragglerBeats is how many more heartbeats look for held mail stored
	// just after zombie mode was left.
	stragglerBeats int
}

// New returns a sidecar working through svc (team.SidecarAPI). It does no
// I/O.
func New(svc Team, cfg Config) (*Sidecar, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Logger, cfg.Clock, cfg.Procs = sidecar.Defaults(cfg.Logger, cfg.Clock, cfg.Procs)
	return &Sidecar{cfg: cfg, svc: svc, clock: cfg.Clock, log: cfg.Logger.With("team", cfg.Team, "member", cfg.Member)}, nil
}

// Epoch returns the incarnation the sidecar registered.
func (s *Sidecar) Epoch() int64 { return s.epoch }

// Run registers the member and runs until ctx is cancelled (a clean
// shutdown), the agent exits, zombie-max passes, or the member is replaced.
func (s *Sidecar) Run(ctx context.Context) (out Outcome, err error) {
	defer func() {
		// Replaced while still starting is replaced all the same.
		if out == "" && errors.Is(err, teambus.ErrFenced) {
			out = OutcomeFenced
		}
	}()
	// Registration runs to its end even when the sidecar is stopped
	// meanwhile (SIGTERM): the registered member then shuts down cleanly
	// (startErr below), instead of the stop reading as a bus timeout.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer rcancel()
	t, err := s.svc.Team(rctx, s.cfg.Team)
	if err != nil {
		return "", err
	}
	s.policy = t.Policy
	m, err := s.register(rctx)
	if err != nil {
		return "", err
	}
	s.epoch = m.Epoch
	s.log = s.log.With("epoch", s.epoch)
	// A sidecar adopting an incarnation that already ran (one restarted
	// by a later SessionStart) keeps its lifecycle status.
	if !s.cfg.Adopt || m.Status == teambus.MemberSpawned {
		if err := s.svc.SetMemberStatus(rctx, s.cfg.Team, s.cfg.Member, s.epoch, teambus.MemberIdle); err != nil {
			return "", err
		}
		idle := *m
		idle.Status = teambus.MemberIdle
		m = &idle
	}
	s.rec = m
	if err := s.beat(rctx); err != nil {
		return "", err
	}
	s.log.Info("teammate registered", "session", s.cfg.Session, "pid", s.cfg.PID, "adopt", s.cfg.Adopt)
	// Mail an earlier incarnation held in zombie mode and never released
	// (it was killed, shut down, or replaced) goes out now, before any
	// mail of this one.
	if released, err := s.svc.ReleaseHeld(ctx, s.cfg.Team, s.cfg.Member); err != nil {
		s.log.Warn("release held mail of an earlier incarnation", "err", err)
	} else if len(released) > 0 {
		s.log.Info("held mail of an earlier incarnation released", "released", len(released))
	}
	// This run's own session in the event log; a kill -9 leaves it
	// without session.end.
	end := s.svc.StartSession(ctx, s.cfg.Team, s.cfg.Member, s.epoch, map[string]any{"command": "teammate", "session": s.cfg.Session, "pid": s.cfg.PID})
	defer func() { end(context.WithoutCancel(ctx), string(out), err) }()

	// Background watchers feed channels; everything that changes state
	// happens in this goroutine's select loop.
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	// Stopped (SIGTERM) while starting: the registered member shuts down
	// cleanly, as it would a moment later.
	startErr := func(err error) (Outcome, error) {
		if ctx.Err() != nil {
			return s.shutdown(context.WithoutCancel(ctx), "sidecar stopped (signal)")
		}
		return "", err
	}
	// Only the lead's heartbeats, written from now on: a lead key present
	// at start gets lead-timeout from now, as one never seen does.
	beats, err := s.svc.WatchBeats(wctx, s.cfg.Team, true, teambus.Lead)
	if err != nil {
		return startErr(err)
	}
	// The team record (its status) and this member's record (fencing).
	changes, err := s.svc.WatchState(wctx, s.cfg.Team, s.cfg.Member)
	if err != nil {
		return startErr(err)
	}
	// The team service's notices that a beat of this incarnation was
	// dropped: it was replaced, or declared crashed while silent.
	fences, err := s.svc.Fences(wctx, s.cfg.Team, s.cfg.Member, s.cfg.Session, s.epoch)
	if err != nil {
		return startErr(err)
	}
	// The member's sidecar inbox: status checks and shutdown requests.
	ctlCh, stopControl, err := s.svc.ConsumeSidecar(wctx, s.cfg.Team, s.cfg.Member)
	if err != nil {
		return startErr(err)
	}
	// A replaced incarnation stops consuming at once and returns what it
	// fetched but did not handle, so its successor gets it now, not after
	// ack-wait.
	defer func() { stopControl() }()
	agentGone := sidecar.Exited(wctx, s.cfg.Procs, s.cfg.PID)

	hb := s.clock.NewTicker(s.policy.Heartbeat)
	defer hb.Stop()
	cp := s.clock.NewTicker(s.policy.CheckpointEvery)
	defer cp.Stop()
	// A blocked task is judged against blocked-timeout (minutes by
	// default): checking it reads the whole team, so not every heartbeat.
	blocked := s.clock.NewTicker(max(s.policy.Heartbeat, s.policy.BlockedTimeout/10))
	defer blocked.Stop()
	// The lead is judged by its key's expiry: the team service ends the
	// key after lead-timeout of silence, and writes it every half
	// lead-timeout while the lead beats. The timer, on this sidecar's own
	// clock from the last write seen (or from now), is the backstop for a
	// bus where no service judges.
	leadTimer := s.clock.NewTimer(sidecar.Backstop(s.policy.LeadTimeout))
	defer leadTimer.Stop()
	// zombieMax runs while the sidecar is a zombie.
	var (
		zombieTimer clock.Timer
		zombieMax   <-chan time.Time
	)
	startZombieMax := func() {
		zombieTimer = s.clock.NewTimer(s.policy.ZombieMax)
		zombieMax = zombieTimer.C()
	}
	defer func() {
		if zombieTimer != nil {
			zombieTimer.Stop()
		}
	}()

	for {
		select {
		case <-ctx.Done():
			return s.shutdown(context.WithoutCancel(ctx), "sidecar stopped (signal)")
		case <-agentGone:
			return s.agentExited(context.WithoutCancel(ctx))
		case ev := <-beats:
			if ev.Member != teambus.Lead {
				continue
			}
			if ev.Alive {
				leadTimer.Reset(sidecar.Backstop(s.policy.LeadTimeout))
				if s.zombie {
					s.leaveZombie(ctx)
					zombieTimer.Stop()
					zombieTimer, zombieMax = nil, nil
				}
			} else if !s.zombie {
				s.enterZombie(ctx, "lead heartbeat expired")
				startZombieMax()
			}
		case <-leadTimer.C():
			if !s.zombie {
				s.enterZombie(ctx, fmt.Sprintf("no lead heartbeat for %s", s.policy.LeadTimeout))
				startZombieMax()
			}
		case <-zombieMax:
			return s.zombieExpired(context.WithoutCancel(ctx))
		case err := <-fences:
			s.log.Warn("replaced: stopping", "err", err)
			return OutcomeFenced, err
		case ch := <-changes:
			if m := ch.Member; m != nil {
				s.rec = m
				if err := s.fenced(m); err != nil && m.Status != teambus.MemberShutdown {
					s.log.Warn("replaced: stopping", "err", err)
					return OutcomeFenced, err
				}
				continue
			}
			if ch.Team == nil {
				continue
			}
			if st := ch.Team.Status; st == teambus.TeamComplete || st == teambus.TeamAborted {
				s.log.Info("team finished", "status", st)
				out, err := s.shutdown(context.WithoutCancel(ctx), "team "+string(st))
				if out == OutcomeShutdown {
					out = OutcomeTeamDone
				}
				return out, err
			}
		case msg := <-ctlCh:
			// Bounded like a heartbeat: a status check answered late is
			// delivered again; one never answered is a crash.
			cctx, cancel := context.WithTimeout(ctx, s.stepTimeout())
			done, out, err := s.handleControl(cctx, msg)
			cancel()
			if done {
				if out == OutcomeFenced {
					stopControl(msg)
				}
				return out, err
			}
		case <-hb.C():
			// A heartbeat whose request died with a bus node would hold the
			// loop for the whole request timeout, and a status check waiting
			// behind it could miss probe-timeout: bound it.
			bctx, cancel := context.WithTimeout(ctx, s.stepTimeout())
			if err := s.beat(bctx); err != nil {
				cancel()
				if errors.Is(err, teambus.ErrFenced) {
					return OutcomeFenced, err
				}
				s.log.Warn("heartbeat failed", "err", err)
				continue
			}
			if !s.zombie {
				// A send that saw the member as a zombie just before it left
				// zombie mode stores its mail as held after the release pass;
				// the next heartbeat delivers it.
				if s.stragglerBeats > 0 {
					s.stragglerBeats--
					s.releaseStragglers(bctx)
				}
			}
			cancel()
		case <-blocked.C():
			bctx, cancel := context.WithTimeout(ctx, s.stepTimeout())
			s.checkBlocked(bctx)
			cancel()
		case <-cp.C():
			if s.zombie {
				s.autoCheckpoint(ctx)
			}
		}
	}
}

// register registers a new incarnation, or with Adopt attaches to the one
// registered for the session.
func (s *Sidecar) register(ctx context.Context) (*teambus.Member, error) {
	if !s.cfg.Adopt {
		m, err := s.svc.Join(ctx, s.cfg.Team, s.cfg.Member, s.cfg.Session)
		if err != nil {
			return nil, fmt.Errorf("register %s: %w", s.cfg.Member, err)
		}
		return m, nil
	}
	m, err := s.svc.Member(ctx, s.cfg.Team, s.cfg.Member)
	if err != nil {
		return nil, fmt.Errorf("adopt %s: %w", s.cfg.Member, err)
	}
	if m.Session != s.cfg.Session {
		return nil, teambus.Fencedf("adopt %s: session %q is not the member's current session %q (epoch %d)", s.cfg.Member, s.cfg.Session, m.Session, m.Epoch)
	}
	if err := m.Fenced(s.cfg.Session); err != nil {
		return nil, fmt.Errorf("adopt %s: %w", s.cfg.Member, err)
	}
	return m, nil
}

// beat sends a heartbeat with the member's status as this sidecar last
// saw its record (the watch of the record keeps it current; no read
// precedes a beat), after checking that this incarnation is current.
func (s *Sidecar) beat(ctx context.Context) error {
	m := s.rec
	if m == nil {
		var err error
		if m, err = s.svc.Member(ctx, s.cfg.Team, s.cfg.Member); err != nil {
			return err
		}
		s.rec = m
	}
	if err := s.fenced(m); err != nil {
		return err
	}
	hb := &teambus.Heartbeat{Member: s.cfg.Member, Session: s.cfg.Session, Epoch: s.epoch, Status: m.Status, PID: s.cfg.PID, ContextPct: m.ContextPct}
	return s.heart.Beat(ctx, s.svc, s.cfg.Team, hb)
}

// stepTimeout bounds a heartbeat step of the loop: at most half of
// probe-timeout and one heartbeat, at least a second, at most five.
func (s *Sidecar) stepTimeout() time.Duration {
	return min(max(min(s.policy.Heartbeat, s.policy.ProbeTimeout/2), time.Second), 5*time.Second)
}

// fenced reports why this incarnation may no longer act: a newer one
// registered, or the lead declared it crashed (or paused it) while it was
// silent, for example stopped (SIGSTOP) past member-timeout. Its heartbeat
// must not bring the crashed incarnation back.
func (s *Sidecar) fenced(m *teambus.Member) error {
	if m.Epoch != s.epoch || m.Session != s.cfg.Session {
		return teambus.Fencedf("member %s was replaced by epoch %d (session %s)", s.cfg.Member, m.Epoch, m.Session)
	}
	return m.Fenced(s.cfg.Session)
}

// handleControl answers one sidecar message; done is true when the sidecar
// must stop.
func (s *Sidecar) handleControl(ctx context.Context, d teambus.Delivery) (bool, Outcome, error) {
	if d.Err != nil {
		_ = d.Term(ctx) // a lost Term only brings the message back to be dropped again
		return false, "", nil
	}
	msg := d.Msg
	snap, err := s.svc.State(ctx, s.cfg.Team)
	if err != nil {
		_ = d.Nak(ctx) // a lost Nak only delays redelivery to the ack wait
		return false, "", nil
	}
	if m, ok := snap.Members[s.cfg.Member]; ok {
		if err := s.fenced(m); err != nil {
			// Mail to the member is its successor's now: Run gives it back
			// once this consumer has stopped.
			return true, OutcomeFenced, err
		}
	}
	status := snap.WorkStatus(s.cfg.Member)
	var task string
	if ts := snap.MemberTasks(s.cfg.Member); len(ts) > 0 {
		task = ts[0].ID
	}
	switch msg.Type {
	case teambus.MsgStatusCheck:
		data := map[string]any{"reply_to": msg.Seq, "status": status, "task": task, "epoch": s.epoch, "activity": snap.Activity[s.cfg.Member]}
		body := fmt.Sprintf("%s alive: %s", s.cfg.Member, status)
		if task != "" {
			body += " on " + task
		}
		// The reply's id derives from the check's, so a redelivered check is
		// answered once.
		if err := s.svc.Notify(ctx, s.cfg.Team, s.cfg.Member, s.epoch, msg.From, teambus.MsgStatus, fmt.Sprintf("status/%d", msg.Seq), body, data); err != nil {
			_ = d.Nak(ctx) // a lost Nak only delays redelivery to the ack wait
			return false, "", nil
		}
		_ = d.Ack(ctx) // handlers are idempotent: a lost ack redelivers, handled twice harmlessly
	case teambus.MsgShutdownRequest:
		approve := task == ""
		body := "approve: shutting down"
		if !approve {
			body = fmt.Sprintf("approve:false: still working on %s", task)
		}
		if err := s.svc.Notify(ctx, s.cfg.Team, s.cfg.Member, s.epoch, msg.From, teambus.MsgShutdownResponse, fmt.Sprintf("shutdown/%d", msg.Seq), body, map[string]any{"approve": approve, "reply_to": msg.Seq, "task": task}); err != nil {
			_ = d.Nak(ctx) // a lost Nak only delays redelivery to the ack wait
			return false, "", nil
		}
		_ = d.Ack(ctx) // handlers are idempotent: a lost ack redelivers, handled twice harmlessly
		if approve {
			out, err := s.shutdown(context.WithoutCancel(ctx), "shutdown_request approved")
			return true, out, err
		}
	default:
		_ = d.Ack(ctx) // handlers are idempotent: a lost ack redelivers, handled twice harmlessly
	}
	return false, "", nil
}

func (s *Sidecar) enterZombie(ctx context.Context, why string) {
	s.zombie, s.zombieAt = true, s.clock.Now()
	s.log.Warn("zombie mode: lead gone", "why", why)
	if err := s.svc.SetMemberStatus(ctx, s.cfg.Team, s.cfg.Member, s.epoch, teambus.MemberZombie); err != nil {
		s.log.Warn("set zombie", "err", err)
	}
	now := s.svc.Now()
	if _, err := s.svc.UpdateTeam(ctx, s.cfg.Team, func(t *teambus.Team) (bool, error) {
		if t.LeadTimeoutDetectedAt != nil {
			return false, nil
		}
		t.LeadTimeoutDetectedAt = teambus.TimePtr(now)
		return true, nil
	}); err != nil {
		s.log.Warn("record lead timeout", "err", err)
	}
	s.autoCheckpoint(ctx)
}

func (s *Sidecar) leaveZombie(ctx context.Context) {
	zombieFor := s.clock.Now().Sub(s.zombieAt).Round(time.Millisecond)
	s.zombie = false
	s.stragglerBeats = 3
	if err := s.svc.SetMemberStatus(ctx, s.cfg.Team, s.cfg.Member, s.epoch, teambus.MemberIdle); err != nil {
		s.log.Warn("leave zombie", "err", err)
	}
	released, err := s.svc.ReleaseHeld(ctx, s.cfg.Team, s.cfg.Member)
	if err != nil {
		s.log.Warn("release held mail", "err", err)
	}
	s.log.Info("zombie mode left: lead is back", "zombie_for", zombieFor, "released", len(released))
	body := fmt.Sprintf("%s left zombie mode after %s: %d held message(s) released", s.cfg.Member, zombieFor, len(released))
	id := fmt.Sprintf("unzombie/%d/%d", s.epoch, s.zombieAt.UnixNano())
	if err := s.svc.Notify(ctx, s.cfg.Team, s.cfg.Member, s.epoch, teambus.Lead, teambus.MsgSystem, id, body, map[string]any{"released": len(released), "zombie_for": zombieFor.String()}); err != nil {
		s.log.Warn("tell lead", "err", err)
	}
}

// releaseStragglers delivers held mail that arrived after zombie mode was
// left. It reads the held-mail cursor only when one exists.
func (s *Sidecar) releaseStragglers(ctx context.Context) {
	if pending, err := s.svc.HeldPending(ctx, s.cfg.Team, s.cfg.Member); err != nil || pending == 0 {
		return
	}
	if released, err := s.svc.ReleaseHeld(ctx, s.cfg.Team, s.cfg.Member); err == nil && len(released) > 0 {
		s.log.Info("late held mail released", "released", len(released))
	}
}

// autoCheckpoint keeps the member's checkpoint fresh while the lead is
// away, adding the files git reports changed in the work tree.
func (s *Sidecar) autoCheckpoint(ctx context.Context) {
	err := s.svc.AutoCheckpoint(ctx, s.cfg.Team, s.cfg.Member, s.cfg.Session, proc.GitChanged(ctx, s.cfg.WorkDir, 2*time.Second), "automatic checkpoint in zombie mode")
	if err != nil && !errors.Is(err, teambus.ErrState) {
		s.log.Warn("auto checkpoint", "err", err)
	}
}

// checkBlocked returns the member's blocked task to the queue once it has
// been blocked for blocked-timeout without a lead decision.
func (s *Sidecar) checkBlocked(ctx context.Context) {
	snap, err := s.svc.State(ctx, s.cfg.Team)
	if err != nil {
		return
	}
	for _, t := range snap.MemberTasks(s.cfg.Member) {
		if t.Status == teambus.TaskBlocked && t.BlockedAt != nil && s.svc.Now().Sub(*t.BlockedAt) >= s.policy.BlockedTimeout {
			if err := s.svc.ReleaseTask(ctx, s.cfg.Team, s.cfg.Member, s.cfg.Session, t.ID); err == nil {
				s.log.Info("blocked task returned to the queue", "task", t.ID, "blocked_for", s.policy.BlockedTimeout)
				if err := s.svc.Notify(ctx, s.cfg.Team, s.cfg.Member, s.epoch, teambus.Lead, teambus.MsgSystem,
					fmt.Sprintf("blocked-timeout/%s/%d", t.ID, t.BlockedAt.UnixNano()),
					fmt.Sprintf("task %s was blocked for %s without a decision: back in the queue", t.ID, s.policy.BlockedTimeout), nil); err != nil {
					s.log.Warn("tell the lead", "task", t.ID, "err", err)
				}
			}
		}
	}
}

// releaseTasks gives the member's tasks back to the queue with their
// checkpoints.
func (s *Sidecar) releaseTasks(ctx context.Context, why string) (out, checkpointed []string) {
	snap, err := s.svc.State(ctx, s.cfg.Team)
	if err != nil {
		return nil, nil
	}
	for _, t := range snap.MemberTasks(s.cfg.Member) {
		if err := s.svc.ReleaseTask(ctx, s.cfg.Team, s.cfg.Member, s.cfg.Session, t.ID); err == nil {
			out = append(out, t.ID)
			if t.Checkpoint != nil {
				checkpointed = append(checkpointed, t.ID)
			}
			s.log.Info("task released", "task", t.ID, "why", why)
		}
	}
	return out, checkpointed
}

// shutdown is the clean exit: tasks released with their checkpoints, the
// member marked shutdown, the heartbeat key removed, the lead told.
func (s *Sidecar) shutdown(ctx context.Context, why string) (Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	released, checkpointed := s.releaseTasks(ctx, why)
	if err := s.svc.SetMemberStatus(ctx, s.cfg.Team, s.cfg.Member, s.epoch, teambus.MemberShutdown); err != nil {
		s.log.Warn("mark shutdown", "err", err)
	}
	_ = s.heart.Stop(ctx, s.svc, s.cfg.Team) // the service ends the key when the beats stop anyway
	body := fmt.Sprintf("%s shut down (%s)", s.cfg.Member, why)
	if len(released) > 0 {
		body += ": " + teambus.Requeued(released, checkpointed)
	}
	if err := s.svc.Notify(ctx, s.cfg.Team, s.cfg.Member, s.epoch, teambus.Lead, teambus.MsgSystem, fmt.Sprintf("shutdown/%d", s.epoch), body, map[string]any{"released": released}); err != nil {
		s.log.Warn("tell the lead", "err", err) // the shutdown is in the member record; the notice is for the lead's agent
	}
	s.log.Info("teammate shut down", "why", why)
	return OutcomeShutdown, nil
}

// agentExited handles the exit of the watched agent: a crash when it held
// a task, else a clean end.
func (s *Sidecar) agentExited(ctx context.Context) (Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	snap, err := s.svc.State(ctx, s.cfg.Team)
	if err != nil {
		return "", err
	}
	if len(snap.MemberTasks(s.cfg.Member)) == 0 {
		out, err := s.shutdown(ctx, fmt.Sprintf("agent process %d exited holding no task", s.cfg.PID))
		if out == OutcomeShutdown {
			out = OutcomeAgentDone
		}
		return out, err
	}
	reason := fmt.Sprintf("agent process %d exited without a clean shutdown", s.cfg.PID)
	res, err := s.svc.MarkCrashed(ctx, s.cfg.Team, s.cfg.Member, s.epoch, reason)
	if err != nil {
		return "", err
	}
	_ = s.heart.Stop(ctx, s.svc, s.cfg.Team) // the service ends the key when the beats stop anyway
	s.log.Warn("agent crashed", "pid", s.cfg.PID, "tasks", res.Tasks, "crashes", res.Crashes, "paused", res.Paused)
	if res.Counted {
		body := teambus.CrashNotice(s.cfg.Team, s.cfg.Member, reason, res)
		if err := s.svc.Notify(ctx, s.cfg.Team, s.cfg.Member, s.epoch, teambus.Lead, teambus.MsgSystem, fmt.Sprintf("crash/%s/%d", s.cfg.Member, s.epoch), body,
			map[string]any{"member": s.cfg.Member, "epoch": s.epoch, "tasks": res.Tasks, "crashes": res.Crashes, "paused": res.Paused}); err != nil {
			s.log.Warn("tell the lead", "err", err) // the crash is in the member record; past the limit the lead escalates from it
		}
	}
	return OutcomeCrashed, nil
}

// zombieExpired releases the task and shuts down after zombie-max. The
// mail held in zombie mode is then released to the stream, each message
// marked held_since: no lead is coming for it through this sidecar, and
// held mail is never dropped.
func (s *Sidecar) zombieExpired(ctx context.Context) (Outcome, error) {
	s.autoCheckpoint(ctx)
	_, err := s.shutdown(ctx, fmt.Sprintf("zombie for longer than zombie-max %s", s.policy.ZombieMax))
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if released, rerr := s.svc.ReleaseHeld(rctx, s.cfg.Team, s.cfg.Member); rerr != nil {
		s.log.Warn("release held mail at zombie-max", "err", rerr)
	} else {
		s.log.Info("held mail released at zombie-max", "released", len(released))
	}
	return OutcomeZombieMax, err
}
