package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/teambus/teambus/internal/claudetest"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/agent/binding"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// claudeBin is the pinned Claude Code (claudetest.Bin).
func claudeBin(t *testing.T) string { return claudetest.Bin(t) }

// fakeAPI is a Messages API on loopback: it records every request body
// and answers from a script, streamed (SSE) as Claude Code expects.
type fakeAPI struct {
	mu     sync.Mutex
	bodies []string
	// onRequest runs before the n-th (0-based) request is answered.
	onRequest func(n int)
	// tool and toolInput are the first turn's tool call (default: Bash
	// running echo hi).
	tool, toolInput string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/v1/messages") {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	n := len(f.bodies)
	f.bodies = append(f.bodies, string(body))
	f.mu.Unlock()
	if f.onRequest != nil {
		f.onRequest(n)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	ev := func(typ string, data any) {
		raw, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, raw)
	}
	ev("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant",
		"model": "claude-sonnet-4-5", "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 10, "output_tokens": 1}}})
	stop := "end_turn"
	if n == 0 {
		// First turn: one tool call.
		stop = "tool_use"
		tool, input := "Bash", `{"command":"echo hi","description":"say hi"}`
		if f.tool != "" {
			tool, input = f.tool, f.toolInput
		}
		ev("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "tool_use", "id": "toolu_01", "name": tool, "input": map[string]any{}}})
		ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": input}})
	} else {
		ev("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "done"}})
	}
	ev("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	ev("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 5}})
	ev("message_stop", map[string]any{"type": "message_stop"})
}

// serveAPI serves h on a loopback port until the test ends and returns
// its base URL.
func serveAPI(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// runClaude runs cmd (a `claude -p`) to its end, at most 120 s, and
// returns its pid, its stdout and its debug file (debugFile, which the
// command was given with --debug-file). A run that fails or does not end
// fails the test with its output.
func runClaude(t *testing.T, cmd *exec.Cmd, debugFile string) (pid int, stdout, debug string) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(120 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("claude -p did not finish; stderr:\n%s", errb.String())
	}
	dbg, _ := os.ReadFile(debugFile)
	if err != nil {
		t.Fatalf("claude -p: %v\nstdout:\n%s\nstderr:\n%s\ndebug:\n%s", err, out.String(), errb.String(), tail(string(dbg), 4000))
	}
	return cmd.Process.Pid, out.String(), string(dbg)
}

func (f *fakeAPI) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.bodies...)
}

// TestClaude_Real_HooksDeliverIntoTheModel runs the real Claude Code
// (2.1.330, `claude -p`) against a fake Messages API with the teambus hooks
// in a settings file: mail sent before the session reaches the first
// request, mail sent mid-session a later one, the inbox is empty after,
// the member was registered by the session, and its end was clean.
func TestClaude_Real_HooksDeliverIntoTheModel(t *testing.T) {
	claude := claudeBin(t)
	e := newEnv(t)
	e.createTeam("alpha", fastPolicy(), "tm1", "tm2")
	ctx := context.Background()
	tm2 := team.Actor{Team: "alpha", Member: "tm2"}
	if _, err := e.svc.Send(ctx, teamapi.SendRequest{Actor: tm2, To: "tm1", Body: "PRE-SESSION-MAIL: the schema is in db/001.sql"}); err != nil {
		t.Fatal(err)
	}
	api := &fakeAPI{onRequest: func(n int) {
		if n == 0 {
			if _, err := e.svc.Send(ctx, teamapi.SendRequest{Actor: tm2, To: "tm1", Body: "MID-SESSION-MAIL: run the migration next"}); err != nil {
				t.Errorf("send: %v", err)
			}
		}
	}}
	apiURL := serveAPI(t, api)

	home, project := t.TempDir(), t.TempDir()
	settings := simSettingsFile(t, "alpha", "tm1")
	cmd := exec.Command(claude, "-p", "say hi with the Bash tool", "--settings", settings, "--allowedTools", "Bash(echo *)", "--debug-file", filepath.Join(home, "debug.log"))
	cmd.Dir = project
	cmd.Env = append(os.Environ(), "HOME="+home, "ANTHROPIC_BASE_URL="+apiURL, "ANTHROPIC_API_KEY=x",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "TEAMBUS_DIR="+e.node.Dir(),
		"TEAMBUS_TEAM=", "TEAMBUS_MEMBER=", "TEAMBUS_SESSION=")
	claudePID, out, dbg := runClaude(t, cmd, filepath.Join(home, "debug.log"))
	reqs := api.requests()
	if len(reqs) < 2 {
		t.Fatalf("%d requests; stdout %q\ndebug:\n%s", len(reqs), out, tail(dbg, 4000))
	}
	if !strings.Contains(reqs[0], "PRE-SESSION-MAIL") {
		t.Errorf("first request lacks the mail sent before the session:\n%s", tail(reqs[0], 3000))
	}
	later := false
	for _, r := range reqs[1:] {
		later = later || strings.Contains(r, "MID-SESSION-MAIL")
	}
	if !later {
		t.Errorf("no later request carries the mid-session mail; last:\n%s\ndebug:\n%s", tail(reqs[len(reqs)-1], 3000), tail(dbg, 4000))
	}
	// The inbox is empty: every message was acked after its write.
	if got := len(e.mailPending(t, "tm1")); got != 0 {
		t.Errorf("%d message(s) still unread", got)
	}
	// The session registered tm1 (epoch 1, its session id names the Claude
	// pid); the clean end (SessionEnd) shut it down without a crash.
	e.waitFor(15*time.Second, "tm1 shut down cleanly", func() error {
		m, _, err := e.svc.Store().Member(ctx, "alpha", "tm1")
		if err != nil {
			return err
		}
		if m.Epoch != 1 || !strings.HasSuffix(m.Session, fmt.Sprintf("-p%d", claudePID)) || m.CrashCount != 0 {
			return fmt.Errorf("member %+v", m)
		}
		if m.Status != teambus.MemberShutdown {
			return fmt.Errorf("status %s", m.Status)
		}
		return nil
	})
	if b, err := binding.Load(e.node.Dir(), claudePID); err == nil && !b.CleanExit {
		t.Errorf("binding without clean_exit: %+v", b)
	}
	hooks, _ := os.ReadFile(filepath.Join(e.node.Dir(), "logs", "hooks.log"))
	t.Logf("claude %s: %d requests; hooks.log:\n%s", claude, len(reqs), hooks)
}

