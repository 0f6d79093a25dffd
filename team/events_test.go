package team_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus/bustest"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/lead"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
	"github.com/teambus/teambus/teammate"
)

func evSvc(t *testing.T) *team.Service {
	t.Helper()
	n := nodetest.NewBareServer(t)
	c := nodetest.Connect(t, n)
	return team.New(c.JS, team.Config{})
}

func evPolicy() teambus.Policy {
	p := teambus.DefaultPolicy()
	p.Heartbeat = 200 * time.Millisecond
	p.CheckpointEvery = time.Second
	return p
}

func evCreate(t *testing.T, svc *team.Service, id, leadSession string, members ...string) {
	t.Helper()
	var specs []team.MemberSpec
	for _, m := range members {
		specs = append(specs, team.MemberSpec{ID: m})
	}
	if _, err := svc.CreateTeam(testCtx(t), id, leadSession, specs, evPolicy()); err != nil {
		t.Fatal(err)
	}
}

// evTypes replays the team session's events as "type(agent)".
func evTypes(t *testing.T, svc *team.Service, teamID string) []string {
	t.Helper()
	var out []string
	err := svc.Events(teamID).Replay(testCtx(t), eventlog.EventFilter{SID: team.SessionID(teamID)}, func(r *eventlog.EventRecord) error {
		s := r.Event.Type
		if r.Event.Agent != "" {
			s += "(" + r.Event.Agent + ")"
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func statuses(tasks map[string]eventlog.TaskState) string {
	var parts []string
	for id, st := range tasks {
		parts = append(parts, id+"="+st.Status)
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// teambus logs what it does in the team session, and the analysis reads
// the team's state back from it.
func TestService_Events_TeamStory(t *testing.T) {
	t.Parallel()
	svc := evSvc(t)
	ctx := testCtx(t)
	evCreate(t, svc, "ev", "L1", "tm1", "tm2")
	tm1 := team.Actor{Team: "ev", Member: "tm1", Session: "s1"}
	tm2 := team.Actor{Team: "ev", Member: "tm2", Session: "s2"}
	must[*teambus.Member](t)(svc.Join(ctx, "ev", "tm1", "s1"))
	m2 := must[*teambus.Member](t)(svc.Join(ctx, "ev", "tm2", "s2"))
	must[*teambus.Task](t)(svc.AddTask(ctx, "ev", team.TaskSpec{ID: "a", Description: "schema"}))
	must[*teambus.Task](t)(svc.AddTask(ctx, "ev", team.TaskSpec{ID: "b", Deps: []string{"a"}}))
	must[*team.Report](t)(svc.Resume(ctx, "ev", "L1", false, true))
	must[*teambus.Task](t)(svc.Claim(ctx, tm1, "a"))
	must[*teambus.Task](t)(svc.Checkpoint(ctx, teamapi.CheckpointRequest{Actor: tm1, LastAction: "tables"}))
	if _, _, err := svc.Complete(ctx, tm1, "a", "abc123"); err != nil {
		t.Fatal(err)
	}
	must[*teambus.Task](t)(svc.Claim(ctx, tm2, "b"))
	res, err := svc.MarkCrashed(ctx, "ev", "tm2", m2.Epoch, "pid exited")
	if err != nil || !res.Counted {
		t.Fatalf("mark crashed: %+v, %v", res, err)
	}
	// Reported again (the lead re-checks): no second event.
	if _, err := svc.MarkCrashed(ctx, "ev", "tm2", m2.Epoch, "pid exited"); err != nil {
		t.Fatal(err)
	}
	must[*teambus.Team](t)(svc.CheckpointTeam(ctx, "ev", "wave-1-complete"))
	must[*teambus.Member](t)(svc.Join(ctx, "ev", "tm2", "s2b"))
	tm2.Session = "s2b"
	must[*teambus.Task](t)(svc.Claim(ctx, tm2, "b"))
	must[*teambus.Task](t)(svc.Fail(ctx, tm2, "b", "tests red"))

	want := []string{
		"session.start", "agent.spawned(tm1)", "agent.spawned(tm2)", "task.added", "task.added", "lead.attached(lead)",
		"task.claimed(tm1)", "task.checkpoint(tm1)", "task.completed(tm1)", "task.unblocked", "task.claimed(tm2)",
		"agent.crashed(tm2)", "task.requeued", "checkpoint", "agent.spawned(tm2)", "task.claimed(tm2)", "task.failed(tm2)",
	}
	if got := evTypes(t, svc, "ev"); !reflect.DeepEqual(got, want) {
		t.Fatalf("team session events:\n got %v\nwant %v", got, want)
	}

	a, err := svc.Events("ev").Analyze(ctx, eventlog.AnalyzeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Analyzed == nil || *a.Analyzed != team.SessionID("ev") || len(a.Gaps) != 0 {
		t.Fatalf("analyzed %v, gaps %v", a.Analyzed, a.Gaps)
	}
	if a.Decision != eventlog.DecisionNeedsDecision || len(a.Issues) != 1 || a.Issues[0].Type != eventlog.EvTaskFailed {
		t.Errorf("decision %s, issues %+v", a.Decision, a.Issues)
	}
	if got := statuses(a.Tasks); got != "a=COMPLETE b=FAILED" {
		t.Errorf("tasks = %s", got)
	}
	if !reflect.DeepEqual(a.ActiveAgents, []string{"tm1", "tm2"}) {
		t.Errorf("active agents = %v", a.ActiveAgents)
	}

	// Completing the team ends its session: nothing to resume.
	must[*teambus.Team](t)(svc.Transition(ctx, "ev", teambus.TeamComplete, ""))
	a, err = svc.Events("ev").Analyze(ctx, eventlog.AnalyzeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Decision != eventlog.DecisionClean || !a.Sessions[0].HasEnd {
		t.Errorf("after complete: decision %s, sessions %+v", a.Decision, a.Sessions)
	}
}

// Each sidecar run is a session: session.start at attach or registration,
// session.end when it stops on its own. A run that never ends (kill -9)
// is what the analysis finds interrupted.
func TestSidecars_EventSessions(t *testing.T) {
	t.Parallel()
	svc := evSvc(t)
	evCreate(t, svc, "sc", "", "tm1")

	ctx, cancel := context.WithCancel(testCtx(t))
	leadDone := make(chan error, 1)
	ls, err := lead.New(svc.SidecarAPI(), lead.Config{Team: "sc", Session: "L1"})
	if err != nil {
		t.Fatal(err)
	}
	go func() { leadDone <- ls.Run(ctx) }()
	ts, err := teammate.New(svc.SidecarAPI(), teammate.Config{Team: "sc", Member: "tm1", Session: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	tmDone := make(chan error, 1)
	go func() { _, err := ts.Run(ctx); tmDone <- err }()

	sessions := func() map[string]eventlog.SessionSummary {
		a, err := svc.Events("sc").Analyze(testCtx(t), eventlog.AnalyzeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]eventlog.SessionSummary{}
		for _, s := range a.Sessions {
			out[s.SID] = s
		}
		return out
	}
	leadSID, tmSID := team.SidecarSessionID("sc", teambus.Lead, 1), team.SidecarSessionID("sc", "tm1", 1)
	bustest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		s := sessions()
		if !s[leadSID].HasStart || !s[tmSID].HasStart {
			return fmt.Errorf("sidecar sessions not started: %v", s)
		}
		return nil
	})
	cancel()
	for _, ch := range []chan error{leadDone, tmDone} {
		select {
		case err := <-ch:
			if err != nil {
				t.Fatalf("sidecar returned %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("sidecar did not stop")
		}
	}
	s := sessions()
	for _, sid := range []string{leadSID, tmSID} {
		if !s[sid].HasEnd || s[sid].Interrupted || s[sid].Gaps != 0 {
			t.Errorf("session %s after a clean stop: %+v", sid, s[sid])
		}
	}
	// A run that dies without stopping leaves its session open.
	svc.StartSession(testCtx(t), "sc", "tm1", 9, map[string]any{"command": "teammate"})
	a, err := svc.Events("sc").Analyze(testCtx(t), eventlog.AnalyzeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Interrupted == nil || *a.Interrupted != team.SidecarSessionID("sc", "tm1", 9) {
		t.Errorf("interrupted = %v, want the run without session.end", a.Interrupted)
	}
	if !contains(a.InterruptedSessions, team.SessionID("sc")) || contains(a.InterruptedSessions, leadSID) {
		t.Errorf("interrupted sessions = %v", a.InterruptedSessions)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestCheckpointTeam_Export(t *testing.T) {
	t.Parallel()
	svc := evSvc(t)
	ctx := testCtx(t)
	evCreate(t, svc, "cp", "L1", "tm1", "tm2")
	must[*teambus.Task](t)(svc.AddTask(ctx, "cp", team.TaskSpec{ID: "b"}))
	must[*teambus.Task](t)(svc.AddTask(ctx, "cp", team.TaskSpec{ID: "a"}))
	leadActor := team.Actor{Team: "cp", Member: teambus.Lead, Session: "L1"}
	if _, err := svc.Send(ctx, teamapi.SendRequest{Actor: leadActor, To: "tm1", Body: "hello <tm1> & co", ID: "m1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Send(ctx, teamapi.SendRequest{Actor: team.Actor{Team: "cp", Member: "tm1"}, To: teambus.Lead, Body: "hi", Data: []byte(`{"k":1}`), ID: "m2"}); err != nil {
		t.Fatal(err)
	}
	tm := must[*teambus.Team](t)(svc.CheckpointTeam(ctx, "cp", ""))
	if tm.CheckpointSeq != 1 {
		t.Fatalf("checkpoint seq %d, want 1", tm.CheckpointSeq)
	}
	dir := filepath.Join(t.TempDir(), "checkpoint")
	exp := must[*team.Export](t)(svc.ExportCheckpoint(ctx, "cp", dir))
	if exp.Messages != 2 || exp.CheckpointSeq != 1 || len(exp.Files) != 3 {
		t.Errorf("export = %+v", exp)
	}
	state := evRead(t, filepath.Join(dir, team.StateFile))
	for _, want := range []string{`"checkpoint_seq": 1`, `"id": "a"`, `"id": "tm2"`} {
		if !bytes.Contains(state, []byte(want)) {
			t.Errorf("state.json lacks %s:\n%s", want, state)
		}
	}
	if bytes.Index(state, []byte(`"id": "a"`)) > bytes.Index(state, []byte(`"id": "b"`)) {
		t.Errorf("tasks not sorted by id in state.json")
	}
	mail := strings.Split(strings.TrimSpace(string(evRead(t, filepath.Join(dir, team.MailboxFile)))), "\n")
	if len(mail) != 2 || !strings.HasPrefix(mail[0], `{"seq":1,"id":"m1","from":"lead","to":"tm1","type":"info","body":"hello <tm1> & co","data":null,"epoch":0,"ts":"`) ||
		!strings.Contains(mail[1], `"data":{"k":1}`) {
		t.Errorf("mailbox.jsonl:\n%s", strings.Join(mail, "\n"))
	}
	var buf bytes.Buffer
	if _, err := svc.Events("cp").Export(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	events := evRead(t, filepath.Join(dir, team.EventsFile))
	if !bytes.Equal(events, buf.Bytes()) || !bytes.Contains(events, []byte(`"type":"checkpoint"`)) || !bytes.Contains(events, []byte(`"label":"team-checkpoint-1"`)) {
		t.Errorf("events.jsonl:\n%s", events)
	}
	// The same state exports to the same bytes.
	must[*team.Export](t)(svc.ExportCheckpoint(ctx, "cp", dir))
	if again := evRead(t, filepath.Join(dir, team.StateFile)); !bytes.Equal(again, state) {
		t.Errorf("state.json changed without a change of state:\n%s\nwas\n%s", again, state)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("export dir holds %d entries, want the 3 files", len(entries))
	}
}

func evRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.email=t@example.com", "-c", "user.name=t", "-c", "commit.gpgsign=false"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// Seed 000, section 4.1: the lead died mid-consolidation with staged,
// uncommitted files; the resume says so.
func TestResume_ConsolidatingWithUncommittedChanges(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	svc := evSvc(t)
	ctx := testCtx(t)
	wt := t.TempDir()
	git(t, wt, "init", "-q")
	if err := os.WriteFile(filepath.Join(wt, "engine.go"), []byte("package engine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, wt, "add", "engine.go")
	git(t, wt, "commit", "-q", "-m", "engine")
	evCreate(t, svc, "cons", "L1")
	must[*team.Report](t)(svc.Resume(ctx, "cons", "L1", false, true))
	must[*teambus.Team](t)(svc.Transition(ctx, "cons", teambus.TeamConsolidating, wt))

	warned := func(r *team.Report) bool {
		return strings.Contains(strings.Join(r.Warnings, "\n"), "uncommitted change(s) in "+wt)
	}
	if r := must[*team.Report](t)(svc.Probe(ctx, "cons")); warned(r) {
		t.Errorf("clean worktree warned: %v", r.Warnings)
	}
	// git add, then the lead dies before git commit.
	if err := os.WriteFile(filepath.Join(wt, "engine.go"), []byte("package engine\n\nfunc Run() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wt, "schema.sql"), []byte("create table t;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, wt, "add", "engine.go", "schema.sql")
	r := must[*team.Report](t)(svc.Resume(ctx, "cons", "L2", true, false))
	if !warned(r) || !strings.Contains(strings.Join(r.Warnings, "\n"), "engine.go") {
		t.Errorf("resume warnings = %q", r.Warnings)
	}
	if got := team.CheckWorkTree(ctx, filepath.Join(wt, "missing")); len(got) != 1 || !strings.Contains(got[0], "can not be checked") {
		t.Errorf("missing worktree: %q", got)
	}
	// The transitions were logged.
	types := evTypes(t, svc, "cons")
	if !contains(types, eventlog.EvTeamConsolidate) || !contains(types, "lead.takeover(lead)") {
		t.Errorf("team events = %v", types)
	}
}
