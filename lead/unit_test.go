package lead_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/internal/clock"
	"github.com/teambus/teambus/internal/sidecar"
	"github.com/teambus/teambus/internal/sidecartest"
	"github.com/teambus/teambus/lead"
)

var _ lead.Team = (*sidecartest.Team)(nil)

// unit is a lead sidecar run on an in-memory team with teammate tm1
// (registered, epoch 1) and a fake clock.
type unit struct {
	ft     *sidecartest.Team
	clk    *clock.Fake
	pol    teambus.Policy
	every  time.Duration // the probe check interval
	procs  sidecartest.Procs
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	report *teambus.Report
}

// leadTimers are the timers of a running lead sidecar: the heartbeat and
// probe check tickers.
const leadTimers = 2

func newUnit(t *testing.T) *unit {
	t.Helper()
	pol := teambus.DefaultPolicy()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	ft := sidecartest.New(clk, "lu", pol, "tm1")
	if _, err := ft.Join(context.Background(), "lu", "tm1", "s-tm1"); err != nil {
		t.Fatal(err)
	}
	return &unit{ft: ft, clk: clk, pol: pol, every: min(pol.Heartbeat, pol.ProbeTimeout/20), procs: sidecartest.NewProcs()}
}

// start runs the sidecar and waits until its loop has armed its tickers.
func (u *unit) start(t *testing.T, cfg lead.Config) {
	t.Helper()
	cfg.Team, cfg.Clock, cfg.Procs, cfg.PID = "lu", u.clk, u.procs, 4242
	if cfg.Session == "" {
		cfg.Session = "L1"
	}
	cfg.OnAttach = func(r *teambus.Report) { u.report = r }
	sc, err := lead.New(u.ft, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	u.cancel, u.done = cancel, make(chan struct{})
	go func() {
		defer close(u.done)
		u.err = sc.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-u.done })
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	if err := u.clk.WaitTimers(wctx, leadTimers); err != nil {
		select {
		case <-u.done:
			t.Fatalf("lead stopped while starting: %v", u.err)
		default:
		}
		t.Fatal(err)
	}
}

// stopped waits for Run to return.
func (u *unit) stopped(t *testing.T) error {
	t.Helper()
	select {
	case <-u.done:
	case <-time.After(5 * time.Second):
		t.Fatal("lead sidecar still running")
	}
	return u.err
}

func (u *unit) running(t *testing.T) {
	t.Helper()
	select {
	case <-u.done:
		t.Fatalf("lead sidecar stopped: %v", u.err)
	default:
	}
}

func (u *unit) checks() []sidecartest.Mail {
	var out []sidecartest.Mail
	for _, m := range u.ft.Mail(teambus.MsgStatusCheck) {
		if m.To == "tm1" {
			out = append(out, m)
		}
	}
	return out
}

func (u *unit) member() *teambus.Member { return u.ft.Snapshot().Members["tm1"] }

func (u *unit) probeOpen() bool {
	_, ok := u.ft.Snapshot().Team.Probes["tm1"]
	return ok
}

// probed expires tm1's heartbeat and waits for the status check.
func (u *unit) probed(t *testing.T) {
	t.Helper()
	u.ft.PushBeat(t, "tm1", false, 0)
	u.ft.Wait(t, "a status check to tm1", func() bool { return len(u.checks()) == 1 && u.probeOpen() })
}

// beatFor keeps tm1's heartbeat fresh for d.
func (u *unit) beatFor(t *testing.T, d time.Duration) {
	for step := u.pol.MemberTimeout / 4; d > 0; d -= step {
		u.ft.PushBeat(t, "tm1", true, 1)
		u.clk.Advance(min(step, d))
	}
}

func (u *unit) crashed(t *testing.T) {
	t.Helper()
	u.ft.Wait(t, "tm1 crashed", func() bool {
		m := u.member()
		return m.Status == teambus.MemberCrashed || m.Status == teambus.MemberPaused
	})
}

