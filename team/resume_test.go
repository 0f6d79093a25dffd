package team_test

import (
	"testing"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/team"
)

// beatLead writes the lead heartbeat of session at epoch, as the lead
// sidecar does.
func (f *fixture) beatLead(t testing.TB, teamID, session string, epoch int64, status teambus.MemberStatus) {
	t.Helper()
	hb := &kv.Heartbeat{Member: teambus.Lead, Session: session, Epoch: epoch, Status: status}
	if _, err := f.svc.Store().Beat(testCtx(t), teamID, kv.LeadKey, hb, testPolicy().LeadTimeout, 0); err != nil {
		t.Fatal(err)
	}
}

// Issue 12 item 9: `team resume --session S` by the running lead's own
// session changes nothing.
func TestResume_OwnSessionOfRunningLead(t *testing.T) {
	f := newFixture(t, team.Config{})
	ctx := testCtx(t)
	f.create(t, "own", "L", testPolicy(), "tm1")
	r, err := f.svc.Resume(ctx, "own", "L", false, true)
	if err != nil || r.LeadEpoch != 1 {
		t.Fatalf("lead attach = %+v, %v", r, err)
	}
	f.beatLead(t, "own", "L", 1, "")
	r, err = f.svc.Resume(ctx, "own", "L", false, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.Decision, team.DecisionAlreadyLead; got != want {
		t.Errorf("decision %q, want %q", got, want)
	}
	tm, _, err := f.svc.Store().Team(ctx, "own")
	if err != nil {
		t.Fatal(err)
	}
	if tm.LeadEpoch != 1 || tm.LeadSession != "L" {
		t.Errorf("team lead = %s epoch %d, want L epoch 1 unchanged", tm.LeadSession, tm.LeadEpoch)
	}
	// A lead that stopped cleanly (heartbeat marked offline) may be
	// resumed by its session: the epoch goes up.
	f.beatLead(t, "own", "L", 1, teambus.MemberOffline)
	r, err = f.svc.Resume(ctx, "own", "L", false, false)
	if err != nil || r.Decision != team.DecisionReattach || r.LeadEpoch != 2 {
		t.Errorf("resume after a clean stop = %+v, %v; want reattach at epoch 2", r, err)
	}
}
