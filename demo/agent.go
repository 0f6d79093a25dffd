package demo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// AgentConfig is one simulated agent session (`teambus agent-sim`).
type AgentConfig struct {
	// Service is the team API on the bus.
	Service *team.Service
	// Actor is the member and session the agent acts as; the lead when
	// Actor.IsLead().
	Actor team.Actor
	// Out receives the agent's log lines.
	Out io.Writer
	// StepTime is how long one step of a task takes.
	StepTime time.Duration
	// Steps is the step count of a task whose description does not say
	// "(N steps)".
	Steps int
	// RegisterWait is how long to wait for the sidecar to register the
	// session.
	RegisterWait time.Duration
	// OpTimeout bounds each request to the bus.
	OpTimeout time.Duration
}

// Validate checks the numbers.
func (c AgentConfig) Validate() error {
	if c.StepTime < 0 || c.Steps < 1 || c.Steps > 100 || c.RegisterWait <= 0 || c.OpTimeout <= 0 {
		return teambus.Invalidf("invalid step time %s, steps %d, register wait %s or op timeout %s: step time not negative, 1 to 100 steps, positive waits", c.StepTime, c.Steps, c.RegisterWait, c.OpTimeout)
	}
	return nil
}

// RunAgent runs a simulated agent until its work is done (a teammate: the
// team has no open task left) or ctx ends (the lead).
func RunAgent(ctx context.Context, cfg AgentConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	sim := &agentSimulator{
		svc: cfg.Service, a: cfg.Actor, out: cfg.Out, stepTime: cfg.StepTime, steps: cfg.Steps,
		registerWait: cfg.RegisterWait, poll: 300 * time.Millisecond, opTimeout: cfg.OpTimeout,
	}
	if cfg.Actor.IsLead() {
		return sim.runLead(ctx)
	}
	return sim.runTeammate(ctx)
}

// agentSimulator is one simulated agent session.
type agentSimulator struct {
	svc          *team.Service
	a            team.Actor
	out          io.Writer
	stepTime     time.Duration
	steps        int
	registerWait time.Duration
	poll         time.Duration
	opTimeout    time.Duration

	mu sync.Mutex
}

// say prints one line of the agent's log: time, member and session first.
func (s *agentSimulator) say(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.out, "%s %s/%s: %s\n", time.Now().UTC().Format("15:04:05.000"), s.a.Member, s.a.Session, fmt.Sprintf(format, args...))
}

