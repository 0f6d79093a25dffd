package team_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// TestService_Claim_OneTaskPerMember races one member's claims of
// different tasks (by id and by `task next`): whatever the interleaving,
// the member holds at most one task (issue 12 item 6).
func TestService_Claim_OneTaskPerMember(t *testing.T) {
	f := newFixture(t, team.Config{})
	f.create(t, "one", "L", testPolicy(), "tm1")
	tm1 := actorOf("one", "tm1")
	const rounds, claimers = 50, 4
	twice := 0
	for r := 0; r < rounds; r++ {
		ctx := testCtx(t)
		var ids []string
		for i := 0; i < claimers; i++ {
			id := fmt.Sprintf("r%02d-%d", r, i)
			f.addTask(t, "one", id, 0)
			ids = append(ids, id)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, claimers+1)
		for i, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = f.svc.Claim(ctx, tm1, id)
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[claimers] = f.svc.Next(ctx, tm1)
		}()
		close(start)
		wg.Wait()
		snap, err := f.svc.Store().Snapshot(ctx, "one")
		if err != nil {
			t.Fatal(err)
		}
		held := snap.MemberTasks("tm1")
		if len(held) > 1 {
			twice++
			var names []string
			for _, tk := range held {
				names = append(names, tk.ID)
			}
			t.Errorf("round %d: tm1 holds %d tasks: %s (errors %v)", r, len(held), strings.Join(names, ", "), errs)
		}
		if len(held) == 0 {
			t.Fatalf("round %d: no claim won: %v", r, errs)
		}
		for _, err := range errs {
			if err != nil && teambus.ExitCode(err) == teambus.ExitTransient {
				t.Fatalf("round %d: a losing claim failed as transient: %v", r, err)
			}
		}
		for _, tk := range held {
			if _, _, err := f.svc.Complete(ctx, tm1, tk.ID, ""); err != nil {
				t.Fatal(err)
			}
		}
		// The tasks nobody won go away with their round.
		for _, id := range ids {
			if tk := f.task(t, "one", id); tk.Status == teambus.TaskAvailable {
				if _, err := f.svc.Claim(ctx, tm1, id); err != nil {
					t.Fatal(err)
				}
				if _, _, err := f.svc.Complete(ctx, tm1, id, ""); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	t.Logf("rounds with two tasks held: %d of %d", twice, rounds)
}

// TestService_Claim_OwnTaskIdempotent: claiming the task one already holds
// succeeds and changes nothing (issue 12 item 15).
func TestService_Claim_OwnTaskIdempotent(t *testing.T) {
	f := newFixture(t, team.Config{})
	f.create(t, "idem", "L", testPolicy(), "tm1", "tm2")
	ctx := testCtx(t)
	f.addTask(t, "idem", "a", 0)
	tm1 := actorOf("idem", "tm1")
	first, err := f.svc.Claim(ctx, tm1, "a")
	if err != nil {
		t.Fatal(err)
	}
	again, err := f.svc.Claim(ctx, tm1, "a")
	if err != nil {
		t.Fatalf("second claim of own task = %v (exit %d), want success (exit 0)", err, teambus.ExitCode(err))
	}
	if again.Attempts != first.Attempts || again.AssignedTo != "tm1" {
		t.Fatalf("second claim changed the task: %+v, was %+v", again, first)
	}
	if _, err := f.svc.Claim(ctx, actorOf("idem", "tm2"), "a"); !errors.Is(err, teambus.ErrConflict) {
		t.Fatalf("claim of another's task = %v, want a conflict", err)
	}
}

// TestService_MissingSession: once a member has registered a session, a
// command without one is bad input (exit 2, "missing --session"), not a
// replaced incarnation (exit 3); a member that never registered works
// without one (issue 12 item 15).
func TestService_MissingSession(t *testing.T) {
	f := newFixture(t, team.Config{})
	ctx := testCtx(t)
	if _, err := f.svc.CreateTeam(ctx, "sess", "L", []team.MemberSpec{{ID: "tm1"}, {ID: "tm2"}}, testPolicy()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Join(ctx, "sess", "tm1", "s-tm1"); err != nil {
		t.Fatal(err)
	}
	f.addTask(t, "sess", "a", 0)
	f.addTask(t, "sess", "b", 0)
	bare := team.Actor{Team: "sess", Member: "tm1"}
	checks := map[string]error{}
	_, checks["claim"] = f.svc.Claim(ctx, bare, "a")
	_, checks["send"] = f.svc.Send(ctx, teamapi.SendRequest{Actor: bare, Body: "hi"})
	_, checks["inbox"] = f.svc.Inbox(ctx, bare, mailbox.InboxOptions{})
	for verb, err := range checks {
		if teambus.ExitCode(err) != teambus.ExitPermanent || !strings.Contains(fmt.Sprint(err), "missing --session (TEAMBUS_SESSION)") {
			t.Errorf("%s without a session = %v (exit %d), want exit 2 missing --session", verb, err, teambus.ExitCode(err))
		}
	}
	if _, err := f.svc.Claim(ctx, team.Actor{Team: "sess", Member: "tm1", Session: "other"}, "a"); teambus.ExitCode(err) != teambus.ExitConflict {
		t.Errorf("claim from another session = %v, want exit 3", err)
	}
	if _, err := f.svc.Claim(ctx, team.Actor{Team: "sess", Member: "tm2"}, "b"); err != nil {
		t.Errorf("claim by a never-registered member without a session = %v, want success", err)
	}
}
