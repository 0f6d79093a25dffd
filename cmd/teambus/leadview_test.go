package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/team"
)

// `team show` says of a lead that let the team go when and why, and when
// it was last seen; of a live one, online.
func TestPrintView_LeadReleased(t *testing.T) {
	at := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	seen := at.Add(-time.Second)
	v := &team.View{Team: &teambus.Team{ID: "alpha", Status: teambus.TeamActive, LeadSession: "L1", LeadEpoch: 3},
		Lead: &team.LeadView{Session: "L1", Epoch: 3, LastHeartbeat: &seen, ReleasedAt: &at, Released: teambus.LeadStopped}}
	var w bytes.Buffer
	if err := printView(&w, v); err != nil {
		t.Fatal(err)
	}
	want := "lead: session L1, epoch 3, released the team at 2026-11-28T01:00:00Z (its sidecar stopped cleanly), last seen 2026-11-28T00:59:59Z\n"
	if !strings.Contains(w.String(), want) {
		t.Errorf("team show:\n%s\nwant the line %q", w.String(), want)
	}
	v.Lead = &team.LeadView{Session: "L1", Epoch: 3, Online: true, LastHeartbeat: &seen}
	w.Reset()
	if err := printView(&w, v); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(w.String(), "lead: session L1, epoch 3, online\n") {
		t.Errorf("team show of a live lead:\n%s", w.String())
	}
}
