package team_test

import (
	"testing"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// Issue 12 item 12: on a live team, a member's task.checkpoint is a
// checkpoint: the analysis resumes from it, not "no_checkpoint".
func TestService_Events_TaskCheckpointCounts(t *testing.T) {
	t.Parallel()
	svc := evSvc(t)
	ctx := testCtx(t)
	evCreate(t, svc, "live", "L1", "tm1")
	tm1 := team.Actor{Team: "live", Member: "tm1", Session: "s1"}
	must[*teambus.Member](t)(svc.Join(ctx, "live", "tm1", "s1"))
	must[*teambus.Task](t)(svc.AddTask(ctx, "live", team.TaskSpec{ID: "a"}))
	must[*team.Report](t)(svc.Resume(ctx, "live", "L1", false, true))
	must[*teambus.Task](t)(svc.Claim(ctx, tm1, "a"))
	must[*teambus.Task](t)(svc.Checkpoint(ctx, teamapi.CheckpointRequest{Actor: tm1, LastAction: "half way"}))
	a, err := svc.Events("live").Analyze(ctx, eventlog.AnalyzeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := a.Decision, eventlog.DecisionAutoResume; got != want {
		t.Errorf("decision %s, want %s (%v)", got, want, a.Reasons)
	}
	if a.LastCheckpoint == nil || a.LastCheckpoint.Type != eventlog.EvTaskCheckpoint {
		t.Errorf("last checkpoint %+v, want the task.checkpoint", a.LastCheckpoint)
	}
}