// mailPending leases the member's inbox, releases it and returns it.
func (e *env) mailPending(t *testing.T, member string) []teambus.Message {
	t.Helper()
	l, err := e.svc.Mailbox("alpha").Lease(context.Background(), member, busLease())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	return l.Messages
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func busLease() mailbox.LeaseOptions { return mailbox.LeaseOptions{Max: 100} }

// TestClaude_Real_MCPSendTool runs the real Claude Code with `teambus mcp`
// as its MCP server (no hooks): the model's scripted tool call of
// mcp__teambus__send stores a message with the member as its sender, and
// the tool result the model gets back names the stored seq (issue 14).
func TestClaude_Real_MCPSendTool(t *testing.T) {
	claude := claudeBin(t)
	e := newEnv(t)
	e.createTeam("alpha", fastPolicy(), "tm1", "tm2")
	api := &fakeAPI{tool: "mcp__teambus__send", toolInput: `{"to":"tm2","body":"MCP-TOOL-MAIL: migration done","id":"mcp-1"}`}
	apiURL := serveAPI(t, api)

	home, project := t.TempDir(), t.TempDir()
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"teambus": map[string]any{
		"type": "stdio", "command": bin, "args": []string{"mcp"},
		"env": map[string]string{"TEAMBUS_DIR": e.node.Dir(), "TEAMBUS_TEAM": "alpha", "TEAMBUS_MEMBER": "tm1"},
	}}})
	mcpConfig := filepath.Join(home, "mcp.json")
	if err := os.WriteFile(mcpConfig, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(claude, "-p", "tell tm2 the migration is done", "--mcp-config", mcpConfig, "--strict-mcp-config",
		"--allowedTools", "mcp__teambus__send", "--debug-file", filepath.Join(home, "debug.log"))
	cmd.Dir = project
	cmd.Env = append(os.Environ(), "HOME="+home, "ANTHROPIC_BASE_URL="+apiURL, "ANTHROPIC_API_KEY=x",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1",
		"TEAMBUS_TEAM=", "TEAMBUS_MEMBER=", "TEAMBUS_SESSION=")
	_, _, dbg := runClaude(t, cmd, filepath.Join(home, "debug.log"))
	var got []teambus.Message
	for _, m := range e.mail("alpha") {
		if strings.Contains(m.Body, "MCP-TOOL-MAIL") {
			got = append(got, m)
		}
	}
	if len(got) != 1 || got[0].From != "tm1" || got[0].To != "tm2" {
		t.Fatalf("stored by the tool call: %+v; want one message tm1 -> tm2\ndebug:\n%s", got, tail(dbg, 4000))
	}
	reqs := api.requests()
	if len(reqs) < 2 {
		t.Fatalf("%d requests: the tool result never went back to the model", len(reqs))
	}
	// Claude Code 2.1.330 hands the model the tool's structured content
	// (JSON), not its text, when both are there.
	text, structured := fmt.Sprintf("stored seq %d for tm2", got[0].Seq), fmt.Sprintf(`\"seq\":%d`, got[0].Seq)
	back := false
	for _, r := range reqs[1:] {
		back = back || (strings.Contains(r, "tool_result") && (strings.Contains(r, text) || strings.Contains(r, structured)))
	}
	if !back {
		t.Errorf("no request after the tool call carries the tool result (%q or %s) (%d requests)", text, structured, len(reqs))
	}
	t.Logf("claude %s: tool call stored seq %d from %s", claude, got[0].Seq, got[0].From)
}
