package team_test

import (
	"testing"
	"time"

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

// Issue 12 item 10: the lead session named at create is the first lead:
// another session may not attach without force; probe and resume agree
// that a pending team is not resumable.
func TestResume_LeadSessionFromCreate(t *testing.T) {
	f := newFixture(t, team.Config{})
	ctx := testCtx(t)
	f.create(t, "ls", "L", testPolicy(), "tm1")
	p, err := f.svc.Probe(ctx, "ls")
	if err != nil || p.Decision != team.DecisionPending {
		t.Fatalf("probe of a pending team = %+v, %v; want decision pending", p, err)
	}
	if _, err := f.svc.Resume(ctx, "ls", "L", false, false); teambus.ExitCode(err) != 2 {
		t.Errorf("team resume of a pending team = %v, want exit 2", err)
	}
	if _, err := f.svc.Resume(ctx, "ls", "X", false, true); teambus.ExitCode(err) != 2 {
		t.Errorf("another session as the first lead = %v, want exit 2", err)
	}
	tm, _, err := f.svc.Store().Team(ctx, "ls")
	if err != nil || tm.LeadSession != "L" || tm.LeadEpoch != 0 || tm.Status != teambus.TeamPending {
		t.Fatalf("refused attach changed the team: %+v, %v", tm, err)
	}
	r, err := f.svc.Resume(ctx, "ls", "L", false, true)
	if err != nil || r.Decision != team.DecisionAttach || r.LeadEpoch != 1 {
		t.Fatalf("the named lead attaches = %+v, %v", r, err)
	}
	// Attached a moment ago: another session's resume would refuse, and
	// probe says so.
	if p, err := f.svc.Probe(ctx, "ls"); err != nil || p.Decision != team.DecisionLeadLive {
		t.Errorf("probe of an active team with a fresh lead = %+v, %v; want lead_live", p, err)
	}
}

// A `team resume` by the lead's own session in the moment between the lead
// sidecar's attach and its first heartbeat changes nothing (it used to
// reattach and fence the sidecar just started); once that lead has beaten
// and stopped cleanly (heartbeat deleted), the session reattaches.
func TestResume_OwnSessionBeforeFirstHeartbeat(t *testing.T) {
	f := newFixture(t, team.Config{})
	ctx := testCtx(t)
	f.create(t, "early", "L", testPolicy(), "tm1")
	if r, err := f.svc.Resume(ctx, "early", "L", false, true); err != nil || r.LeadEpoch != 1 {
		t.Fatalf("lead attach = %+v, %v", r, err)
	}
	r, err := f.svc.Resume(ctx, "early", "L", false, false)
	if err != nil {
		t.Fatal(err)
	}
	if r.Decision != team.DecisionAlreadyLead || r.LeadEpoch != 1 {
		t.Fatalf("resume before the first heartbeat = %s at epoch %d, want %s at epoch 1", r.Decision, r.LeadEpoch, team.DecisionAlreadyLead)
	}
	// The lead beats (lead_last_seen moves on), then stops cleanly.
	if _, err := f.svc.UpdateTeam(ctx, "early", func(tm *teambus.Team) (bool, error) {
		tm.LeadLastSeen = teambus.TimePtr(tm.LeadLastSeen.Add(time.Second))
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	hb := &kv.Heartbeat{Member: teambus.Lead, Session: "L", Epoch: 1}
	rev, err := f.svc.Store().Beat(ctx, "early", kv.LeadKey, hb, testPolicy().LeadTimeout, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Store().StopBeatAt(ctx, "early", kv.LeadKey, rev); err != nil {
		t.Fatal(err)
	}
	if r, err = f.svc.Resume(ctx, "early", "L", false, false); err != nil || r.Decision != team.DecisionReattach || r.LeadEpoch != 2 {
		t.Fatalf("resume after a clean stop = %+v, %v; want reattach at epoch 2", r, err)
	}
}
