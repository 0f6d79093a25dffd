package mcpserver

import (
	"strings"
	"testing"
)

// team_status says each thing once: an offline member is "offline" once,
// with why, not "offline … offline".
func TestTeamStatusText_SaysEachThingOnce(t *testing.T) {
	out := TeamStatusOut{Team: "alpha", Status: "active", Progress: 33, LeadOnline: true, Members: []MemberStatusOut{
		{ID: "tm1", Status: "in_progress", Condition: "online", Epoch: 2, Task: "wheels"},
		{ID: "tm2", Status: "offline", Condition: "offline", Epoch: 1, Task: "engine"},
		{ID: "tm3", Status: "zombie", Condition: "zombie", Epoch: 1},
		{ID: "tm4", Status: "crashed", Condition: "crashed", Epoch: 3},
	}}
	got := teamStatusText(out, 3)
	want := "team alpha: active\n" +
		"tm1: in_progress, online, epoch 2, task wheels\n" +
		"tm2: offline (no heartbeat), epoch 1, task engine\n" +
		"tm3: zombie, epoch 1, no task\n" +
		"tm4: crashed, epoch 3, no task\n" +
		"tasks 3, 33% done; lead online"
	if got != want {
		t.Fatalf("team_status text:\n%s\nwant:\n%s", got, want)
	}
	for _, line := range strings.Split(got, "\n") {
		for _, w := range []string{"offline", "online", "zombie", "crashed"} {
			if strings.Count(line, w) > 1 {
				t.Errorf("%q says %q twice", line, w)
			}
		}
	}
	out.LeadOnline = false
	if got := teamStatusText(out, 3); !strings.HasSuffix(got, "lead offline") {
		t.Errorf("lead offline: %q", got)
	}
}

// team_probe's text says each member's state once and what a resume by a
// new session meets.
func TestReportText_SaysEachThingOnce(t *testing.T) {
	r := ReportOut{Team: "alpha", Status: "active", Decision: "lead_live", Progress: 50, LeadSession: "L1", LeadEpoch: 2,
		Why: "team alpha has a live lead (session L1, epoch 2, last heartbeat 1s ago): another session resumes once that lead stops",
		Members: []MemberStateOut{{ID: "tm1", State: "online", Status: "in_progress", Epoch: 1, Task: "wheels"},
			{ID: "tm2", State: "offline", Status: "offline", Epoch: 1, Task: "engine"}}}
	got := reportText(r)
	want := "team alpha: active, decision lead_live, 50% done, lead L1 epoch 2\n" +
		"resume by a new lead session: team alpha has a live lead (session L1, epoch 2, last heartbeat 1s ago): another session resumes once that lead stops\n" +
		"tm1: online (in_progress), epoch 1, task wheels\n" +
		"tm2: offline, epoch 1, task engine"
	if got != want {
		t.Fatalf("report text:\n%s\nwant:\n%s", got, want)
	}
}
