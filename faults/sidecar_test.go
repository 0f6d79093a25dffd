package faults

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/team"
)

// sidecars runs the built teambus binary's lead and teammate sidecars
// against a bus node found through dir.
type sidecars struct {
	t   *testing.T
	bin string
	dir string // node directory: the sidecars find the node there
	svc *team.Service
}

func newSidecars(t *testing.T, dir string, conn *bus.Conn) *sidecars {
	return &sidecars{t: t, bin: teambusBinary(t), dir: dir, svc: team.New(conn.JS, team.Config{})}
}

// fastPolicy is a team policy in seconds; only the lead is slow to be
// declared gone, so teammates do not enter zombie mode unless a test wants.
func fastPolicy() teambus.Policy {
	p := teambus.DefaultPolicy()
	p.Heartbeat = 500 * time.Millisecond
	p.MemberTimeout = 3 * time.Second
	p.ProbeTimeout = 2 * time.Second
	p.LeadTimeout = 10 * time.Second
	p.TakeoverAfter = 10 * time.Second
	p.AckWait = 3 * time.Second
	return p
}

func (s *sidecars) run(name string, args ...string) *proc {
	s.t.Helper()
	return startProc(s.t, name, exec.Command(s.bin, append(args, "--dir", s.dir, "--log-level", "debug")...))
}

// cli runs a one-shot command and returns its output and exit code.
func (s *sidecars) cli(args ...string) (string, int) {
	s.t.Helper()
	out, err := exec.Command(s.bin, append(args, "--dir", s.dir)...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	default:
		s.t.Fatalf("run %v: %v", args, err)
		return "", -1
	}
}

// lead starts a lead sidecar and waits until it attached and runs.
func (s *sidecars) lead(teamID, session string) *proc {
	s.t.Helper()
	p := s.run("lead-"+session, "lead", "--team", teamID, "--session", session)
	checkFor(s.t, 30*time.Second, func() error {
		if p.exited() {
			s.t.Fatalf("lead exited: %v\n%s", p.err, p.out.String())
		}
		tm, _, err := s.svc.Store().Team(context.Background(), teamID)
		if err != nil {
			return err
		}
		if tm.LeadSession != session {
			return fmt.Errorf("lead session %q", tm.LeadSession)
		}
		return nil
	})
	s.consuming(teamID, teambus.Lead, p)
	return p
}

