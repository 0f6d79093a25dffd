package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// TestClaudeSim_LeadAndTeammateCrash takes a team through a teammate
// crash and a lead crash with no manual step: fake Claude sessions run the
// hooks of a settings file; SessionStart registers the members and starts
// their real sidecars; the "claude" processes are killed with SIGKILL.
func TestClaudeSim_LeadAndTeammateCrash(t *testing.T) {
	e := newEnv(t)
	pol := fastPolicy()
	e.createTeam("alpha", pol, "tm1")
	e.addTask("alpha", "t1")
	ctx := context.Background()

	// The lead's session starts: the team becomes active under it.
	lead := e.newSim("lead", simSettingsFile(t, "alpha", "lead"))
	if c := lead.Start("startup"); !strings.Contains(c, "this session is the lead of team alpha") || !strings.Contains(c, "Team alpha is active") {
		t.Fatalf("lead SessionStart:\n%s", c)
	}
	e.waitLeadBeats("alpha", 1)

	// tm1's session starts, is briefed, and its sidecar registers.
	tm1 := e.newSim("tm1", simSettingsFile(t, "alpha", "tm1"))
	if c := tm1.Start("startup"); !strings.Contains(c, "this session is member tm1 of team alpha (epoch 1") {
		t.Fatalf("tm1 SessionStart:\n%s", c)
	}
	e.waitMemberStatus("alpha", "tm1", teambus.MemberIdle, 10*time.Second)
	// The agent works from the Bash tool with the identity SessionStart
	// exported: claim, checkpoint.
	id := tm1.sessionEnv()
	a := team.Actor{Team: id["TEAMBUS_TEAM"], Member: id["TEAMBUS_MEMBER"], Session: id["TEAMBUS_SESSION"]}
	if _, err := e.svc.Claim(ctx, a, "t1"); err != nil {
		t.Fatalf("claim as %+v: %v", a, err)
	}
	if _, err := e.svc.Checkpoint(ctx, teamapi.CheckpointRequest{Actor: a, Done: []string{"lexer"}, Remaining: []string{"parser"}, LastAction: "wrote the lexer"}); err != nil {
		t.Fatal(err)
	}
	// Mail from the lead reaches tm1 after its next tool batch.
	if _, err := e.svc.Send(ctx, teamapi.SendRequest{Actor: team.Actor{Team: "alpha", Member: teambus.Lead, Session: lead.sessionEnv()["TEAMBUS_SESSION"]}, To: "tm1", Body: "use the new grammar"}); err != nil {
		t.Fatal(err)
	}
	tm1.Prompt("go on")
	if !tm1.saw("use the new grammar") {
		t.Fatalf("mail not delivered:\n%s", tm1.dump())
	}

	// Teammate crash: kill -9 of its Claude process.
	tm1.Kill9()
	e.waitFor(10*time.Second, "t1 requeued", func() error {
		if tk := e.task("alpha", "t1"); tk.Status != teambus.TaskAvailable || tk.Checkpoint == nil {
			return fmt.Errorf("t1 %s", tk.Status)
		}
		return nil
	})
	// The lead learns it from its own hooks.
	e.waitFor(10*time.Second, "crash notice in the lead's session", func() error {
		lead.Tools()
		if !lead.saw("tm1 crashed") {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	// A new session for tm1 picks the work up where it stopped.
	tm1b := e.newSim("tm1b", simSettingsFile(t, "alpha", "tm1"))
	c := tm1b.Start("startup")
	for _, want := range []string{"(epoch 2", "An earlier session of tm1 stopped", "TASK t1", "DO NOT re-execute completed work", "Tasks already completed: lexer"} {
		if !strings.Contains(c, want) {
			t.Fatalf("respawn brief lacks %q:\n%s", want, c)
		}
	}
	e.waitMemberStatus("alpha", "tm1", teambus.MemberIdle, 10*time.Second)
	idb := tm1b.sessionEnv()
	if _, err := e.svc.Claim(ctx, team.Actor{Team: "alpha", Member: "tm1", Session: idb["TEAMBUS_SESSION"]}, "t1"); err != nil {
		t.Fatal(err)
	}

	// Lead crash: kill -9 of the lead's Claude process. tm1 is told it
	// works in zombie mode, once.
	lead.Kill9()
	e.waitFor(20*time.Second, "zombie notice in tm1's session", func() error {
		tm1b.Tools()
		if !tm1b.saw("zombie mode") {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	// A new lead session takes over at once: the lead's sidecar saw its
	// Claude process exit and released the team.
	lead2 := e.newSim("lead2", simSettingsFile(t, "alpha", "lead"))
	e.waitFor(20*time.Second, "a new lead session bound", func() error {
		if c := lead2.Start("startup"); !strings.Contains(c, "this session is the lead of team alpha") {
			return fmt.Errorf("%s", c)
		}
		return nil
	})
	if !lead2.saw("takeover") {
		t.Fatalf("new lead summary:\n%s", lead2.dump())
	}
	e.waitFor(20*time.Second, "re-attached notice in tm1's session", func() error {
		tm1b.Tools()
		if !tm1b.saw("a lead re-attached") {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	if n := strings.Count(tm1b.dump(), "zombie mode: keep working"); n != 1 {
		t.Fatalf("zombie notice shown %d times:\n%s", n, tm1b.dump())
	}

	// A clean end: SessionEnd stops the sidecar, which releases the task
	// with its checkpoint and marks the member shut down; no crash.
	tm1b.End("prompt_input_exit")
	e.waitFor(10*time.Second, "tm1 shut down", func() error {
		m, _, err := e.svc.Store().Member(ctx, "alpha", "tm1")
		if err != nil {
			return err
		}
		if m.Status != teambus.MemberShutdown {
			return fmt.Errorf("status %s", m.Status)
		}
		if m.CrashCount != 1 {
			return fmt.Errorf("crash count %d, want 1", m.CrashCount)
		}
		return nil
	})
	if tk := e.task("alpha", "t1"); tk.Status != teambus.TaskAvailable || tk.Checkpoint == nil || tk.Checkpoint.LastAction != "session ended (prompt_input_exit)" {
		t.Fatalf("t1 after a clean end: %s %+v", tk.Status, tk.Checkpoint)
	}
}
