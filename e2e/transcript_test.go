package e2e

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/transcript"
)

// TestClaude_Real_TranscriptResumesAfterKill runs the real Claude Code
// (`claude -p`, fake Messages API) with the teambus hooks, kills it with
// SIGKILL when it asks for its second turn (after its first tool batch),
// then restores its transcript from the bus into a fresh HOME and runs
// `claude -p --resume <session>` there: the resumed session's first
// request carries the conversation from before the kill. It also checks
// that the transcript was stored where Claude Code keeps it (ProjectKey)
// and that the stored bytes are those of Claude's own file.
func TestClaude_Real_TranscriptResumesAfterKill(t *testing.T) {
	claude := claudeBin(t)
	e := newEnv(t)
	e.createTeam("alpha", fastPolicy(), "tm1")
	ctx := context.Background()
	const marker = "MARKER-BEFORE-THE-KILL-7f3a"

	// The process is set after Start; the API's handler runs on its own
	// goroutine, so it reads it through an atomic.
	var proc atomic.Pointer[os.Process]
	api := &fakeAPI{onRequest: func(n int) {
		if p := proc.Load(); n == 1 && p != nil {
			_ = p.Signal(syscall.SIGKILL)
		}
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: api}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	home, project := t.TempDir(), t.TempDir()
	claudeEnv := func(home, apiAddr string) []string {
		return append(os.Environ(), "HOME="+home, "ANTHROPIC_BASE_URL=http://"+apiAddr, "ANTHROPIC_API_KEY=x",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "TEAMBUS_DIR="+e.node.Dir(),
			"TEAMBUS_TEAM=", "TEAMBUS_MEMBER=", "TEAMBUS_SESSION=", "TEAMBUS_NO_SIDECAR=1")
	}
	cmd := exec.Command(claude, "-p", marker+": say hi with the Bash tool", "--settings", simSettingsFile(t, "alpha", "tm1"), "--allowedTools", "Bash(echo *)")
	cmd.Dir = project
	cmd.Env = claudeEnv(home, ln.Addr().String())
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	proc.Store(cmd.Process)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(120 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("claude -p did not end; stderr:\n%s", errb.String())
	}
	if n := len(api.requests()); n < 2 {
		hooks, _ := os.ReadFile(filepath.Join(e.node.Dir(), "logs", "hooks.log"))
		t.Fatalf("claude made %d requests before it ended (not killed at the second); stderr:\n%s\nhooks.log:\n%s", n, errb.String(), hooks)
	}

	conn := nodetest.Connect(t, e.node)
	st, err := transcript.Open(ctx, conn.JS, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Latest(ctx, "tm1")
	if err != nil {
		hooks, _ := os.ReadFile(filepath.Join(e.node.Dir(), "logs", "hooks.log"))
		t.Fatalf("no transcript synced before the kill: %v\nhooks.log:\n%s", err, hooks)
	}
	if info.Cwd != project {
		t.Errorf("transcript cwd %q, want %q", info.Cwd, project)
	}
	// Claude Code's own file is where ProjectKey says, and starts with the
	// stored bytes.
	own, err := os.ReadFile(filepath.Join(home, ".claude", "projects", transcript.ProjectKey(project), info.SessionID+".jsonl"))
	if err != nil {
		t.Fatalf("Claude Code's transcript is not where ProjectKey(%q) puts it: %v", project, err)
	}
	home2 := t.TempDir() // another machine
	_, path, err := st.Restore(ctx, "tm1", home2, project)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(got)) != info.Size || !bytes.HasPrefix(own, got) || !bytes.Contains(got, []byte(marker)) {
		t.Fatalf("restored %d bytes (stored %d): not a prefix of Claude's %d-byte file holding the marker", len(got), info.Size, len(own))
	}

	// The resumed session, without teambus, on the other "machine".
	api2 := &fakeAPI{}
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv2 := &http.Server{Handler: api2}
	go srv2.Serve(ln2)
	t.Cleanup(func() { srv2.Close() })
	resume := exec.Command(claude, "-p", "--resume", info.SessionID, "continue where you stopped")
	resume.Dir = project
	resume.Env = claudeEnv(home2, ln2.Addr().String())
	var out2, errb2 bytes.Buffer
	resume.Stdout, resume.Stderr = &out2, &errb2
	rdone := make(chan error, 1)
	if err := resume.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { rdone <- resume.Wait() }()
	select {
	case err = <-rdone:
	case <-time.After(120 * time.Second):
		_ = resume.Process.Kill()
		t.Fatalf("claude --resume did not end; stderr:\n%s", errb2.String())
	}
	reqs := api2.requests()
	if len(reqs) == 0 {
		t.Fatalf("claude --resume made no request (%v); stdout %q stderr:\n%s", err, out2.String(), errb2.String())
	}
	if !strings.Contains(reqs[0], marker) || !strings.Contains(reqs[0], "continue where you stopped") {
		t.Fatalf("the resumed session's first request lacks the conversation before the kill:\n%s", tail(reqs[0], 3000))
	}
	t.Logf("resumed session %s from %d stored bytes (Claude's file had %d)", info.SessionID, info.Size, len(own))
}

// TestHook_KillDuringTranscriptSync runs `teambus hook PostToolBatch` of a
// bound session whose 10 MB transcript grows between runs (20 KB, and now
// and then 600 KB: data chunks before the commit), and kills runs with
// SIGKILL: half of them from inside right after the sync's first stored
// message (TEAMBUS_HOOK_FAULT=crash-during-transcript-sync: between a data
// chunk and its commit, or right after a one-message commit), most others
// from outside at a moment. After every run the stored transcript
// restores, is a prefix of the file, and is never shorter than it was:
// older or newer, never torn. A last run that is not killed stores all of
// it.
func TestHook_KillDuringTranscriptSync(t *testing.T) {
	runs := 40
	if testing.Short() {
		runs = 10
	}
	e := newEnv(t)
	e.createTeam("alpha", fastPolicy(), "tm1")
	claude := e.agent("claude")
	pid := claude.Pid()
	const session = "5e55f3c2-0000-4000-8000-000000000001"
	hook := func(event string, payload []byte, killAfter time.Duration, fault string) bool {
		cmd := exec.Command(bin, "hook", event)
		cmd.Env = hookEnv(e, pid, "tm1", "TEAMBUS_NO_SIDECAR=1", "TEAMBUS_HOOK_FAULT="+fault)
		cmd.Stdin = bytes.NewReader(payload)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if killAfter > 0 {
			timer := time.AfterFunc(killAfter, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
			defer timer.Stop()
		}
		return cmd.Wait() != nil
	}
	hook("SessionStart", hookPayload("SessionStart", session, map[string]any{"source": "startup"}), 0, "")
	dir := t.TempDir()
	path := filepath.Join(dir, session+".jsonl")
	grow := func(n int) {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		line := []byte(`{"type":"assistant","message":{"content":"` + strings.Repeat("x", 1000) + `"}}` + "\n")
		for w := 0; w < n; w += len(line) {
			if _, err := f.Write(line); err != nil {
				t.Fatal(err)
			}
		}
	}
	grow(10 << 20)
	ptb := hookPayload("PostToolBatch", session, map[string]any{"transcript_path": path, "cwd": dir, "tool_calls": []any{}})
	ctx := context.Background()
	st, err := transcript.Open(ctx, nodetest.Connect(t, e.node).JS, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	var stored int64
	killed, inside, older := 0, 0, 0
	for i := 0; i < runs; i++ {
		if i%3 == 1 {
			grow(600 << 10)
		} else {
			grow(20 << 10)
		}
		var after time.Duration
		fault := ""
		switch i % 4 {
		case 0, 2:
			fault = "crash-during-transcript-sync"
		case 1:
			after = time.Duration(1+(i*7919)%40) * time.Millisecond
		}
		before := stored
		if hook("PostToolBatch", ptb, after, fault) {
			killed++
			if fault != "" {
				inside++
			}
		}
		if _, err := st.Latest(ctx, "tm1"); errors.Is(err, transcript.ErrNone) && stored == 0 {
			continue // killed before its first commit
		}
		info, out, err := st.Restore(ctx, "tm1", t.TempDir(), dir)
		if err != nil {
			t.Fatalf("run %d: restore after the hook: %v", i, err)
		}
		got, _ := os.ReadFile(out)
		file, _ := os.ReadFile(path)
		if !bytes.HasPrefix(file, got) || info.Size != int64(len(got)) || info.Size < stored {
			t.Fatalf("run %d: restored %d bytes (info %d, stored before %d): not a prefix of the %d-byte file, or older than before", i, len(got), info.Size, stored, len(file))
		}
		stored = info.Size
		if fault != "" && stored == before {
			older++ // killed between a data chunk and its commit: the older one
		}
	}
	grow(20 << 10)
	hook("PostToolBatch", ptb, 0, "")
	_, out, err := st.Restore(ctx, "tm1", t.TempDir(), dir)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(out)
	file, _ := os.ReadFile(path)
	if !bytes.Equal(got, file) {
		hooks, _ := os.ReadFile(filepath.Join(e.node.Dir(), "logs", "hooks.log"))
		t.Fatalf("after a hook that was not killed: %d of %d bytes stored\nhooks.log:\n%s", len(got), len(file), tail(string(hooks), 3000))
	}
	if inside == 0 || older == 0 {
		t.Errorf("no hook was killed inside a sync (%d) or between a data chunk and its commit (%d)", inside, older)
	}
	t.Logf("%d of %d hooks killed (%d inside the sync, %d of them before the commit); the stored transcript was valid after each", killed, runs, inside, older)
}
