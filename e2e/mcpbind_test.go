package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestClaude_Real_InitMCPActsAsTheBoundMember: `init claude --team alpha
// --member tm1 --mcp` in a project, then the real Claude Code started
// there from a terminal without any TEAMBUS_* variable (the bus location
// and identity come from what init baked): the hooks bind the session and
// the model's mcp__teambus__whoami call answers tm1 of team alpha with the
// session the hooks registered — not "not bound".
func TestClaude_Real_InitMCPActsAsTheBoundMember(t *testing.T) {
	claude := claudeBin(t)
	e := newEnv(t)
	e.createTeam("alpha", fastPolicy(), "tm1", "tm2")
	home, project := t.TempDir(), t.TempDir()
	var clean []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TEAMBUS_") && !strings.HasPrefix(kv, "HOME=") {
			clean = append(clean, kv)
		}
	}
	clean = append(clean, "HOME="+home, "ANTHROPIC_API_KEY=x", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1")

	initCmd := exec.Command(bin, "init", "claude", "--team", "alpha", "--member", "tm1", "--mcp", "--dir", e.node.Dir())
	initCmd.Dir = project
	initCmd.Env = append(append([]string(nil), clean...), "TEAMBUS_CLAUDE_BIN="+claude, "ANTHROPIC_BASE_URL=http://127.0.0.1:1")
	if out, err := initCmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "ran       claude mcp add") {
		t.Fatalf("init claude --mcp: %v\n%s", err, out)
	}

	api := &fakeAPI{tool: "mcp__teambus__whoami", toolInput: `{}`}
	apiURL := serveAPI(t, api)
	cmd := exec.Command(claude, "-p", "who am I in the team?", "--allowedTools", "mcp__teambus__whoami", "--debug-file", filepath.Join(home, "debug.log"))
	cmd.Dir = project
	cmd.Env = append(append([]string(nil), clean...), "ANTHROPIC_BASE_URL="+apiURL)
	claudePID, out, dbg := runClaude(t, cmd, filepath.Join(home, "debug.log"))
	reqs := api.requests()
	if len(reqs) < 2 {
		t.Fatalf("%d requests; stdout %q\ndebug:\n%s", len(reqs), out, tail(dbg, 4000))
	}
	result := reqs[1]
	if i := strings.Index(result, "tool_result"); i >= 0 {
		result = result[i:]
	}
	for _, want := range []string{`\"bound\":true`, `\"team\":\"alpha\"`, `\"member\":\"tm1\"`, "-p" + strconv.Itoa(claudePID)} {
		if !strings.Contains(result, want) {
			t.Errorf("the whoami result lacks %s:\n%s\ndebug:\n%s", want, tail(result, 3000), tail(dbg, 3000))
		}
	}
	if strings.Contains(result, "not bound") {
		t.Errorf("whoami says not bound:\n%s", tail(result, 3000))
	}
}
