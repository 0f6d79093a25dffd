package faults

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/team"
)

// S9: rounds of 8-way claim races, a fresh task each round: exactly one
// winner, every loser told so with a conflict (exit 3), the task assigned
// to the winner.
func TestS9_ClaimRaces(t *testing.T) {
	t.Parallel() // no timing criterion: runs beside the other parallel scenarios
	rounds := tier(200, 1000)
	const racers = 8
	const perTeam = 20 // a fresh team every 20 rounds keeps snapshots small
	node := nodetest.NewServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var members []team.MemberSpec
	svcs := make([]*team.Service, racers)
	for i := range racers {
		members = append(members, team.MemberSpec{ID: fmt.Sprintf("m%d", i+1)})
		svcs[i] = team.New(nodetest.Connect(t, node).JS, team.Config{})
	}
	start := time.Now()
	wins, losses, doubles := 0, 0, 0
	teamID := ""
	for r := 0; r < rounds; r++ {
		if r%perTeam == 0 {
			teamID = fmt.Sprintf("race%d", r/perTeam)
			if _, err := svcs[0].CreateTeam(ctx, teamID, "", members, teambus.DefaultPolicy()); err != nil {
				t.Fatal(err)
			}
		}
		task := fmt.Sprintf("t%d", r)
		if _, err := svcs[0].AddTask(ctx, teamID, team.TaskSpec{ID: task}); err != nil {
			t.Fatal(err)
		}
		var (
			wg   sync.WaitGroup
			go_  = make(chan struct{})
			errs = make([]error, racers)
		)
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-go_
				_, errs[i] = svcs[i].Claim(ctx, team.Actor{Team: teamID, Member: members[i].ID}, task)
			}()
		}
		close(go_)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					doubles++
					t.Errorf("round %d: %s and %s both won task %s", r, members[winner].ID, members[i].ID, task)
				}
				winner = i
			case errors.Is(err, teambus.ErrConflict) && teambus.ExitCode(err) == teambus.ExitConflict:
				losses++
			default:
				t.Fatalf("round %d: %s failed with %v, want a conflict", r, members[i].ID, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody won task %s", r, task)
		}
		wins++
		got, _, err := svcs[0].Store().Task(ctx, teamID, task)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != teambus.TaskInProgress || got.AssignedTo != members[winner].ID {
			t.Fatalf("round %d: task %s is %s for %q, want in_progress for the winner %s", r, task, got.Status, got.AssignedTo, members[winner].ID)
		}
		// The winner finishes, so every member may race again.
		if _, _, err := svcs[winner].Complete(ctx, team.Actor{Team: teamID, Member: members[winner].ID}, task, ""); err != nil {
			t.Fatal(err)
		}
	}
	result(t, "S9", "%d rounds of %d-way claim races in %s: %d winners, %d conflicts, %d double wins",
		rounds, racers, time.Since(start).Round(time.Second), wins, losses, doubles)
	if doubles != 0 || wins != rounds || losses != rounds*(racers-1) {
		t.Fatalf("double wins %d, wins %d, conflicts %d", doubles, wins, losses)
	}
}
