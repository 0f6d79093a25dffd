package teammate_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/internal/clock"
	"github.com/teambus/teambus/internal/sidecar"
	"github.com/teambus/teambus/internal/sidecartest"
	"github.com/teambus/teambus/teammate"
)

var _ teammate.Team = (*sidecartest.Team)(nil)

// unit is a teammate sidecar of member tm1 run on an in-memory team and a
// fake clock.
type unit struct {
	ft     *sidecartest.Team
	clk    *clock.Fake
	pol    teambus.Policy
	procs  sidecartest.Procs
	cancel context.CancelFunc
	done   chan struct{}
	out    teammate.Outcome
	err    error
}

// sidecarTimers are the timers of a running teammate sidecar: heartbeat,
// checkpoint and blocked tickers, the lead timer.
const sidecarTimers = 4

func newUnit(t *testing.T, pol teambus.Policy) *unit {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	return &unit{ft: sidecartest.New(clk, "tu", pol, "tm1"), clk: clk, pol: pol, procs: sidecartest.NewProcs()}
}

// start runs the sidecar and waits until its loop has armed its timers.
func (u *unit) start(t *testing.T, cfg teammate.Config) {
	t.Helper()
	cfg.Team, cfg.Member, cfg.Clock, cfg.Procs = "tu", "tm1", u.clk, u.procs
	if cfg.Session == "" {
		cfg.Session = "s1"
	}
	if cfg.PID == 0 {
		cfg.PID = 4242
	}
	sc, err := teammate.New(u.ft, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	u.cancel, u.done = cancel, make(chan struct{})
	go func() {
		defer close(u.done)
		u.out, u.err = sc.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-u.done })
	u.waitTimers(t, sidecarTimers)
}

func (u *unit) waitTimers(t *testing.T, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	select {
	case <-u.done:
		t.Fatalf("sidecar stopped while starting: %s, %v", u.out, u.err)
	default:
	}
	if err := u.clk.WaitTimers(ctx, n); err != nil {
		t.Fatal(err)
	}
}

// stopped waits for Run to return and checks its outcome.
func (u *unit) stopped(t *testing.T, want teammate.Outcome) {
	t.Helper()
	select {
	case <-u.done:
	case <-time.After(5 * time.Second):
		t.Fatalf("sidecar still running, want %s", want)
	}
	if u.out != want {
		t.Fatalf("outcome %s (%v), want %s", u.out, u.err, want)
	}
}

func (u *unit) member(t *testing.T) *teambus.Member { return u.ft.Snapshot().Members["tm1"] }

func (u *unit) waitStatus(t *testing.T, want teambus.MemberStatus) {
	t.Helper()
	u.ft.Wait(t, "tm1 "+string(want), func() bool { return u.member(t).Status == want })
}

func (u *unit) mailTo(to string, typ teambus.MessageType) []sidecartest.Mail {
	var out []sidecartest.Mail
	for _, m := range u.ft.Mail(typ) {
		if m.To == to {
			out = append(out, m)
		}
	}
	return out
}

// zombie makes the sidecar a zombie: no write of the lead's key for the
// backstop (no team service ends it in these tests).
func (u *unit) zombie(t *testing.T) {
	t.Helper()
	u.clk.Advance(sidecar.Backstop(u.pol.LeadTimeout))
	u.waitStatus(t, teambus.MemberZombie)
	u.waitTimers(t, sidecarTimers) // the lead timer fired, zombie-max armed
}

