package ui_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/ui"
)

// The live view says each thing once and truly: an offline member is
// "offline" once (not "offline (offline)"), and a lead that beat a moment
// ago and then stopped cleanly shows when it was last seen and that it
// released the team — not "heartbeat never".
func TestBrowser_LeadAndOfflineWords(t *testing.T) {
	b := newBrowser(t)
	f := newFixture(t, ui.Config{})
	ctx := testCtx(t)
	if _, err := f.svc.Resume(ctx, teamID, "L", false, true); err != nil {
		t.Fatalf("attach the lead: %v", err)
	}
	// The lead beats, then stops cleanly: its heartbeat key is deleted and
	// it releases the team, as the lead sidecar does on SIGTERM.
	if _, err := f.svc.UpdateTeam(ctx, teamID, func(tm *teambus.Team) (bool, error) {
		tm.LeadLastSeen = teambus.TimePtr(f.svc.Now())
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	rev, err := f.svc.Store().Beat(ctx, teamID, kv.LeadKey, &kv.Heartbeat{Member: teambus.Lead, Session: "L", Epoch: 1}, time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Store().StopBeatAt(ctx, teamID, kv.LeadKey, rev); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.UpdateTeam(ctx, teamID, func(tm *teambus.Team) (bool, error) {
		return tm.ReleaseLead("L", 1, f.svc.Now(), teambus.LeadStopped), nil
	}); err != nil {
		t.Fatal(err)
	}
	// tm1 registered and took a task, and has no heartbeat: offline.
	if _, err := f.svc.Join(ctx, teamID, "tm1", "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Claim(ctx, team.Actor{Team: teamID, Member: "tm1", Session: "s1"}, "t4"); err != nil {
		t.Fatal(err)
	}

	tab := b.tab(t, true)
	if err := chromedp.Do(tab, chromedp.Navigate(f.srv.URL(f.http.URL, teamID))); err != nil {
		t.Fatalf("navigate: %v", err)
	}
	waitDOM(t, tab, "members", liveBound, `document.querySelector('#members tr[data-member="tm1"]') !== null && document.getElementById('team-facts').innerText.includes('lead')`)
	row := eval[string](t, tab, `document.querySelector('#members tr[data-member="tm1"]').innerText`)
	if n := strings.Count(row, "offline"); n != 1 || strings.Contains(row, "no heartbeat") {
		t.Errorf("tm1's row says offline %d times (want once, without 'no heartbeat' beside it): %q", n, row)
	}
	leadRow := eval[string](t, tab, `document.querySelector('#members tr[data-member="lead"]').innerText`)
	facts := eval[string](t, tab, `document.getElementById('team-facts').innerText`)
	for _, s := range []string{leadRow, facts} {
		if strings.Contains(s, "never") || !strings.Contains(s, "released") {
			t.Errorf("the lead that beat and released the team a moment ago: %q; want it released, last seen, not 'never'", s)
		}
	}
	if !strings.Contains(facts, "last seen") || !strings.Contains(facts, "s ago") {
		t.Errorf("lead facts: %q, want when it was last seen", facts)
	}
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}
