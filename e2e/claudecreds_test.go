package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// TestClaude_Real_CredentialHooks: `init claude --credential --team alpha
// --member tm1` in a project, then the real Claude Code started there
// from a terminal with no TEAMBUS_* variable and a state directory that
// is not the node's: the hooks reach the bus with tm1's credential alone.
// Mail sent before the session reaches the first request, mail sent
// mid-session a later one, every message is acked after its write, the
// session registered tm1, and no process of the session holds the node
// token in its argv or environment.
func TestClaude_Real_CredentialHooks(t *testing.T) {
	claude := claudeBin(t)
	e := newEnv(t)
	e.createTeam("alpha", teambus.DefaultPolicy(), "tm1", "tm2")
	token := e.node.Token()
	home, project := t.TempDir(), t.TempDir()
	var clean []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TEAMBUS_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			clean = append(clean, kv)
		}
	}
	clean = append(clean, "HOME="+home, "ANTHROPIC_API_KEY=x", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1")

	// The operator runs init with the node's directory (the token).
	initCmd := exec.Command(bin, "init", "claude", "--credential", "--team", "alpha", "--member", "tm1", "--dir", e.node.Dir())
	initCmd.Dir = project
	initCmd.Env = append(append([]string(nil), clean...), "TEAMBUS_CLAUDE_BIN="+claude)
	out, err := initCmd.CombinedOutput()
	if err != nil {
		t.Fatalf("init claude --credential: %v\n%s", err, out)
	}
	creds := filepath.Join(home, ".config", "teambus", "creds", "alpha", "tm1.creds")
	if _, err := os.Stat(creds); err != nil {
		t.Fatalf("no credential at %s: %v\n%s", creds, err, out)
	}
	settings, _ := os.ReadFile(filepath.Join(project, ".claude", "settings.local.json"))
	if bytes.Contains(settings, []byte(e.node.Dir())) || !bytes.Contains(settings, []byte(creds)) {
		t.Fatalf("the handlers should name the credential and not the node:\n%s", settings)
	}

	ctx := context.Background()
	tm2 := team.Actor{Team: "alpha", Member: "tm2"}
	if _, err := e.svc.Send(ctx, teamapi.SendRequest{Actor: tm2, To: "tm1", Body: "PRE-SESSION-MAIL on a credential"}); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		leaks []string
	)
	api := &fakeAPI{onRequest: func(n int) {
		if n != 0 {
			return
		}
		if _, err := e.svc.Send(ctx, teamapi.SendRequest{Actor: tm2, To: "tm1", Body: "MID-SESSION-MAIL on a credential"}); err != nil {
			t.Errorf("send: %v", err)
		}
		// While the session runs: none of its processes holds the token.
		found := tokenHolders(token)
		mu.Lock()
		leaks = append(leaks, found...)
		mu.Unlock()
	}}
	apiURL := serveAPI(t, api)

	cmd := exec.Command(claude, "-p", "say hi with the Bash tool", "--allowedTools", "Bash(echo *)", "--debug-file", filepath.Join(home, "debug.log"))
	cmd.Dir = project
	cmd.Env = append(append([]string(nil), clean...), "ANTHROPIC_BASE_URL="+apiURL)
	claudePID, stdout, dbg := runClaude(t, cmd, filepath.Join(home, "debug.log"))
	reqs := api.requests()
	if len(reqs) < 2 {
		t.Fatalf("%d requests; stdout %q\ndebug:\n%s", len(reqs), stdout, tail(dbg, 4000))
	}
	if !strings.Contains(reqs[0], "PRE-SESSION-MAIL on a credential") {
		t.Errorf("first request lacks the mail sent before the session:\n%s\ndebug:\n%s", tail(reqs[0], 3000), tail(dbg, 3000))
	}
	later := false
	for _, r := range reqs[1:] {
		later = later || strings.Contains(r, "MID-SESSION-MAIL on a credential")
	}
	if !later {
		t.Errorf("no later request carries the mid-session mail; last:\n%s", tail(reqs[len(reqs)-1], 3000))
	}
	if got := len(e.mailPending(t, "tm1")); got != 0 {
		t.Errorf("%d message(s) still unread", got)
	}
	m, err := e.svc.Member(ctx, "alpha", "tm1")
	if err != nil || m.Epoch != 1 || !strings.HasSuffix(m.Session, fmt.Sprintf("-p%d", claudePID)) {
		t.Errorf("tm1 not registered by the session: %+v %v", m, err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, l := range leaks {
		t.Errorf("holds the node token: %s", l)
	}
}

// tokenHolders lists the processes whose argv or environment holds token.
func tokenHolders(token string) []string {
	var out []string
	pids, _ := filepath.Glob("/proc/[0-9]*")
	self := fmt.Sprintf("/proc/%d", os.Getpid())
	for _, p := range pids {
		if p == self {
			continue // the test itself is the operator
		}
		for _, f := range []string{"cmdline", "environ"} {
			raw, err := os.ReadFile(filepath.Join(p, f))
			if err == nil && bytes.Contains(raw, []byte(token)) {
				cmd, _ := os.ReadFile(filepath.Join(p, "cmdline"))
				out = append(out, fmt.Sprintf("%s/%s (%s)", p, f, bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
			}
		}
	}
	return out
}
