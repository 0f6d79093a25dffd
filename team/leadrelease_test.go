package team_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/team"
)

// slowTakeover is testPolicy with a takeover-after no test waits for and a
// lead-timeout no loaded machine outlasts between a beat and a resume.
func slowTakeover() teambus.Policy {
	p := testPolicy()
	p.LeadTimeout, p.ZombieMax, p.TakeoverAfter = time.Minute, 2*time.Minute, time.Hour
	return p
}

// A lead that beats is live: another session's resume refuses (exit 1,
// "live lead") and probe says lead_live, not resumable. Once the lead
// released the team, probe says resumable and the resume takes over
// without force, clearing the release. A lead whose heartbeat is gone
// without a release is not called live, and probe says when takeover
// becomes possible.
func TestResume_ReleasedLeadTakenOverAtOnce(t *testing.T) {
	f := newFixture(t, team.Config{})
	ctx := testCtx(t)
	f.create(t, "rl", "L1", slowTakeover(), "tm1")
	if _, err := f.svc.Resume(ctx, "rl", "L1", false, true); err != nil {
		t.Fatal(err)
	}
	// The lead beats: lead_last_seen moves on and its heartbeat is fresh.
	if _, err := f.svc.UpdateTeam(ctx, "rl", func(tm *teambus.Team) (bool, error) {
		tm.LeadLastSeen = teambus.TimePtr(f.svc.Now())
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	rev, err := f.svc.Store().Beat(ctx, "rl", kv.LeadKey, &kv.Heartbeat{Member: teambus.Lead, Session: "L1", Epoch: 1}, time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	probeAndResume := func(wantDecision string) (*team.Report, error) {
		t.Helper()
		p, err := f.svc.Probe(ctx, "rl")
		if err != nil {
			t.Fatal(err)
		}
		if p.Decision != wantDecision || p.Why == "" {
			t.Errorf("probe = %s (%s), want %s with a reason", p.Decision, p.Why, wantDecision)
		}
		r, err := f.svc.Resume(ctx, "rl", "L2", false, false)
		// What probe said is what resume did.
		if (p.Decision == team.DecisionResumable) != (err == nil) {
			t.Errorf("probe said %s (%s) but resume returned %v", p.Decision, p.Why, err)
		}
		return r, err
	}

	_, err = probeAndResume(team.DecisionLeadLive)
	var held *team.LeadHeldError
	if !errors.As(err, &held) || !held.Live || teambus.ExitCode(err) != teambus.ExitTransient || !strings.Contains(err.Error(), "has a live lead") || !strings.Contains(err.Error(), "force the resume") || strings.Contains(err.Error(), "--force") {
		t.Fatalf("resume past a live lead = %v (exit %d), want a live-lead refusal, exit 1", err, teambus.ExitCode(err))
	}

	// Its heartbeat goes (deleted at a stop) without a release: not live,
	// but held until takeover-after.
	if err := f.svc.Store().StopBeatAt(ctx, "rl", kv.LeadKey, rev); err != nil {
		t.Fatal(err)
	}
	_, err = probeAndResume(team.DecisionWait)
	if !errors.As(err, &held) || held.Live || strings.Contains(err.Error(), "live lead") || !strings.Contains(err.Error(), "takeover becomes possible at") {
		t.Fatalf("resume past a silent lead = %v, want a refusal saying when, not 'live'", err)
	}
	if p, _ := f.svc.Probe(ctx, "rl"); p.ResumableAt == nil || time.Until(*p.ResumableAt) < 50*time.Minute {
		t.Errorf("probe of a silent lead: resumable_at %v, want about takeover-after from its last beat", p.ResumableAt)
	}
	// The view still says when the lead was last seen: the record keeps
	// its last beat when the heartbeat key is gone.
	if v, err := f.svc.Show(ctx, "rl"); err != nil || v.Lead.Online || v.Lead.LastHeartbeat == nil {
		t.Errorf("lead view after its heartbeat went = %+v, %v; want offline with its last beat", v.Lead, err)
	}

	// The lead releases the team (its sidecar stopped cleanly).
	if _, err := f.svc.UpdateTeam(ctx, "rl", func(tm *teambus.Team) (bool, error) {
		return tm.ReleaseLead("L1", 1, f.svc.Now(), teambus.LeadStopped), nil
	}); err != nil {
		t.Fatal(err)
	}
	if v, err := f.svc.Show(ctx, "rl"); err != nil || v.Lead.ReleasedAt == nil || v.Lead.Released != teambus.LeadStopped {
		t.Errorf("lead view after the release = %+v, %v", v.Lead, err)
	}
	r, err := probeAndResume(team.DecisionResumable)
	if err != nil || r.Decision != team.DecisionTakeover || r.LeadEpoch != 2 || r.OldLead != "L1" {
		t.Fatalf("resume after the release = %+v, %v; want takeover at epoch 2 without force", r, err)
	}
	tm, _, err := f.svc.Store().Team(ctx, "rl")
	if err != nil || tm.LeadReleasedAt != nil || tm.LeadReleased != "" || tm.LeadSession != "L2" {
		t.Fatalf("team after the takeover = %+v, %v; want the release cleared", tm, err)
	}
	// A release by the replaced lead changes nothing now.
	if _, err := f.svc.UpdateTeam(ctx, "rl", func(tm *teambus.Team) (bool, error) {
		return tm.ReleaseLead("L1", 1, f.svc.Now(), teambus.LeadStopped), nil
	}); err != nil {
		t.Fatal(err)
	}
	if tm, _, _ := f.svc.Store().Team(ctx, "rl"); tm.LeadReleasedAt != nil {
		t.Fatal("a fenced lead released its successor")
	}
}

// A lead attached by `team resume` alone (no sidecar beats for it) is not
// called live once lead-timeout has passed, nor said to have a sidecar
// that was killed: it attached and never beat. Probe says wait, with when.
func TestResume_AttachedNeverBeat(t *testing.T) {
	var skew atomic.Int64
	f := newFixture(t, team.Config{Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }})
	ctx := testCtx(t)
	f.create(t, "nb", "L1", slowTakeover(), "tm1")
	if _, err := f.svc.Resume(ctx, "nb", "L1", false, true); err != nil {
		t.Fatal(err)
	}
	skew.Store(int64(2 * time.Minute)) // past lead-timeout, far inside takeover-after
	p, err := f.svc.Probe(ctx, "nb")
	if err != nil || p.Decision != team.DecisionWait || p.ResumableAt == nil || !strings.Contains(p.Why, "has not beaten since") || strings.Contains(p.Why, "killed") {
		t.Fatalf("probe = %+v, %v; want wait, saying it never beat", p, err)
	}
	_, err = f.svc.Resume(ctx, "nb", "L2", false, false)
	var held *team.LeadHeldError
	if !errors.As(err, &held) || held.Live || !held.NeverBeat || strings.Contains(err.Error(), "live lead") {
		t.Fatalf("resume past a lead that never beat = %v, want a refusal not calling it live", err)
	}
}