// TestUnit_Lead runs the lead sidecar's scenarios on an in-memory team and
// a fake clock.
func TestUnit_Lead(t *testing.T) {
	tests := []struct {
		name  string
		cfg   lead.Config
		setup func(t *testing.T, u *unit)
		run   func(t *testing.T, u *unit)
	}{
		{
			name: "attaches and beats",
			run: func(t *testing.T, u *unit) {
				if u.report == nil || u.report.Decision != "attach" || u.report.LeadEpoch != 1 {
					t.Fatalf("report %+v", u.report)
				}
				hb, ok := u.ft.Beating(teambus.Lead)
				if !ok || hb.Epoch != 1 || hb.Session != "L1" {
					t.Fatalf("lead heartbeat %+v %v", hb, ok)
				}
				n := u.ft.Calls("Beat")
				u.clk.Advance(2 * u.pol.Heartbeat)
				u.ft.Wait(t, "two more heartbeats", func() bool { return u.ft.Calls("Beat") >= n+1 })
				// lead_last_seen is persisted every quarter of
				// takeover-after, not every beat.
				every := max(u.pol.TakeoverAfter/4, u.pol.Heartbeat)
				u.clk.Advance(every)
				u.ft.Wait(t, "lead_last_seen persisted", func() bool {
					seen := u.ft.Snapshot().Team.LeadLastSeen
					return seen != nil && !seen.Before(u.clk.Now().Add(-every-u.pol.Heartbeat))
				})
			},
		},
		{
			name: "a lead timeout seen by teammates is cleared on attach",
			setup: func(t *testing.T, u *unit) {
				u.ft.Edit(func(tm *teambus.Team, _ map[string]*teambus.Member, _ map[string]*teambus.Task, _ map[string]time.Time) {
					tm.LeadTimeoutDetectedAt = teambus.TimePtr(u.clk.Now())
				})
			},
			run: func(t *testing.T, u *unit) {
				u.ft.Wait(t, "lead_timeout_detected_at cleared", func() bool { return u.ft.Snapshot().Team.LeadTimeoutDetectedAt == nil })
			},
		},
		{
			name: "expired heartbeat: probed",
			run: func(t *testing.T, u *unit) {
				u.probed(t)
				c := u.checks()[0]
				if !strings.HasPrefix(c.ID, "probe/tm1/1/") || c.From != teambus.Lead || c.Epoch != 1 {
					t.Fatalf("check %+v", c)
				}
			},
		},
		{
			name: "no key write for the backstop (no team service judging): probed",
			run: func(t *testing.T, u *unit) {
				u.clk.Advance(sidecar.Backstop(u.pol.MemberTimeout) - u.pol.Heartbeat)
				if n := len(u.checks()); n != 0 {
					t.Fatalf("%d checks before the backstop", n)
				}
				u.clk.Advance(2 * u.pol.Heartbeat)
				u.ft.Wait(t, "a status check", func() bool { return len(u.checks()) >= 1 })
			},
		},
		{
			name: "fresh heartbeats: not probed",
			run: func(t *testing.T, u *unit) {
				u.beatFor(t, 3*u.pol.MemberTimeout)
				if n := len(u.checks()); n != 0 {
					t.Fatalf("%d checks to a member that beats", n)
				}
			},
		},
		{
			name: "fresh heartbeat but no activity for stuck-timeout: probed",
			setup: func(t *testing.T, u *unit) {
				u.ft.AddTask("t1", "tm1")
				u.ft.Edit(func(_ *teambus.Team, _ map[string]*teambus.Member, _ map[string]*teambus.Task, act map[string]time.Time) {
					act["tm1"] = u.clk.Now()
				})
			},
			run: func(t *testing.T, u *unit) {
				u.beatFor(t, u.pol.StuckTimeout-u.pol.MemberTimeout/4)
				if n := len(u.checks()); n != 0 {
					t.Fatalf("%d checks before stuck-timeout", n)
				}
				u.beatFor(t, u.pol.MemberTimeout/2)
				u.ft.Wait(t, "a stuck check", func() bool {
					c := u.checks()
					return len(c) >= 1 && strings.Contains(c[0].Body, "no activity for 20m0s")
				})
			},
		},
		{
			name: "probe answered: alive",
			run: func(t *testing.T, u *unit) {
				u.probed(t)
				d := u.ft.Deliver(teambus.Lead, teambus.Message{Seq: 5, From: "tm1", Epoch: 1, To: teambus.Lead, Type: teambus.MsgStatus, Body: "tm1 alive: idle"}, nil)
				u.ft.Wait(t, "probe closed, reply acked", func() bool { return !u.probeOpen() && d.State() == "ack" })
				u.clk.Advance(2 * u.pol.ProbeTimeout)
				if m := u.member(); m.Status == teambus.MemberCrashed {
					t.Fatal("crashed after answering")
				}
			},
		},
		{
			name: "answer of an older incarnation keeps the probe",
			run: func(t *testing.T, u *unit) {
				u.probed(t)
				d := u.ft.Deliver(teambus.Lead, teambus.Message{Seq: 5, From: "tm1", Epoch: 0, Type: teambus.MsgStatus}, nil)
				u.ft.Wait(t, "reply acked", func() bool { return d.State() == "ack" })
				if !u.probeOpen() {
					t.Fatal("probe of epoch 1 closed by an epoch 0 reply")
				}
			},
		},
		{
			name: "other sidecar mail is acked, unreadable mail dropped",
			run: func(t *testing.T, u *unit) {
				info := u.ft.Deliver(teambus.Lead, teambus.Message{Seq: 6, From: "tm1", Type: teambus.MsgShutdownResponse}, nil)
				bad := u.ft.Deliver(teambus.Lead, teambus.Message{}, errors.New("bad json"))
				u.ft.Wait(t, "settled", func() bool { return info.State() == "ack" && bad.State() == "term" })
			},
		},
		{
			name: "probe resent every probe-timeout/4",
			run: func(t *testing.T, u *unit) {
				u.probed(t)
				u.clk.Advance(u.pol.ProbeTimeout - 2*u.every)
				u.ft.Wait(t, "three resends", func() bool { return len(u.checks()) == 4 })
				ids := map[string]bool{}
				for _, c := range u.checks() {
					ids[c.ID] = true
				}
				if len(ids) != 4 {
					t.Fatalf("resends reuse ids: %v", ids)
				}
			},
		},
		{
			name: "probe unanswered: crash confirmed, task requeued, lead told",
			setup: func(t *testing.T, u *unit) {
				u.ft.AddTask("t1", "tm1")
			},
			run: func(t *testing.T, u *unit) {
				u.probed(t)
				u.clk.Advance(u.pol.ProbeTimeout - u.every)
				if m := u.member(); m.Status == teambus.MemberCrashed {
					t.Fatalf("crashed %s before probe-timeout", u.pol.ProbeTimeout-u.every)
				}
				u.clk.Advance(4 * u.every)
				u.crashed(t)
				u.ft.Wait(t, "crash notice, probe closed", func() bool {
					for _, m := range u.ft.Mail(teambus.MsgSystem) {
						if m.ID == "crash/tm1/1" && strings.Contains(m.Body, "back in the queue") {
							return !u.probeOpen()
						}
					}
					return false
				})
				if st := u.ft.Snapshot().Tasks["t1"].Status; st != teambus.TaskAvailable {
					t.Fatalf("t1 %s, want available", st)
				}
			},
		},
		{
			name: "crash budget spent: paused and exactly one escalation",
			setup: func(t *testing.T, u *unit) {
				u.ft.Edit(func(_ *teambus.Team, ms map[string]*teambus.Member, _ map[string]*teambus.Task, _ map[string]time.Time) {
					ms["tm1"].CrashCount = u.pol.CrashLimit
				})
				u.ft.AddTask("t1", "tm1")
			},
			run: func(t *testing.T, u *unit) {
				u.probed(t)
				u.clk.Advance(u.pol.ProbeTimeout + 2*u.every)
				u.ft.Wait(t, "one escalation", func() bool { return len(u.ft.Mail(teambus.MsgEscalation)) == 1 && !u.member().EscalatePending })
				u.clk.Advance(5 * u.pol.Heartbeat) // more reconciles
				snap := u.ft.Snapshot()
				if m := snap.Members["tm1"]; m.Status != teambus.MemberPaused || snap.Tasks["t1"].Status != teambus.TaskPaused {
					t.Fatalf("tm1 %s, t1 %s: want paused", m.Status, snap.Tasks["t1"].Status)
				}
				if n := len(u.ft.Mail(teambus.MsgEscalation)); n != 1 {
					t.Fatalf("%d escalations, want 1", n)
				}
				var esc int
				for _, e := range u.ft.Events() {
					if e == eventlog.EvEscalation {
						esc++
					}
				}
				if esc != 1 {
					t.Fatalf("%d escalation events, want 1", esc)
				}
			},
		},
		{
			name: "pending escalation of an earlier crash sent once at attach",
			setup: func(t *testing.T, u *unit) {
				u.ft.Edit(func(_ *teambus.Team, ms map[string]*teambus.Member, _ map[string]*teambus.Task, _ map[string]time.Time) {
					ms["tm1"].Status, ms["tm1"].EscalatePending, ms["tm1"].CrashCount, ms["tm1"].CrashedEpoch = teambus.MemberPaused, true, 2, 1
				})
			},
			run: func(t *testing.T, u *unit) {
				u.ft.Wait(t, "escalation", func() bool { return len(u.ft.Mail(teambus.MsgEscalation)) == 1 })
				u.clk.Advance(3 * u.pol.Heartbeat)
				if n := len(u.ft.Mail(teambus.MsgEscalation)); n != 1 {
					t.Fatalf("%d escalations", n)
				}
			},
		},
		{
			name: "crashed member's task requeued at reconcile",
			setup: func(t *testing.T, u *unit) {
				u.ft.AddTask("t1", "tm1")
				u.ft.Edit(func(_ *teambus.Team, ms map[string]*teambus.Member, _ map[string]*teambus.Task, _ map[string]time.Time) {
					ms["tm1"].Status, ms["tm1"].CrashCount, ms["tm1"].CrashedEpoch = teambus.MemberCrashed, 1, 1
				})
			},
			run: func(t *testing.T, u *unit) {
				u.ft.Wait(t, "t1 requeued", func() bool { return u.ft.Snapshot().Tasks["t1"].Status == teambus.TaskAvailable })
			},
		},
		{
			name: "probe recorded by another lead is continued",
			setup: func(t *testing.T, u *unit) {
				u.ft.Edit(func(tm *teambus.Team, _ map[string]*teambus.Member, _ map[string]*teambus.Task, _ map[string]time.Time) {
					tm.Probes = map[string]teambus.Probe{"tm1": {Epoch: 1, SentAt: u.clk.Now().Add(-time.Hour), Reason: "no heartbeat"}}
				})
			},
			run: func(t *testing.T, u *unit) {
				u.clk.Advance(u.every)
				u.ft.Wait(t, "a check of its own", func() bool { return len(u.checks()) == 1 })
				// Judged on this lead's clock from now, not from the old timestamp.
				u.clk.Advance(u.pol.ProbeTimeout / 2)
				if m := u.member(); m.Status == teambus.MemberCrashed {
					t.Fatal("crashed by another lead's timestamp")
				}
				u.clk.Advance(u.pol.ProbeTimeout/2 + 4*u.every)
				u.crashed(t)
			},
		},
		{
			name: "a stalled bus does not count toward probe-timeout",
			run: func(t *testing.T, u *unit) {
				u.probed(t)
				u.clk.Advance(u.pol.ProbeTimeout / 2)
				u.ft.Fail("Team", teambus.Unavailablef("bus stopped"))
				u.clk.Advance(u.pol.ProbeTimeout)
				u.ft.Fail("Team", nil)
				// At most 108s of reachable bus so far (a check after a
				// failed one credits nothing): not crashed.
				u.clk.Advance(u.pol.ProbeTimeout/2 - 2*u.every)
				if m := u.member(); m.Status == teambus.MemberCrashed {
					t.Fatal("crashed: the stalled stretch was counted")
				}
				u.clk.Advance(u.pol.ProbeTimeout / 2)
				u.crashed(t)
			},
		},
		{
			name: "held mail nobody released is released, a zombie's is not",
			setup: func(t *testing.T, u *unit) {
				u.ft.Hold("tm1", "h1")
			},
			run: func(t *testing.T, u *unit) {
				u.ft.Wait(t, "held mail released", func() bool { return len(u.ft.Released("tm1")) == 1 })
				u.ft.Edit(func(_ *teambus.Team, ms map[string]*teambus.Member, _ map[string]*teambus.Task, _ map[string]time.Time) {
					ms["tm1"].Status = teambus.MemberZombie
				})
				u.ft.Hold("tm1", "h2")
				u.clk.Advance(2 * u.pol.Heartbeat)
				if n := len(u.ft.Released("tm1")); n != 1 {
					t.Fatalf("released a zombie's held mail (%d)", n)
				}
			},
		},
		{
			name: "fenced by a newer lead: its own check of the team record, with no notice",
			run: func(t *testing.T, u *unit) {
				if _, err := u.ft.Resume(context.Background(), "lu", "L2", true, true); err != nil {
					t.Fatal(err)
				}
				u.clk.Advance(max(u.pol.TakeoverAfter/4, u.pol.Heartbeat) + u.pol.Heartbeat)
				if err := u.stopped(t); !errors.Is(err, teambus.ErrFenced) {
					t.Fatalf("run: %v, want ErrFenced (exit code 3)", err)
				}
			},
		},
		{
			name: "fenced by a newer lead",
			run: func(t *testing.T, u *unit) {
				if _, err := u.ft.Resume(context.Background(), "lu", "L2", true, true); err != nil {
					t.Fatal(err)
				}
				// The team service drops the old lead's next beat and tells
				// it (its own check of the team record comes later).
				u.clk.Advance(u.pol.Heartbeat)
				u.ft.PushFence(teambus.Lead, teambus.Fencedf("a newer lead attached"))
				if err := u.stopped(t); !errors.Is(err, teambus.ErrFenced) {
					t.Fatalf("run: %v, want ErrFenced (exit code 3)", err)
				}
				if tm, _ := u.ft.Team(context.Background(), "lu"); tm.LeadReleasedAt != nil {
					t.Fatal("a fenced lead released its successor's team")
				}
				if got := u.ft.Outcomes(); len(got) != 1 || got[0] != "fenced" {
					t.Fatalf("session outcomes %q", got)
				}
				if u.ft.BeatStops(teambus.Lead) != 0 {
					t.Fatal("a fenced lead removed the heartbeat key")
				}
			},
		},
		{
			name: "clean shutdown removes its heartbeat",
			run: func(t *testing.T, u *unit) {
				u.cancel()
				if err := u.stopped(t); err != nil {
					t.Fatalf("run: %v", err)
				}
				if _, ok := u.ft.Beating(teambus.Lead); ok || u.ft.BeatStops(teambus.Lead) != 1 {
					t.Fatal("lead heartbeat left after a clean stop")
				}
				if got := u.ft.Outcomes(); len(got) != 1 || got[0] != "stopped" {
					t.Fatalf("session outcomes %q", got)
				}
				if tm, _ := u.ft.Team(context.Background(), "lu"); tm.LeadReleasedAt == nil || tm.LeadReleased != teambus.LeadStopped {
					t.Fatalf("team after a clean stop: released %v (%q), want released: stopped", tm.LeadReleasedAt, tm.LeadReleased)
				}
				if u.ft.InboxStops(teambus.Lead) != 1 {
					t.Fatal("sidecar inbox not stopped")
				}
			},
		},
		{
			name: "agent exit stops heartbeating, leaves the key to expire",
			run: func(t *testing.T, u *unit) {
				u.procs.Exit()
				if err := u.stopped(t); err != nil {
					t.Fatalf("run: %v", err)
				}
				if _, ok := u.ft.Beating(teambus.Lead); !ok {
					t.Fatal("heartbeat removed: teammates would not see the lead time out")
				}
				if got := u.ft.Outcomes(); len(got) != 1 || got[0] != "agent_exited" {
					t.Fatalf("session outcomes %q", got)
				}
				if tm, _ := u.ft.Team(context.Background(), "lu"); tm.LeadReleasedAt == nil || tm.LeadReleased != teambus.LeadAgentExited {
					t.Fatalf("team after the agent exited: released %v (%q), want released: agent_exited", tm.LeadReleasedAt, tm.LeadReleased)
				}
			},
		},
		{
			name: "team finished: stops",
			run: func(t *testing.T, u *unit) {
				u.ft.Edit(func(tm *teambus.Team, _ map[string]*teambus.Member, _ map[string]*teambus.Task, _ map[string]time.Time) {
					tm.Status = teambus.TeamComplete
				})
				u.clk.Advance(u.pol.Heartbeat)
				if err := u.stopped(t); err != nil {
					t.Fatalf("run: %v", err)
				}
			},
		},
		{
			name: "heartbeat failure is retried, not fatal",
			run: func(t *testing.T, u *unit) {
				u.ft.Fail("Beat", teambus.Unavailablef("bus down"))
				n := u.ft.Beats(teambus.Lead)
				u.clk.Advance(2 * u.pol.Heartbeat)
				u.running(t)
				if got := u.ft.Beats(teambus.Lead); got != n {
					t.Fatalf("%d heartbeats stored while the bus was down", got-n)
				}
				u.ft.Fail("Beat", nil)
				n = u.ft.Beats(teambus.Lead)
				u.clk.Advance(2 * u.pol.Heartbeat)
				u.ft.Wait(t, "heartbeats again", func() bool { return u.ft.Beats(teambus.Lead) > n })
			},
		},
		{
			name: "adopt the incarnation a hook attached",
			cfg:  lead.Config{Adopt: true, Session: "L0"},
			setup: func(t *testing.T, u *unit) {
				u.ft.Resume(context.Background(), "lu", "L0", false, true)
			},
			run: func(t *testing.T, u *unit) {
				if u.report == nil || u.report.Decision != lead.DecisionAdopt || u.ft.Calls("Resume") != 1 {
					t.Fatalf("report %+v, resumes %d: want adopt without a resume", u.report, u.ft.Calls("Resume"))
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := newUnit(t)
			if tc.setup != nil {
				tc.setup(t, u)
			}
			u.start(t, tc.cfg)
			tc.run(t, u)
		})
	}
}

// TestUnit_LeadAdoptReplaced: adopting a session that is not the team's
// lead fails at start with ErrFenced (exit code 3), changing nothing.
func TestUnit_LeadAdoptReplaced(t *testing.T) {
	u := newUnit(t)
	u.ft.Resume(context.Background(), "lu", "L2", false, true)
	sc, err := lead.New(u.ft, lead.Config{Team: "lu", Session: "L1", Adopt: true, Clock: u.clk, Procs: u.procs})
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Run(context.Background()); !errors.Is(err, teambus.ErrFenced) {
		t.Fatalf("run: %v, want ErrFenced", err)
	}
	if u.ft.Calls("Beat") != 0 || u.ft.Snapshot().Team.LeadEpoch != 1 {
		t.Fatal("a refused adopt changed the team")
	}
}

// TestUnit_LeadAdoptAfterRelease: a sidecar that adopts a lead whose
// previous sidecar released the team (stopped by hand while the agent
// lives on) takes the release back with its first beat: the team is held
// again and another session can not walk in without force.
func TestUnit_LeadAdoptAfterRelease(t *testing.T) {
	u := newUnit(t)
	if _, err := u.ft.Resume(context.Background(), "lu", "L1", false, true); err != nil {
		t.Fatal(err)
	}
	if _, err := u.ft.UpdateTeam(context.Background(), "lu", func(tm *teambus.Team) (bool, error) {
		return tm.ReleaseLead("L1", 1, u.clk.Now(), teambus.LeadStopped), nil
	}); err != nil {
		t.Fatal(err)
	}
	u.start(t, lead.Config{Session: "L1", Adopt: true})
	if tm := u.ft.Snapshot().Team; tm.LeadReleasedAt != nil || tm.LeadReleased != "" {
		t.Fatalf("adopted lead beats but the team still says released %v (%q)", tm.LeadReleasedAt, tm.LeadReleased)
	}
}
