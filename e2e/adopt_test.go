package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/teambus/teambus"
)

// TestTeammate_Adopt_AttachesToRegisteredIncarnation: a sidecar started
// with --adopt keeps the epoch registered for its session; one whose
// session is not the member's current one exits 3 and changes nothing.
func TestTeammate_Adopt_AttachesToRegisteredIncarnation(t *testing.T) {
	e := newEnv(t)
	e.createTeam("alpha", fastPolicy(), "tm1")
	ctx := context.Background()
	m, err := e.svc.Join(ctx, "alpha", "tm1", "s1")
	if err != nil {
		t.Fatal(err)
	}
	agent := e.agent("tm1-agent")
	stale := e.start("tm1-stale", "teammate", "--team", "alpha", "--member", "tm1", "--session", "s0", "--pid", fmt.Sprint(agent.Pid()), "--adopt")
	if code := stale.exitCode(t, 10*time.Second); code != teambus.ExitConflict {
		t.Fatalf("adopt with a stale session: exit %d, want %d; log:\n%s", code, teambus.ExitConflict, stale.output())
	}
	sc := e.start("tm1-sidecar", "teammate", "--team", "alpha", "--member", "tm1", "--session", "s1", "--pid", fmt.Sprint(agent.Pid()), "--adopt")
	e.waitMemberStatus("alpha", "tm1", teambus.MemberIdle, 10*time.Second)
	got, _, err := e.svc.Store().Member(ctx, "alpha", "tm1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Epoch != m.Epoch || got.Session != "s1" {
		t.Fatalf("after adopt: epoch %d session %q, want epoch %d session s1", got.Epoch, got.Session, m.Epoch)
	}
	e.waitFor(10*time.Second, "heartbeat", func() error {
		hbs, err := e.svc.Store().Heartbeats(ctx, "alpha")
		if err != nil {
			return err
		}
		for _, hb := range hbs {
			if hb.Heartbeat.Member == "tm1" && hb.Heartbeat.Epoch == m.Epoch {
				return nil
			}
		}
		return fmt.Errorf("no heartbeat of tm1 epoch %d", m.Epoch)
	})
	agent.kill(t)
	if code := sc.exitCode(t, 10*time.Second); code != 0 {
		t.Fatalf("sidecar exit %d; log:\n%s", code, sc.output())
	}
}

// TestLead_Adopt: a lead sidecar with --adopt attaches to the lead session
// the team already has (no new lead epoch); another session exits 3.
func TestLead_Adopt(t *testing.T) {
	e := newEnv(t)
	e.createTeam("alpha", fastPolicy(), "tm1")
	ctx := context.Background()
	rep, err := e.svc.Resume(ctx, "alpha", "L1", false, true)
	if err != nil {
		t.Fatal(err)
	}
	agent := e.agent("lead-agent")
	other := e.start("lead-other", "lead", "--team", "alpha", "--session", "L2", "--pid", fmt.Sprint(agent.Pid()), "--adopt")
	if code := other.exitCode(t, 10*time.Second); code != teambus.ExitConflict {
		t.Fatalf("adopt with another session: exit %d, want %d; log:\n%s", code, teambus.ExitConflict, other.output())
	}
	sc := e.start("lead-sidecar", "lead", "--team", "alpha", "--session", "L1", "--pid", fmt.Sprint(agent.Pid()), "--adopt")
	e.waitLeadBeats("alpha", 2)
	tm, _, err := e.svc.Store().Team(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if tm.LeadEpoch != rep.LeadEpoch || tm.LeadSession != "L1" {
		t.Fatalf("after adopt: lead epoch %d session %q, want %d L1", tm.LeadEpoch, tm.LeadSession, rep.LeadEpoch)
	}
	agent.kill(t)
	if code := sc.exitCode(t, 10*time.Second); code != 0 {
		t.Fatalf("lead sidecar exit %d; log:\n%s", code, sc.output())
	}
}