// TestUnit_Teammate runs the teammate sidecar's scenarios on an in-memory
// team and a fake clock.
func TestUnit_Teammate(t *testing.T) {
	pol := teambus.DefaultPolicy()
	tests := []struct {
		name string
		cfg  teammate.Config
		// setup runs before the sidecar starts.
		setup func(t *testing.T, u *unit)
		run   func(t *testing.T, u *unit)
	}{
		{
			name: "registers and beats",
			run: func(t *testing.T, u *unit) {
				u.waitStatus(t, teambus.MemberIdle)
				if m := u.member(t); m.Epoch != 1 || m.Session != "s1" {
					t.Fatalf("tm1 = epoch %d session %q, want epoch 1 s1", m.Epoch, m.Session)
				}
				n := u.ft.Calls("Beat")
				u.clk.Advance(3 * u.pol.Heartbeat)
				u.ft.Wait(t, "3 more heartbeats", func() bool { return u.ft.Calls("Beat") >= n+2 })
				hb, ok := u.ft.Beating("tm1")
				if !ok || hb.Epoch != 1 || hb.PID != 4242 {
					t.Fatalf("heartbeat %+v %v", hb, ok)
				}
			},
		},
		{
			name: "zombie entry on lead silence (no key write for the backstop)",
			setup: func(t *testing.T, u *unit) {
				u.ft.Join(context.Background(), "tu", "tm1", "s0")
				u.ft.AddTask("t1", "tm1")
			},
			run: func(t *testing.T, u *unit) {
				u.clk.Advance(sidecar.Backstop(u.pol.LeadTimeout) - time.Second)
				if st := u.member(t).Status; st == teambus.MemberZombie {
					t.Fatal("zombie before the backstop")
				}
				u.clk.Advance(time.Second)
				u.waitStatus(t, teambus.MemberZombie)
				u.ft.Wait(t, "lead timeout recorded, checkpoint taken", func() bool {
					return u.ft.Snapshot().Team.LeadTimeoutDetectedAt != nil && u.ft.AutoCheckpoints("tm1") == 1
				})
			},
		},
		{
			name: "zombie entry on lead key expiry",
			run: func(t *testing.T, u *unit) {
				u.ft.PushBeat(t, teambus.Lead, false, 0)
				u.waitStatus(t, teambus.MemberZombie)
			},
		},
		{
			name: "lead heartbeats keep it out of zombie mode",
			run: func(t *testing.T, u *unit) {
				for range 3 {
					u.clk.Advance(u.pol.LeadTimeout / 2)
					u.ft.PushBeat(t, teambus.Lead, true, 1)
				}
				u.ft.PushBeat(t, "tm2", false, 0) // another member's expiry: not the lead
				u.clk.Advance(u.pol.Heartbeat)    // a tick after the beats: they were handled
				if st := u.member(t).Status; st != teambus.MemberIdle {
					t.Fatalf("tm1 %s after %s of lead heartbeats, want idle", st, 3*u.pol.LeadTimeout/2)
				}
			},
		},
		{
			name: "zombie exit releases held mail and tells the lead",
			run: func(t *testing.T, u *unit) {
				u.zombie(t)
				u.ft.Hold("tm1", "h1")
				u.ft.Hold("tm1", "h2")
				u.clk.Advance(time.Minute)
				u.ft.PushBeat(t, teambus.Lead, true, 2)
				u.waitStatus(t, teambus.MemberIdle)
				u.ft.Wait(t, "unzombie notice", func() bool { return len(u.mailTo(teambus.Lead, teambus.MsgSystem)) == 1 })
				var bodies []string
				for _, m := range u.ft.Released("tm1") {
					bodies = append(bodies, m.Body)
				}
				if got := strings.Join(bodies, ","); got != "h1,h2" {
					t.Fatalf("released %q, want h1,h2 in order", got)
				}
				if n := u.mailTo(teambus.Lead, teambus.MsgSystem)[0]; !strings.Contains(n.Body, "left zombie mode after 1m0s: 2 held") {
					t.Fatalf("notice %q", n.Body)
				}
				if m := u.member(t); m.HeldSince != nil {
					t.Fatalf("held mark left: %+v", m)
				}
				u.clk.Advance(u.pol.Heartbeat) // a tick taken: the lead's beat was handled
				if got := u.clk.Timers(); got != sidecarTimers {
					t.Fatalf("%d timers running after zombie exit, want %d (zombie-max stopped)", got, sidecarTimers)
				}
			},
		},
		{
			name: "held mail stored just after zombie exit goes out with the next heartbeat",
			run: func(t *testing.T, u *unit) {
				u.zombie(t)
				u.ft.PushBeat(t, teambus.Lead, true, 2)
				u.waitStatus(t, teambus.MemberIdle)
				u.ft.Hold("tm1", "late")
				u.clk.Advance(u.pol.Heartbeat)
				u.ft.Wait(t, "late mail released", func() bool { return len(u.ft.Released("tm1")) == 1 })
			},
		},
		{
			name: "auto checkpoint every checkpoint-every while zombie only",
			setup: func(t *testing.T, u *unit) {
				u.ft.Join(context.Background(), "tu", "tm1", "s0")
				u.ft.AddTask("t1", "tm1")
			},
			run: func(t *testing.T, u *unit) {
				if n := u.ft.AutoCheckpoints("tm1"); n != 0 {
					t.Fatalf("%d checkpoints before zombie mode", n)
				}
				u.zombie(t) // one at entry
				u.clk.Advance(3 * u.pol.CheckpointEvery)
				u.ft.Wait(t, "1 checkpoint at entry + 3", func() bool { return u.ft.AutoCheckpoints("tm1") == 4 })
			},
		},
		{
			name: "zombie-max releases the task, shuts down and releases held mail",
			setup: func(t *testing.T, u *unit) {
				u.ft.Join(context.Background(), "tu", "tm1", "s0")
				u.ft.AddTask("t1", "tm1")
			},
			run: func(t *testing.T, u *unit) {
				u.zombie(t)
				u.ft.Hold("tm1", "h1")
				u.clk.Advance(u.pol.ZombieMax)
				u.stopped(t, teammate.OutcomeZombieMax)
				snap := u.ft.Snapshot()
				if tk := snap.Tasks["t1"]; tk.Status != teambus.TaskAvailable || tk.Checkpoint == nil {
					t.Fatalf("t1 = %s checkpoint %v, want available with its checkpoint", tk.Status, tk.Checkpoint)
				}
				if st := snap.Members["tm1"].Status; st != teambus.MemberShutdown {
					t.Fatalf("tm1 %s, want shutdown", st)
				}
				if got := u.ft.Released("tm1"); len(got) != 1 || got[0].HeldSince == nil {
					t.Fatalf("released %+v, want h1 marked held_since", got)
				}
			},
		},
		{
			name: "status check answered",
			setup: func(t *testing.T, u *unit) {
				u.ft.Join(context.Background(), "tu", "tm1", "s0")
				u.ft.AddTask("t1", "tm1")
			},
			run: func(t *testing.T, u *unit) {
				d := u.ft.Deliver("tm1", teambus.Message{Seq: 7, From: teambus.Lead, To: "tm1", Type: teambus.MsgStatusCheck}, nil)
				u.ft.Wait(t, "check acked", func() bool { return d.State() == "ack" })
				replies := u.mailTo(teambus.Lead, teambus.MsgStatus)
				if len(replies) != 1 || replies[0].ID != "status/7" || replies[0].Epoch != 2 || !strings.Contains(replies[0].Body, "on t1") {
					t.Fatalf("replies %+v, want one status/7 from epoch 2 on t1", replies)
				}
				// Redelivered: answered once.
				d = u.ft.Deliver("tm1", teambus.Message{Seq: 7, From: teambus.Lead, To: "tm1", Type: teambus.MsgStatusCheck}, nil)
				u.ft.Wait(t, "redelivery acked", func() bool { return d.State() == "ack" })
				if n := len(u.mailTo(teambus.Lead, teambus.MsgStatus)); n != 1 {
					t.Fatalf("%d replies to one check", n)
				}
			},
		},
		{
			name: "status reply that fails is given back",
			run: func(t *testing.T, u *unit) {
				u.ft.Fail("Notify", teambus.Unavailablef("bus down"))
				d := u.ft.Deliver("tm1", teambus.Message{Seq: 8, From: teambus.Lead, Type: teambus.MsgStatusCheck}, nil)
				u.ft.Wait(t, "check naked", func() bool { return d.State() == "nak" })
			},
		},
		{
			name: "unreadable sidecar mail is dropped",
			run: func(t *testing.T, u *unit) {
				d := u.ft.Deliver("tm1", teambus.Message{}, errors.New("bad json"))
				u.ft.Wait(t, "term", func() bool { return d.State() == "term" })
			},
		},
		{
			name: "shutdown request approved without a task",
			run: func(t *testing.T, u *unit) {
				d := u.ft.Deliver("tm1", teambus.Message{Seq: 9, From: teambus.Lead, Type: teambus.MsgShutdownRequest}, nil)
				u.stopped(t, teammate.OutcomeShutdown)
				if d.State() != "ack" {
					t.Fatalf("request %q, want acked", d.State())
				}
				if r := u.mailTo(teambus.Lead, teambus.MsgShutdownResponse); len(r) != 1 || !strings.HasPrefix(r[0].Body, "approve: ") {
					t.Fatalf("responses %+v", r)
				}
				if st := u.member(t).Status; st != teambus.MemberShutdown {
					t.Fatalf("tm1 %s", st)
				}
			},
		},
		{
			name: "shutdown request declined while working",
			setup: func(t *testing.T, u *unit) {
				u.ft.Join(context.Background(), "tu", "tm1", "s0")
				u.ft.AddTask("t1", "tm1")
			},
			run: func(t *testing.T, u *unit) {
				d := u.ft.Deliver("tm1", teambus.Message{Seq: 9, From: teambus.Lead, Type: teambus.MsgShutdownRequest}, nil)
				u.ft.Wait(t, "request acked", func() bool { return d.State() == "ack" })
				if r := u.mailTo(teambus.Lead, teambus.MsgShutdownResponse); len(r) != 1 || !strings.Contains(r[0].Body, "approve:false: still working on t1") {
					t.Fatalf("responses %+v", r)
				}
				select {
				case <-u.done:
					t.Fatalf("stopped: %s", u.out)
				default:
				}
			},
		},
		{
			name: "fenced by a newer incarnation",
			run: func(t *testing.T, u *unit) {
				u.ft.Join(context.Background(), "tu", "tm1", "s2")
				u.ft.PushState("tm1")
				u.stopped(t, teammate.OutcomeFenced)
				if !errors.Is(u.err, teambus.ErrFenced) {
					t.Fatalf("err %v, want ErrFenced (exit code 3)", u.err)
				}
				if u.ft.BeatStops("tm1") != 0 || u.ft.Snapshot().Members["tm1"].Status == teambus.MemberShutdown {
					t.Fatal("a fenced incarnation touched its successor's heartbeat or status")
				}
			},
		},
		{
			name: "fenced: the successor's mail is given back",
			run: func(t *testing.T, u *unit) {
				u.ft.Join(context.Background(), "tu", "tm1", "s2")
				d := u.ft.Deliver("tm1", teambus.Message{Seq: 3, From: teambus.Lead, Type: teambus.MsgStatusCheck}, nil)
				u.stopped(t, teammate.OutcomeFenced)
				if d.State() != "nak" || u.ft.InboxStops("tm1") != 1 {
					t.Fatalf("check %q, inbox stops %d: want given back once the inbox stopped", d.State(), u.ft.InboxStops("tm1"))
				}
				if n := len(u.ft.Mail(teambus.MsgStatus)); n != 0 {
					t.Fatalf("a fenced incarnation answered the check")
				}
			},
		},
		{
			name: "fenced: declared crashed, the team service's notice on a dropped beat stops it",
			run: func(t *testing.T, u *unit) {
				u.ft.MarkCrashed(context.Background(), "tu", "tm1", 1, "silent")
				u.clk.Advance(u.pol.Heartbeat)
				u.ft.PushFence("tm1", teambus.Fencedf("declared crashed"))
				u.stopped(t, teammate.OutcomeFenced)
			},
		},
		{
			name: "clean shutdown on signal",
			setup: func(t *testing.T, u *unit) {
				u.ft.Join(context.Background(), "tu", "tm1", "s0")
				u.ft.AddTask("t1", "tm1")
			},
			run: func(t *testing.T, u *unit) {
				u.cancel()
				u.stopped(t, teammate.OutcomeShutdown)
				snap := u.ft.Snapshot()
				if snap.Tasks["t1"].Status != teambus.TaskAvailable || snap.Members["tm1"].Status != teambus.MemberShutdown || u.ft.BeatStops("tm1") != 1 {
					t.Fatalf("t1 %s, tm1 %s, beat stops %d: want available, shutdown, 1", snap.Tasks["t1"].Status, snap.Members["tm1"].Status, u.ft.BeatStops("tm1"))
				}
				if n := u.mailTo(teambus.Lead, teambus.MsgSystem); len(n) != 1 || !strings.Contains(n[0].Body, "task t1 back in the queue") {
					t.Fatalf("notice %+v", n)
				}
				if got := u.ft.Outcomes(); len(got) != 1 || got[0] != "shutdown" {
					t.Fatalf("session outcomes %q", got)
				}
			},
		},
		{
			name: "agent exit holding a task is a crash",
			setup: func(t *testing.T, u *unit) {
				u.ft.Join(context.Background(), "tu", "tm1", "s0")
				u.ft.AddTask("t1", "tm1")
			},
			run: func(t *testing.T, u *unit) {
				u.procs.Exit()
				u.stopped(t, teammate.OutcomeCrashed)
				snap := u.ft.Snapshot()
				if m := snap.Members["tm1"]; m.Status != teambus.MemberCrashed || m.CrashCount != 1 || snap.Tasks["t1"].Status != teambus.TaskAvailable {
					t.Fatalf("tm1 %s crashes %d, t1 %s", m.Status, m.CrashCount, snap.Tasks["t1"].Status)
				}
				if n := u.mailTo(teambus.Lead, teambus.MsgSystem); len(n) != 1 || n[0].ID != "crash/tm1/2" {
					t.Fatalf("crash notices %+v", n)
				}
			},
		},
		{
			name: "agent exit past the crash limit pauses",
			setup: func(t *testing.T, u *unit) {
				u.ft.Join(context.Background(), "tu", "tm1", "s0")
				u.ft.Edit(func(_ *teambus.Team, ms map[string]*teambus.Member, _ map[string]*teambus.Task, _ map[string]time.Time) {
					ms["tm1"].CrashCount = 1
				})
				u.ft.AddTask("t1", "tm1")
			},
			run: func(t *testing.T, u *unit) {
				u.procs.Exit()
				u.stopped(t, teammate.OutcomeCrashed)
				snap := u.ft.Snapshot()
				if m := snap.Members["tm1"]; m.Status != teambus.MemberPaused || !m.EscalatePending || snap.Tasks["t1"].Status != teambus.TaskPaused {
					t.Fatalf("tm1 %s escalate %v, t1 %s", m.Status, m.EscalatePending, snap.Tasks["t1"].Status)
				}
				if n := u.mailTo(teambus.Lead, teambus.MsgSystem); len(n) != 1 || !strings.Contains(n[0].Body, "past the crash limit") {
					t.Fatalf("crash notices %+v", n)
				}
			},
		},
		{
			name: "agent exit without a task is a clean end",
			run: func(t *testing.T, u *unit) {
				u.procs.Exit()
				u.stopped(t, teammate.OutcomeAgentDone)
				if m := u.member(t); m.Status != teambus.MemberShutdown || m.CrashCount != 0 {
					t.Fatalf("tm1 %s crashes %d", m.Status, m.CrashCount)
				}
			},
		},
		{
			name: "team complete",
			run: func(t *testing.T, u *unit) {
				u.ft.Edit(func(tm *teambus.Team, _ map[string]*teambus.Member, _ map[string]*teambus.Task, _ map[string]time.Time) {
					tm.Status = teambus.TeamComplete
				})
				u.ft.PushState("")
				u.stopped(t, teammate.OutcomeTeamDone)
			},
		},
		{
			name: "blocked task back to the queue after blocked-timeout",
			setup: func(t *testing.T, u *unit) {
				u.ft.Join(context.Background(), "tu", "tm1", "s0")
				u.ft.AddTask("t1", "tm1")
				u.ft.Edit(func(_ *teambus.Team, _ map[string]*teambus.Member, ts map[string]*teambus.Task, _ map[string]time.Time) {
					ts["t1"].Status, ts["t1"].BlockedOn, ts["t1"].BlockedAt = teambus.TaskBlocked, "t0", teambus.TimePtr(u.clk.Now())
				})
			},
			run: func(t *testing.T, u *unit) {
				u.clk.Advance(u.pol.LeadTimeout - time.Second)
				u.ft.PushBeat(t, teambus.Lead, true, 1) // no zombie meanwhile
				u.clk.Advance(u.pol.BlockedTimeout/2 - u.pol.LeadTimeout + time.Second)
				if st := u.ft.Snapshot().Tasks["t1"].Status; st != teambus.TaskBlocked {
					t.Fatalf("t1 %s before blocked-timeout", st)
				}
				u.clk.Advance(u.pol.BlockedTimeout / 2)
				u.ft.Wait(t, "t1 requeued", func() bool { return u.ft.Snapshot().Tasks["t1"].Status == teambus.TaskAvailable })
				u.ft.Wait(t, "lead told", func() bool {
					var told int
					for _, m := range u.mailTo(teambus.Lead, teambus.MsgSystem) {
						if strings.HasPrefix(m.ID, "blocked-timeout/t1/") {
							told++
						}
					}
					return told == 1
				})
			},
		},
		{
			name: "held mail of an earlier incarnation released at start",
			setup: func(t *testing.T, u *unit) {
				u.ft.Hold("tm1", "old")
			},
			run: func(t *testing.T, u *unit) {
				if got := u.ft.Released("tm1"); len(got) != 1 || got[0].Body != "old" {
					t.Fatalf("released %+v at start", got)
				}
			},
		},
		{
			name: "adopt of a session that is not current",
			cfg:  teammate.Config{Adopt: true, Session: "s9"},
			setup: func(t *testing.T, u *unit) {
				u.ft.Join(context.Background(), "tu", "tm1", "s1")
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := newUnit(t, pol)
			if tc.setup != nil {
				tc.setup(t, u)
			}
			if tc.cfg.Adopt {
				// Adopting a replaced incarnation fails at start.
				cfg := tc.cfg
				cfg.Team, cfg.Member, cfg.Clock, cfg.Procs = "tu", "tm1", u.clk, u.procs
				sc, err := teammate.New(u.ft, cfg)
				if err != nil {
					t.Fatal(err)
				}
				out, err := sc.Run(context.Background())
				if out != teammate.OutcomeFenced || !errors.Is(err, teambus.ErrFenced) {
					t.Fatalf("adopt: %s, %v: want fenced", out, err)
				}
				return
			}
			u.start(t, tc.cfg)
			tc.run(t, u)
		})
	}
}
