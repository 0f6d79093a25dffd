package e2e

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

	var cmd *exec.Cmd
	api := &fakeAPI{onRequest: func(n int) {
		if n == 1 {
			_ = cmd.Process.Signal(syscall.SIGKILL)
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
	cmd = exec.Command(claude, "-p", marker+": say hi with the Bash tool", "--settings", simSettingsFile(t, "alpha", "tm1"), "--allowedTools", "Bash(echo *)")
	cmd.Dir = project
	cmd.Env = claudeEnv(home, ln.Addr().String())
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
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