// consuming waits until the sidecar of member pulls from its sidecar
// consumer: the last step of its start, so it is past every step that
// needs the bus to answer at once.
func (s *sidecars) consuming(teamID, member string, p *proc) {
	s.t.Helper()
	checkFor(s.t, 30*time.Second, func() error {
		if p.exited() {
			s.t.Fatalf("sidecar of %s exited: %v\n%s", member, p.err, p.out.String())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		c, err := s.svc.Store().JetStream().Consumer(ctx, mailbox.MailboxPrefix+teamID, mailbox.SidecarConsumer(member))
		if err != nil {
			return err
		}
		if ci := c.CachedInfo(); ci.NumWaiting == 0 {
			return fmt.Errorf("sidecar of %s not consuming yet", member)
		}
		return nil
	})
}

// teammate starts a stand-in agent and its teammate sidecar and waits
// until the member is registered with the session.
func (s *sidecars) teammate(teamID, member, session string) (agent, side *proc) {
	s.t.Helper()
	agent = startProc(s.t, member+"-agent", exec.Command("sleep", "600"))
	side = s.run(member+"-"+session, "teammate", "--team", teamID, "--member", member, "--session", session, "--pid", fmt.Sprint(agent.pid()))
	checkFor(s.t, 30*time.Second, func() error {
		if side.exited() {
			s.t.Fatalf("sidecar %s exited: %v\n%s", member, side.err, side.out.String())
		}
		m, _, err := s.svc.Store().Member(context.Background(), teamID, member)
		if err != nil {
			return err
		}
		if m.Session != session || m.Status == teambus.MemberSpawned {
			return fmt.Errorf("session %q status %s", m.Session, m.Status)
		}
		return nil
	})
	s.consuming(teamID, member, side)
	return agent, side
}

func (s *sidecars) member(teamID, id string) *teambus.Member {
	s.t.Helper()
	m, _, err := s.svc.Store().Member(context.Background(), teamID, id)
	if err != nil {
		s.t.Fatal(err)
	}
	return m
}

// crashNotices counts the crash notices about member in the mailbox.
func (s *sidecars) crashNotices(teamID, member string) int {
	s.t.Helper()
	n := 0
	err := s.svc.Mailbox(teamID).Replay(context.Background(), mailbox.ReplayFilter{}, func(m teambus.Message) error {
		if m.Type == teambus.MsgSystem && strings.Contains(m.Body, member+" crashed") {
			n++
		}
		return nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
	return n
}

// stays asserts cond for the whole of d, polling.
func stays(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := cond(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// S4: SIGSTOP of a teammate sidecar. Below member-timeout it is not
// declared crashed. Past member-timeout and probe-timeout it is; after
// SIGCONT its sidecar is fenced (exit 3), its heartbeat does not resurrect
// it and its agent's late writes are refused (exit 3).
func TestS4_TeammateSIGSTOP(t *testing.T) {
	node := nodetest.NewServer(t)
	conn := nodetest.Connect(t, node)
	s := newSidecars(t, node.Dir(), conn)
	ctx := context.Background()
	pol := fastPolicy()
	if _, err := s.svc.CreateTeam(ctx, "s4", "", []team.MemberSpec{{ID: "tm1"}, {ID: "tm2"}}, pol); err != nil {
		t.Fatal(err)
	}
	if _, err := s.svc.AddTask(ctx, "s4", team.TaskSpec{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	s.lead("s4", "L1")
	_, side1 := s.teammate("s4", "tm1", "s1")
	_, side2 := s.teammate("s4", "tm2", "s2")
	if _, err := s.svc.Claim(ctx, team.Actor{Team: "s4", Member: "tm1", Session: "s1"}, "a"); err != nil {
		t.Fatal(err)
	}

	// Short stop: a third of member-timeout.
	short := pol.MemberTimeout / 3
	side2.signal(syscall.SIGSTOP)
	time.Sleep(short)
	side2.signal(syscall.SIGCONT)
	stays(t, pol.MemberTimeout+pol.ProbeTimeout+2*time.Second, "tm2 after a short SIGSTOP", func() error {
		if m := s.member("s4", "tm2"); m.Status == teambus.MemberCrashed || m.CrashCount != 0 {
			return fmt.Errorf("declared crashed (status %s, crashes %d)", m.Status, m.CrashCount)
		}
		if side2.exited() {
			return fmt.Errorf("sidecar exited: %v", side2.err)
		}
		return nil
	})

	// Long stop: until the lead has declared it crashed.
	epoch := s.member("s4", "tm1").Epoch
	side1.signal(syscall.SIGSTOP)
	stopped := time.Now()
	checkFor(t, 60*time.Second, func() error {
		if m := s.member("s4", "tm1"); m.Status != teambus.MemberCrashed {
			return fmt.Errorf("tm1 is %s", m.Status)
		}
		return nil
	})
	detected := time.Since(stopped)
	checkFor(t, 30*time.Second, func() error {
		if task, _, _ := s.svc.Store().Task(ctx, "s4", "a"); task.Status != teambus.TaskAvailable {
			return fmt.Errorf("task of the crashed member is %s, want available", task.Status)
		}
		return nil
	})
	side1.signal(syscall.SIGCONT)
	code := side1.exitCode(t, 30*time.Second)
	if code != teambus.ExitConflict {
		t.Errorf("sidecar of the crashed incarnation exited %d after SIGCONT, want %d (fenced):\n%s", code, teambus.ExitConflict, tail(side1.out.String(), 3000))
	}
	// Its heartbeat never comes back, the member stays crashed.
	stays(t, pol.MemberTimeout, "tm1 after SIGCONT", func() error {
		if m := s.member("s4", "tm1"); m.Status != teambus.MemberCrashed || m.Epoch != epoch {
			return fmt.Errorf("resurrected: status %s epoch %d", m.Status, m.Epoch)
		}
		hbs, err := s.svc.Store().Heartbeats(ctx, "s4")
		if err != nil {
			return err
		}
		if hb, ok := hbs[kv.MemberKey("tm1")]; ok {
			return fmt.Errorf("heartbeat of the crashed incarnation is back (epoch %d, written %s)", hb.Epoch, hb.Created)
		}
		return nil
	})
	// The agent of the crashed incarnation still holds its session: every
	// late write is fenced.
	late := [][]string{
		{"task", "complete", "a", "--team", "s4", "--member", "tm1", "--session", "s1"},
		{"task", "claim", "a", "--team", "s4", "--member", "tm1", "--session", "s1"},
		{"send", "--to", "lead", "--team", "s4", "--member", "tm1", "--session", "s1", "late result"},
		{"checkpoint", "--done", "x", "--team", "s4", "--member", "tm1", "--session", "s1"},
	}
	for _, args := range late {
		if out, code := s.cli(args...); code != teambus.ExitConflict {
			t.Errorf("late write %v exited %d, want %d (fenced): %s", args, code, teambus.ExitConflict, out)
		}
	}
	if task, _, _ := s.svc.Store().Task(ctx, "s4", "a"); task.Status != teambus.TaskAvailable || task.AssignedTo != "" {
		t.Errorf("task after late writes: %s assigned to %q", task.Status, task.AssignedTo)
	}
	if n := s.crashNotices("s4", "tm1"); n != 1 {
		t.Errorf("%d crash notices for tm1, want 1", n)
	}
	if m := s.member("s4", "tm2"); m.Status == teambus.MemberCrashed || m.CrashCount != 0 || side2.exited() {
		t.Errorf("tm2 (short stop) status %s crashes %d exited %t", m.Status, m.CrashCount, side2.exited())
	}
	result(t, "S4", "short stop %s: not crashed; long stop: crashed after %s, sidecar exit %d after SIGCONT, heartbeat not resurrected, %d late writes fenced",
		short, detected.Round(100*time.Millisecond), code, len(late))
}