// op bounds one request to the bus by --timeout (some requests need a
// deadline, and a hung one must not stall the agent).
func (s *agentSimulator) op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opTimeout)
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// waitRegistered waits until the session is the member's current one (the
// sidecar registered it), or the lead session for the lead.
func (s *agentSimulator) waitRegistered(ctx context.Context) error {
	deadline := time.Now().Add(s.registerWait)
	for {
		var current string
		octx, cancel := s.op(ctx)
		if s.a.IsLead() {
			t, err := s.svc.Team(octx, s.a.Team)
			if err != nil && !errors.Is(err, teambus.ErrUnavailable) {
				cancel()
				return err
			}
			if t != nil {
				current = t.LeadSession
			}
		} else {
			m, err := s.svc.Member(octx, s.a.Team, s.a.Member)
			if err != nil && !errors.Is(err, teambus.ErrUnavailable) {
				cancel()
				return err
			}
			if m != nil {
				current = m.Session
			}
		}
		cancel()
		if current == s.a.Session {
			return nil
		}
		if time.Now().After(deadline) {
			return teambus.Unavailablef("session %s was not registered for %s within %s (current session %q): start its sidecar (`teambus teammate` or `teambus lead`)", s.a.Session, s.a.Member, s.registerWait, current)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// runLead reads and acks the lead's inbox every 500ms until stopped.
func (s *agentSimulator) runLead(ctx context.Context) error {
	if err := s.waitRegistered(ctx); err != nil {
		return err
	}
	s.say("lead session attached: reading the lead inbox")
	for {
		octx, cancel := s.op(ctx)
		msgs, err := s.svc.Inbox(octx, s.a, mailbox.InboxOptions{Max: 100, Ack: true})
		cancel()
		switch {
		case err == nil:
			for _, m := range msgs {
				s.say("mail #%d from %s [%s]: %s", m.Seq, m.From, m.Type, teambus.OneLine(m.Body, 200))
			}
		case errors.Is(err, teambus.ErrFenced):
			s.say("fenced: %s", err)
			return err
		case ctx.Err() != nil:
			s.say("stopped")
			return nil
		default:
			s.say("inbox: %s", err)
		}
		if sleep(ctx, 500*time.Millisecond) != nil {
			s.say("stopped")
			return nil
		}
	}
}

// errNoWorkLeft ends a teammate's loop: the team has no open task.
var errNoWorkLeft = errors.New("no work left")

// runTeammate claims and works tasks until none is left.
func (s *agentSimulator) runTeammate(ctx context.Context) error {
	if err := s.waitRegistered(ctx); err != nil {
		return err
	}
	s.say("session registered by the sidecar: starting work")
	for {
		s.drainInbox(ctx)
		t, err := s.next(ctx)
		switch {
		case err == nil:
		case errors.Is(err, errNoWorkLeft):
			s.say("no task left in team %s: exiting", s.a.Team)
			return nil
		case errors.Is(err, teambus.ErrFenced), errors.Is(err, teambus.ErrNotFound), errors.Is(err, teambus.ErrInvalid):
			s.say("giving up: %s", err)
			return err
		case ctx.Err() != nil:
			s.say("stopped")
			return nil
		default:
			// Nothing claimable yet, a lost race or a transient failure.
			if sleep(ctx, s.poll) != nil {
				s.say("stopped")
				return nil
			}
			continue
		}
		if err := s.work(ctx, t); err != nil {
			if ctx.Err() != nil {
				s.say("stopped")
				return nil
			}
			s.say("giving up: %s", err)
			return err
		}
	}
}

// drainInbox prints and acks the member's mail.
func (s *agentSimulator) drainInbox(ctx context.Context) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	msgs, err := s.svc.Inbox(ctx, s.a, mailbox.InboxOptions{Max: 100, Ack: true})
	if err != nil {
		return
	}
	for _, m := range msgs {
		s.say("mail #%d from %s [%s]: %s", m.Seq, m.From, m.Type, teambus.OneLine(m.Body, 200))
	}
}

// next returns the task to work on: the one the member already holds (a
// restarted agent of the same session), else a newly claimed one. A
// teammate takes tasks of its own quantum first, then tasks of no quantum,
// never another specialist's.
func (s *agentSimulator) next(ctx context.Context) (*teambus.Task, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	snap, err := s.svc.Snapshot(ctx, s.a.Team)
	if err != nil {
		return nil, err
	}
	if snap.Team.Closed() {
		return nil, errNoWorkLeft
	}
	m, err := snap.Member(s.a.Member)
	if err != nil {
		return nil, err
	}
	if err := m.Fenced(s.a.Session); err != nil {
		return nil, err
	}
	if held := snap.MemberTasks(s.a.Member); len(held) > 0 {
		return held[0], nil
	}
	counts := teambus.CountByStatus(snap.Tasks)
	if counts[teambus.TaskPending]+counts[teambus.TaskAvailable]+counts[teambus.TaskInProgress]+counts[teambus.TaskBlocked] == 0 {
		return nil, errNoWorkLeft
	}
	for _, cand := range teambus.Pick(snap.Tasks, m.Quantum) {
		if cand.Quantum != "" && cand.Quantum != m.Quantum {
			continue
		}
		t, err := s.svc.Claim(ctx, s.a, cand.ID)
		if err == nil {
			return t, nil
		}
		if errors.Is(err, teambus.ErrFenced) {
			return nil, err
		}
	}
	return nil, teambus.Unavailablef("nothing to claim yet")
}

// stepsRE finds "(N steps)" in a task description.
var stepsRE = regexp.MustCompile(`\((\d{1,3}) steps?\)`)

// taskSteps is the number of steps of t.
func (s *agentSimulator) taskSteps(t *teambus.Task) int {
	if m := stepsRE.FindStringSubmatch(t.Description); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil && n >= 1 && n <= 100 {
			return n
		}
	}
	return s.steps
}

// stepName names step k of n; checkpoints list these.
func stepName(k, n int) string { return fmt.Sprintf("step %d/%d", k, n) }

// work runs the steps of t that its checkpoint does not list as done, with
// a checkpoint after each, then reports to the lead and completes t. It
// returns nil when the task is done or was taken away, and an error when
// this incarnation is fenced.
func (s *agentSimulator) work(ctx context.Context, t *teambus.Task) error {
	n := s.taskSteps(t)
	done := map[string]bool{}
	var doneList []string
	if cp := t.Checkpoint; cp != nil {
		for _, d := range cp.TasksCompleted {
			for k := 1; k <= n; k++ {
				if d == stepName(k, n) && !done[d] {
					done[d] = true
					doneList = append(doneList, d)
				}
			}
		}
	}
	file := "pkg/" + t.ID + ".go"
	if len(doneList) > 0 {
		s.say("resuming task %s from checkpoint #%d (by %s, epoch %d): skipping %s, already done; last action %q",
			t.ID, t.Checkpoint.Seq, t.Checkpoint.Member, t.Checkpoint.Epoch, stepRange(doneList), t.Checkpoint.LastAction)
	} else {
		s.say("claimed task %s: %d steps", t.ID, n)
	}
	s.send(ctx, teambus.MsgInfo, "start/"+t.ID, fmt.Sprintf("starting %s (%d of %d steps to do)", t.ID, n-len(doneList), n))
	zombieNoted := false
	for k := 1; k <= n; k++ {
		name := stepName(k, n)
		if done[name] {
			continue
		}
		if err := sleep(ctx, s.stepTime); err != nil {
			return err
		}
		done[name] = true
		doneList = append(doneList, name)
		var remaining []string
		for j := 1; j <= n; j++ {
			if !done[stepName(j, n)] {
				remaining = append(remaining, stepName(j, n))
			}
		}
		spec := teamapi.CheckpointRequest{Actor: s.a, Task: t.ID, Done: doneList, Remaining: remaining,
			LastAction: fmt.Sprintf("step %d of %d of task %s", k, n, t.ID), Files: []string{file}}
		if err := s.retry(ctx, func() error {
			octx, cancel := s.op(ctx)
			defer cancel()
			_, err := s.svc.Checkpoint(octx, spec)
			return err
		}); err != nil {
			if errors.Is(err, teambus.ErrFenced) {
				return err
			}
			s.say("task %s was taken away (%v): back to the queue", t.ID, err)
			return nil
		}
		s.say("task %s: %s done (checkpointed)", t.ID, name)
		if !zombieNoted && k < n {
			octx, cancel := s.op(ctx)
			m, err := s.svc.Member(octx, s.a.Team, s.a.Member)
			cancel()
			if err == nil && m.Status == teambus.MemberZombie {
				zombieNoted = true
				s.send(ctx, teambus.MsgInfo, "lead-silent/"+t.ID,
					fmt.Sprintf("the lead is silent; continuing %s (%d of %d steps done)", t.ID, len(doneList), n))
			}
		}
	}
	s.send(ctx, teambus.MsgReport, "report/"+t.ID, fmt.Sprintf("finished %s: %d steps, changed %s", t.ID, n, file))
	sum := sha256.Sum256([]byte(s.a.Team + "/" + t.ID + "/" + s.a.Session))
	commit := hex.EncodeToString(sum[:])[:12]
	if err := s.retry(ctx, func() error {
		octx, cancel := s.op(ctx)
		defer cancel()
		_, _, err := s.svc.Complete(octx, s.a, t.ID, commit)
		return err
	}); err != nil {
		if errors.Is(err, teambus.ErrFenced) {
			return err
		}
		s.say("could not complete task %s: %v", t.ID, err)
		return nil
	}
	s.say("completed task %s (commit %s)", t.ID, commit)
	return nil
}

// send sends mail to the lead; a failure is logged, not fatal. The id is
// scoped by session, so a respawned agent's mail is its own.
func (s *agentSimulator) send(ctx context.Context, typ teambus.MessageType, id, body string) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	res, err := s.svc.Send(ctx, teamapi.SendRequest{Actor: s.a, To: teambus.Lead, Type: typ, ID: id + "/" + s.a.Session, Body: body})
	if err != nil {
		s.say("send %s to lead: %v", typ, err)
		return
	}
	if res.Held {
		s.say("sent %s to lead: held (zombie mode), it gets a seq on release", typ)
		return
	}
	s.say("sent %s to lead: stored seq %d", typ, res.Seq)
}

