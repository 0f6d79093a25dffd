package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus/agent/initclaude"
	"github.com/teambus/teambus/internal/claudetest"
)

// TestInitClaude_MCPRegistrationRealClaude: with the real Claude Code,
// `init claude --team alpha --member tm1 --mcp` registers the teambus MCP
// server bound to the same member and credential as the hooks (`claude mcp list`
// shows it), --check reports it, a rerun leaves it, and --remove takes it
// out again (`claude mcp list` no longer has it).
func TestInitClaude_MCPRegistrationRealClaude(t *testing.T) {
	claude := claudetest.Bin(t)
	repo := initRepo(t, true)
	dir := evTeam(t, "alpha")
	home := os.Getenv("HOME")
	t.Setenv("TEAMBUS_CLAUDE_BIN", claude)
	for k, v := range map[string]string{"ANTHROPIC_API_KEY": "test", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		"DISABLE_TELEMETRY": "1", "ANTHROPIC_BASE_URL": "http://127.0.0.1:1"} {
		t.Setenv(k, v)
	}
	bin := filepath.Join(t.TempDir(), "teambus")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	list := func() string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, claude, "mcp", "list")
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("claude mcp list: %v\n%s", err, out)
		}
		return string(out)
	}
	install := append([]string{"--credential", "--bin", bin, "--team", "alpha", "--member", "tm1", "--mcp"}, dir...)
	r := initOK(t, install...)
	want := "teambus: " + bin + " mcp --team alpha --member tm1 --creds " + credsFile("alpha", "tm1")
	if got := list(); !strings.Contains(got, want) {
		t.Fatalf("claude mcp list after install lacks %q:\n%s\ninit: %s %s", want, got, r.stdout, r.stderr)
	}
	r = runCLI(t, append([]string{"init", "claude", "--check", "--json", "--bin", bin}, dir...)...)
	var rep struct {
		MCP []initclaude.MCPServer `json:"mcp"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 || len(rep.MCP) != 1 || rep.MCP[0].Identity != "alpha/tm1" || !rep.MCP[0].Owned || rep.MCP[0].Scope != "local" {
		t.Fatalf("--check: exit %d, %+v %v\n%s", r.code, rep.MCP, err, r.stdout)
	}
	// Rerun: nothing to change, no claude command run.
	if r = initOK(t, install...); strings.Contains(r.stdout, "ran ") {
		t.Errorf("rerun ran claude commands: %s", r.stdout)
	}
	r = initOK(t, append([]string{"--remove"}, dir...)...)
	if got := list(); strings.Contains(got, "teambus:") {
		t.Fatalf("claude mcp list after --remove still has teambus:\n%s\nremove: %s %s", got, r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(home, ".claude.json")); strings.Contains(string(b), bin) {
		t.Errorf("~/.claude.json still names %s", bin)
	}
}
