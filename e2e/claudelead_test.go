package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus"
)

// TestClaude_Real_LeadComesBack runs the real Claude Code as the lead of a
// team twice in the same project, as a user quits `claude` and starts it
// again (each start is a new session id). The first session's clean end
// releases the team (SessionEnd stops the lead sidecar, which records the
// release); the second binds as the lead at once, without TEAMBUS_FORCE,
// with takeover-after an hour away.
func TestClaude_Real_LeadComesBack(t *testing.T) {
	claude := claudeBin(t)
	e := newEnv(t)
	e.createTeam("alpha", releasePolicy(), "tm1")
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	api := &fakeAPI{}
	srv := &http.Server{Handler: api}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	home, project := t.TempDir(), t.TempDir()
	settings := simSettingsFile(t, "alpha", "lead")

	run := func(n int) {
		t.Helper()
		cmd := exec.Command(claude, "-p", "say hi with the Bash tool", "--settings", settings, "--allowedTools", "Bash(echo *)", "--debug-file", filepath.Join(home, fmt.Sprintf("debug-%d.log", n)))
		cmd.Dir = project
		cmd.Env = append(os.Environ(), "HOME="+home, "ANTHROPIC_BASE_URL=http://"+ln.Addr().String(), "ANTHROPIC_API_KEY=x",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "TEAMBUS_DIR="+e.node.Dir(),
			"TEAMBUS_TEAM=", "TEAMBUS_MEMBER=", "TEAMBUS_SESSION=", "TEAMBUS_FORCE=")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err = <-done:
		case <-time.After(120 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("claude -p (run %d) did not finish; stderr:\n%s", n, errb.String())
		}
		if err != nil {
			dbg, _ := os.ReadFile(filepath.Join(home, fmt.Sprintf("debug-%d.log", n)))
			t.Fatalf("claude -p (run %d): %v\nstdout:\n%s\nstderr:\n%s\ndebug:\n%s", n, err, out.String(), errb.String(), tail(string(dbg), 4000))
		}
	}
	hooksLog := func() string {
		b, _ := os.ReadFile(filepath.Join(e.node.Dir(), "logs", "hooks.log"))
		return string(b)
	}

	run(1)
	first := len(api.requests())
	if first == 0 || !strings.Contains(api.requests()[0], "this session is the lead of team alpha") {
		t.Fatalf("the first session was not bound as the lead; hooks.log:\n%s", hooksLog())
	}
	var s1 string
	e.waitFor(15*time.Second, "the first lead released the team", func() error {
		tm, _, err := e.svc.Store().Team(ctx, "alpha")
		if err != nil {
			return err
		}
		s1 = tm.LeadSession
		if tm.LeadEpoch != 1 || tm.LeadReleasedAt == nil {
			return fmt.Errorf("lead %s epoch %d released %v", tm.LeadSession, tm.LeadEpoch, tm.LeadReleasedAt)
		}
		return nil
	})

	run(2)
	reqs := api.requests()
	if len(reqs) <= first {
		t.Fatalf("the second session sent no request; hooks.log:\n%s", hooksLog())
	}
	if c := reqs[first]; !strings.Contains(c, "this session is the lead of team alpha") || strings.Contains(c, "not bound") {
		t.Fatalf("the second session was not bound as the lead:\n%s\nhooks.log:\n%s", tail(c, 3000), hooksLog())
	}
	tm, _, err := e.svc.Store().Team(ctx, "alpha")
	if err != nil || tm.LeadEpoch < 2 || tm.LeadSession == s1 || tm.Status != teambus.TeamActive {
		t.Fatalf("team after the second lead session = %+v, %v; want a new lead session at epoch 2", tm, err)
	}
}
