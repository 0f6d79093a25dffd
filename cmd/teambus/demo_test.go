package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus/bustest"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// simTeam starts a node with a team of the given members and tasks and
// returns the node and a service on it.
func simTeam(t *testing.T, leadSession string, members []team.MemberSpec, tasks []team.TaskSpec) (*node.Node, *team.Service) {
	t.Helper()
	n := nodetest.NewServer(t)
	svc := team.New(nodetest.Connect(t, n).JS, team.Config{})
	ctx := t.Context()
	if _, err := svc.CreateTeam(ctx, "sim", leadSession, members, teambus.DefaultPolicy()); err != nil {
		t.Fatal(err)
	}
	for _, spec := range tasks {
		if _, err := svc.AddTask(ctx, "sim", spec); err != nil {
			t.Fatal(err)
		}
	}
	return n, svc
}

func TestAgentSim_WorksTheQueue(t *testing.T) {
	t.Parallel()
	n, svc := simTeam(t, "", []team.MemberSpec{{ID: "tm1", Role: "tests", Quantum: "tests"}}, []team.TaskSpec{
		{ID: "a", Description: "first (2 steps)"},
		{ID: "x", Description: "the specialist's own, created later (3 steps)", Quantum: "tests"},
		{ID: "b", Description: "after a", Deps: []string{"a"}},
	})
	if _, err := svc.Join(t.Context(), "sim", "tm1", "s1"); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "agent-sim", "--dir", n.Dir(), "--team", "sim", "--member", "tm1", "--session", "s1", "--step-time", "1ms", "--steps", "2")
	if r.code != 0 {
		t.Fatalf("agent-sim: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"claimed task x: 3 steps", "claimed task a: 2 steps", "claimed task b: 2 steps", "no task left in team sim"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output does not contain %q:\n%s", want, r.stdout)
		}
	}
	if strings.Index(r.stdout, "claimed task x") > strings.Index(r.stdout, "claimed task a") {
		t.Errorf("the specialist took another task before its own:\n%s", r.stdout)
	}
	snap, err := svc.Store().Snapshot(t.Context(), "sim")
	if err != nil {
		t.Fatal(err)
	}
	for id, steps := range map[string]int{"a": 2, "x": 3, "b": 2} {
		tk := snap.Tasks[id]
		if tk.Status != teambus.TaskComplete || tk.AssignedTo != "tm1" || tk.Commit == "" {
			t.Errorf("task %s: %s by %q commit %q, want complete by tm1 with a commit", id, tk.Status, tk.AssignedTo, tk.Commit)
		}
		if cp := tk.Checkpoint; cp == nil || len(cp.TasksCompleted) != steps || len(cp.TasksRemaining) != 0 || cp.Files[0] != "pkg/"+id+".go" {
			t.Errorf("task %s checkpoint %+v, want %d steps done", id, tk.Checkpoint, steps)
		}
	}
	var reports int
	err = svc.Mailbox("sim").Replay(t.Context(), mailbox.ReplayFilter{To: teambus.Lead, Type: teambus.MsgReport}, func(teambus.Message) error {
		reports++
		return nil
	})
	if err != nil || reports != 3 {
		t.Errorf("reports to the lead: %d (%v), want 3", reports, err)
	}
}

