package initclaude

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus/internal/claudetest"
)

// realClaude returns the pinned Claude Code (claudetest.Bin: installed by
// scripts/install-claude.sh unless TEAMBUS_CLAUDE_BIN names one) or skips
// the test where npm is missing or the version is too old.
func realClaude(t *testing.T) string {
	t.Helper()
	bin := claudetest.Bin(t)
	out, err := exec.Command(bin, "--version").Output()
	v, ok := ParseVersion(string(out))
	if err != nil || !ok || v.Less(PidClaude) {
		t.Skipf("Claude Code %q (%v): need 2.1.214 or later", out, err)
	}
	return bin
}

// TestRealClaude_RunsInstalledHandlers: the real Claude Code reads the local
// settings init writes and runs its handlers with the arguments written
// (the handler binary is a recorder named teambus: the hooks themselves
// are not what this test is about).
func TestRealClaude_RunsInstalledHandlers(t *testing.T) {
	claude := realClaude(t)
	base := t.TempDir()
	home, repo, log := filepath.Join(base, "home"), filepath.Join(base, "repo"), filepath.Join(base, "calls.log")
	for _, d := range []string{home, repo, filepath.Join(base, "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	gitRun(t, repo, "init", "-q")
	rec := filepath.Join(base, "bin", "teambus")
	if err := os.WriteFile(rec, []byte("#!/bin/sh\necho \"$*\" >> '"+log+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := Env{Cwd: repo, Home: home, ClaudeDir: filepath.Join(home, ".claude")}
	tg, err := Resolve(context.Background(), env, ScopeLocal, "", "")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := PlanInstall(Config{Target: tg, Options: Options{Bin: rec, Team: "alpha", Member: "tm1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.Apply(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, claude, "--init-only")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "HOME="+home, "ANTHROPIC_API_KEY=test", "CLAUDE_CONFIG_DIR=", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1",
		"ANTHROPIC_BASE_URL=http://127.0.0.1:1") // no network: remote settings are retried for ~20 s otherwise
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("claude --init-only: %v\n%s", err, out)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatalf("no handler ran: %v", err)
	}
	calls := string(b)
	for _, want := range []string{"hook SessionStart --team alpha --member tm1\n", "hook SessionEnd --team alpha --member tm1 --budget 1s\n"} {
		if !strings.Contains(calls, want) {
			t.Errorf("Claude Code did not run %q; it ran:\n%s", want, calls)
		}
	}
}

// TestRealClaude_PluginValidates: `claude plugin validate` accepts the
// plugin and ignores none of its hook entries.
func TestRealClaude_PluginValidates(t *testing.T) {
	claude := realClaude(t)
	dir := filepath.Join(t.TempDir(), "plugin")
	plan, err := PlanInstall(Config{Target: Target{Scope: ScopePlugin, Dir: dir}, Options: Options{Bin: "teambus", Lead: true}, Version: "v1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.Apply(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, claude, "plugin", "validate", dir)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("claude plugin validate: %v\n%s", err, out)
	}
	for _, bad := range []string{"ignored", "Invalid", "unknown hook event"} {
		if strings.Contains(string(out), bad) {
			t.Errorf("validate reports %q:\n%s", bad, out)
		}
	}
	if n := strings.Count(string(out), "command teambus [\"hook\""); n != 13 {
		t.Errorf("validate lists %d teambus handlers, want 13:\n%s", n, out)
	}
}
