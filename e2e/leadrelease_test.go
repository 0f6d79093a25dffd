package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/team"
)

// releasePolicy is fastPolicy with a takeover-after no test waits for, and
// a lead-timeout a loaded machine does not outlast between two beats of
// 500ms: only a release lets another session in.
func releasePolicy() teambus.Policy {
	p := fastPolicy()
	p.LeadTimeout, p.TakeoverAfter = 20*time.Second, time.Hour
	return p
}

// probeReport runs `team probe --json` and returns its report.
func (e *env) probeReport(teamID string) *team.Report {
	e.t.Helper()
	out, stderr, code := e.run("team", "probe", teamID, "--json")
	if code != 0 {
		e.t.Fatalf("probe: exit %d: %s", code, stderr)
	}
	var r team.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		e.t.Fatalf("probe --json: %v: %s", err, out)
	}
	return &r
}

// probeThenResume runs `team probe` and `team resume --session S` and
// checks that the probe's word matches the resume's outcome.
func (e *env) probeThenResume(teamID, session string) (*team.Report, string, int) {
	e.t.Helper()
	p := e.probeReport(teamID)
	out, stderr, code := e.run("team", "resume", teamID, "--session", session, "--json")
	if (p.Decision == team.DecisionResumable) != (code == 0) {
		e.t.Errorf("probe said %q (%s), but resume --session %s exited %d: %s", p.Decision, p.Why, session, code, stderr)
	}
	return p, out + stderr, code
}

// A lead whose sidecar stops on SIGTERM releases the team: a new session
// resumes it at once, without --force, far inside takeover-after. While
// the lead beats, another session is refused and probe says why.
func TestLead_SIGTERMReleasesTheTeam(t *testing.T) {
	e := newEnv(t)
	e.createTeam("lr", releasePolicy(), "tm1")
	_, sidecar := e.startLead("lr", "L1")
	e.waitLeadBeats("lr", 1)

	p, text, code := e.probeThenResume("lr", "L2")
	if p.Decision != team.DecisionLeadLive || code != 1 || !strings.Contains(text, "has a live lead") {
		t.Fatalf("a beating lead: probe %q, resume exit %d: %s; want lead_live and exit 1 naming the live lead", p.Decision, code, text)
	}

	if err := sidecar.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if c := sidecar.exitCode(t, 10*time.Second); c != 0 {
		t.Fatalf("lead sidecar exit %d after SIGTERM:\n%s", c, sidecar.output())
	}
	if !strings.Contains(sidecar.output(), "lead released the team") {
		t.Errorf("the sidecar log does not say it released the team:\n%s", sidecar.output())
	}
	tm, _, err := e.svc.Store().Team(context.Background(), "lr")
	if err != nil || tm.LeadReleasedAt == nil || tm.LeadReleased != teambus.LeadStopped {
		t.Fatalf("team after SIGTERM of the lead sidecar = %+v, %v; want released (stopped)", tm, err)
	}
	p, text, code = e.probeThenResume("lr", "L2")
	if p.Decision != team.DecisionResumable || code != 0 || !strings.Contains(text, `"takeover"`) {
		t.Fatalf("after the release: probe %q (%s), resume exit %d: %s; want resumable and a takeover without --force", p.Decision, p.Why, code, text)
	}
}

// A lead sidecar watching its agent's pid releases the team when the agent
// is killed (kill -9): the next lead session attaches at once.
func TestLead_AgentKilledReleasesTheTeam(t *testing.T) {
	e := newEnv(t)
	e.createTeam("lk", releasePolicy(), "tm1")
	agent, sidecar := e.startLead("lk", "L1")
	e.waitLeadBeats("lk", 1)
	agent.kill(t)
	if c := sidecar.exitCode(t, 10*time.Second); c != 0 {
		t.Fatalf("lead sidecar exit %d after its agent was killed:\n%s", c, sidecar.output())
	}
	tm, _, err := e.svc.Store().Team(context.Background(), "lk")
	if err != nil || tm.LeadReleasedAt == nil || tm.LeadReleased != teambus.LeadAgentExited {
		t.Fatalf("team after kill -9 of the lead agent = %+v, %v; want released (agent_exited)", tm, err)
	}
	if p := e.probeReport("lk"); p.Decision != team.DecisionResumable {
		t.Fatalf("probe after the lead agent exited = %q (%s), want resumable", p.Decision, p.Why)
	}
	// The next lead session: a lead sidecar, no --force.
	_, next := e.startLead("lk", "L2")
	e.waitLeadBeats("lk", 1)
	if !strings.Contains(next.output(), "takeover") {
		t.Errorf("second lead's log does not say it took over:\n%s", next.output())
	}
	// And now that one beats, a third session is refused again.
	if _, text, code := e.probeThenResume("lk", "L3"); code != 1 || !strings.Contains(text, "has a live lead (session L2") {
		t.Errorf("resume past the new live lead: exit %d: %s", code, text)
	}
}

// The lead of a Claude session comes back: the hook's refusal of a live
// lead names TEAMBUS_FORCE=1, the switch that works there (and it does);
// a lead session that ends cleanly (SessionEnd stops its sidecar) releases
// the team, and the next `claude` binds as the lead at once, far inside
// takeover-after.
func TestClaudeSim_LeadComesBackAfterCleanExit(t *testing.T) {
	e := newEnv(t)
	e.createTeam("cb", releasePolicy(), "tm1")
	// A lead that beats, started by hand (no hook binding on this host).
	_, manual := e.startLead("cb", "L0")
	e.waitLeadBeats("cb", 1)

	lead := e.newSim("lead", simSettingsFile(t, "cb", "lead"))
	c := lead.Start("startup")
	for _, want := range []string{"not bound as the lead of team cb", "has a live lead (session L0", "TEAMBUS_FORCE=1"} {
		if !strings.Contains(c, want) {
			t.Fatalf("SessionStart past a live lead lacks %q:\n%s", want, c)
		}
	}
	if strings.Contains(c, "--force") {
		t.Errorf("the hook's refusal names --force, which a claude session can not pass:\n%s", c)
	}
	// The switch it names works.
	lead = e.newSim("lead-forced", simSettingsFile(t, "cb", "lead"))
	lead.env = []string{"TEAMBUS_FORCE=1"}
	if c := lead.Start("startup"); !strings.Contains(c, "this session is the lead of team cb") {
		t.Fatalf("SessionStart with TEAMBUS_FORCE=1:\n%s", c)
	}
	if c := manual.exitCode(t, 10*time.Second); c == 0 {
		t.Errorf("the fenced manual lead exited 0:\n%s", manual.output())
	}
	e.waitLeadBeats("cb", 1)

	// Quit Claude cleanly: SessionEnd stops the sidecar, which releases.
	lead.End("prompt_input_exit")
	e.waitFor(10*time.Second, "the lead released the team", func() error {
		tm, _, err := e.svc.Store().Team(context.Background(), "cb")
		if err != nil {
			return err
		}
		if tm.LeadReleasedAt == nil {
			return fmt.Errorf("not released: lead %s epoch %d", tm.LeadSession, tm.LeadEpoch)
		}
		return nil
	})
	lead.Kill9() // the Claude process is gone after its SessionEnd

	// `claude` again: a new session id, bound as the lead without force.
	again := e.newSim("lead-again", simSettingsFile(t, "cb", "lead"))
	if c := again.Start("startup"); !strings.Contains(c, "this session is the lead of team cb") || !strings.Contains(c, "takeover") {
		t.Fatalf("SessionStart after a clean exit of the lead:\n%s", c)
	}
}