func TestAgentSim_ResumesFromCheckpoint(t *testing.T) {
	t.Parallel()
	n, svc := simTeam(t, "", []team.MemberSpec{{ID: "tm1"}}, []team.TaskSpec{{ID: "r", Description: "resumable (4 steps)"}})
	ctx := t.Context()
	old := team.Actor{Team: "sim", Member: "tm1", Session: "old"}
	if _, err := svc.Join(ctx, "sim", "tm1", "old"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Claim(ctx, old, "r"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Checkpoint(ctx, teamapi.CheckpointRequest{Actor: old, Done: []string{"step 1/4", "step 2/4"}, Remaining: []string{"step 3/4", "step 4/4"}, LastAction: "step 2 of 4 of task r"}); err != nil {
		t.Fatal(err)
	}
	// A new incarnation keeps the task; its agent continues it.
	if _, err := svc.Join(ctx, "sim", "tm1", "new"); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "agent-sim", "--dir", n.Dir(), "--team", "sim", "--member", "tm1", "--session", "new", "--step-time", "1ms")
	if r.code != 0 {
		t.Fatalf("agent-sim: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if want := `resuming task r from checkpoint #1 (by tm1, epoch 1): skipping steps 1-2, already done`; !strings.Contains(r.stdout, want) {
		t.Errorf("output does not contain %q:\n%s", want, r.stdout)
	}
	for _, redo := range []string{"step 1/4 done", "step 2/4 done"} {
		if strings.Contains(r.stdout, redo) {
			t.Errorf("the agent redid %q:\n%s", redo, r.stdout)
		}
	}
	tk, _, err := svc.Store().Task(ctx, "sim", "r")
	if err != nil {
		t.Fatal(err)
	}
	if tk.Status != teambus.TaskComplete || tk.Checkpoint == nil || strings.Join(tk.Checkpoint.TasksCompleted, ",") != "step 1/4,step 2/4,step 3/4,step 4/4" || tk.Checkpoint.Epoch != 2 {
		t.Errorf("task r: %s, checkpoint %+v; want complete with all 4 steps, the last by epoch 2", tk.Status, tk.Checkpoint)
	}
}

func TestAgentSim_WaitsForRegistration(t *testing.T) {
	t.Parallel()
	n, _ := simTeam(t, "", []team.MemberSpec{{ID: "tm1"}}, nil)
	r := runCLI(t, "agent-sim", "--dir", n.Dir(), "--team", "sim", "--member", "tm1", "--session", "s1", "--register-wait", "300ms")
	r.wantError(t, teambus.ExitTransient, "session s1 was not registered for tm1 within 300ms")

	r = runCLI(t, "agent-sim", "--dir", n.Dir(), "--team", "sim", "--member", "tm1", "--session", "s1", "--role", "boss")
	r.wantError(t, teambus.ExitPermanent, `invalid --role "boss"`)
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestAgentSim_Lead(t *testing.T) {
	t.Parallel()
	n, svc := simTeam(t, "L1", []team.MemberSpec{{ID: "tm1"}}, nil)
	ctx := t.Context()
	if _, err := svc.Join(ctx, "sim", "tm1", "s1"); err != nil {
		t.Fatal(err)
	}
	res, err := svc.Send(ctx, teamapi.SendRequest{Actor: team.Actor{Team: "sim", Member: "tm1", Session: "s1"}, Type: teambus.MsgReport, Body: "done with a"})
	if err != nil {
		t.Fatal(err)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stdout, stderr syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- run(runCtx, []string{"teambus", "agent-sim", "--role", "lead", "--dir", n.Dir(), "--team", "sim", "--session", "L1"}, strings.NewReader(""), &stdout, &stderr)
	}()
	bustest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if !strings.Contains(stdout.String(), "from tm1 [report]: done with a") {
			return context.DeadlineExceeded
		}
		return nil
	})
	// It acked what it read: the lead's inbox is empty.
	bustest.CheckFor(t, 5*time.Second, 50*time.Millisecond, func() error {
		ictx, icancel := context.WithTimeout(ctx, 5*time.Second) // Inbox needs a deadline
		defer icancel()
		msgs, err := svc.Inbox(ictx, team.Actor{Team: "sim", Member: teambus.Lead, Session: "L1"}, mailbox.InboxOptions{Max: 10})
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.Seq == res.Seq {
				return context.DeadlineExceeded
			}
		}
		return nil
	})
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Errorf("lead agent-sim: exit %d after stop; stderr %q", c, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("lead agent-sim did not stop")
	}
}

// TestDemo builds the binary and runs `teambus demo` end to end: real
// sidecar and agent processes, a lead killed and replaced, a teammate's
// agent killed and respawned.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo runs real processes for about 15s")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	tmp := t.TempDir()
	exe := filepath.Join(tmp, "teambus")
	build := exec.Command(goTool, "build", "-o", exe, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "demo", "--timeout", "2m")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp) // whatever happens, its directory is the test's
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	out := stdout.String()
	t.Logf("teambus demo took %s:\n%s", time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("teambus demo: %v\nstderr:\n%s", err, stderr.String())
	}
	for _, want := range []string{
		"bus node up at nats://127.0.0.1:",
		"lead sidecar lead-1: lead attached to team demo: attach, lead epoch 1",
		"team records lead session lead-1, lead epoch 1",
		"tm1 registered: session tm1-s1, epoch 1",
		"lead killed (kill -9 sidecar pid",
		"entered zombie mode",
		"all 3 teammates in zombie mode: lead kill -> zombie",
		"team records lead session lead-2, lead epoch 2",
		"lead sidecar lead-2: lead attached to team demo: takeover, lead epoch 2",
		"every teammate left zombie mode",
		"held mail released",
		"$ teambus team probe demo",
		"'s agent killed (kill -9 pid",
		"is crashed (crash 1 of crash-limit 1)",
		"task tests is back in the queue (available), checkpoint kept",
		"$ teambus brief --team demo --member",
		"DO NOT re-execute completed work",
		"registered: session tm3-s2, epoch 2",
		"resuming task tests from checkpoint #",
		"completed tests",
		"all 6 tasks complete",
		"team demo is complete",
		"every teammate agent and sidecar has exited",
		"== summary",
		"6 of 6 complete",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output does not contain %q", want)
		}
	}
	for _, bad := range []string{"FAILED", "still running", "only "} {
		if strings.Contains(out, bad) {
			t.Errorf("demo output contains %q", bad)
		}
	}
	// The temporary directory is gone.
	m := regexp.MustCompile(`directory (\S+teambus-demo-\S+):`).FindStringSubmatch(out)
	if m == nil {
		t.Fatal("the demo did not print its directory")
	}
	if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
		t.Errorf("demo directory %s still exists (%v)", m[1], err)
	}
}