// retry runs fn until it succeeds or fails with anything but a transient
// error, a few times.
func (s *agentSimulator) retry(ctx context.Context, fn func() error) error {
	var err error
	for i := 0; i < 5; i++ {
		if err = fn(); err == nil || teambus.ExitCode(err) != teambus.ExitTransient || ctx.Err() != nil {
			return err
		}
		if sleep(ctx, 200*time.Millisecond) != nil {
			return ctx.Err()
		}
	}
	return err
}

// stepRange prints step names compactly: "step 2", "steps 1-3" for steps
// 1/N to 3/N, else the list.
func stepRange(names []string) string {
	var ks []int
	for _, n := range names {
		var k, total int
		if _, err := fmt.Sscanf(n, "step %d/%d", &k, &total); err != nil {
			return strings.Join(names, ", ")
		}
		ks = append(ks, k)
	}
	if len(ks) == 1 {
		return fmt.Sprintf("step %d", ks[0])
	}
	contiguous := true
	for i := 1; i < len(ks); i++ {
		contiguous = contiguous && ks[i] == ks[i-1]+1
	}
	if contiguous {
		return fmt.Sprintf("steps %d-%d", ks[0], ks[len(ks)-1])
	}
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = strconv.Itoa(k)
	}
	return "steps " + strings.Join(parts, ", ")
}
