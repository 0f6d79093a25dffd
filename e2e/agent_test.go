package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus"
)

// agentBin builds the lean agent build (cmd/teambus-agent, -tags
// teambus_agent) into dir, named teambus-agent.
func agentBin(t *testing.T, dir string) string {
	t.Helper()
	exe := filepath.Join(dir, "teambus-agent")
	cmd := exec.Command("go", "build", "-tags", "teambus_agent", "-o", exe, "../cmd/teambus-agent")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build teambus-agent: %v\n%s", err, out)
	}
	return exe
}

// TestAgentBuild_SendThroughRelayAndHandOver: the lean agent build links
// no NATS client; as an agent runs it (a `teambus` link, the identity from
// the session's exports) with the member's sidecar up, `teambus send`
// goes through the sidecar's relay by the lean build itself (it works
// with no other build beside it) and stores exactly one message, from
// stdin too; bad input exits as the client build exits, with the same
// lines, and stores nothing; with no sidecar it hands over to the client
// build beside it, which connects itself; and alone it says what to
// install.
func TestAgentBuild_SendThroughRelayAndHandOver(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-tags", "teambus_agent", "../cmd/teambus-agent").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if strings.Contains(string(out), "github.com/nats-io/") {
		t.Fatalf("the agent build links NATS packages:\n%s", grepLines(string(out), "nats-io"))
	}

	binDir := t.TempDir()
	client := clientBin(t, binDir)
	lean := agentBin(t, binDir)
	// The same lean build alone: it can run only what it runs itself.
	aloneDir := t.TempDir()
	alone := filepath.Join(aloneDir, "teambus-agent")
	if b, err := os.ReadFile(lean); err != nil || os.WriteFile(alone, b, 0o755) != nil {
		t.Fatalf("copy teambus-agent: %v", err)
	}
	// What the SessionStart hook makes: $TEAMBUS_DIR/bin/teambus, a link.
	linkDir := t.TempDir()
	link := filepath.Join(linkDir, "teambus")
	if err := os.Symlink(lean, link); err != nil {
		t.Fatal(err)
	}
	aloneLink := filepath.Join(t.TempDir(), "teambus")
	if err := os.Symlink(alone, aloneLink); err != nil {
		t.Fatal(err)
	}

	e := newEnv(t)
	e.createTeam("alpha", teambus.DefaultPolicy(), "tm1", "tm2") // no lead runs: a fast lead-timeout would put tm1 in zombie mode (sends held) on a slow machine
	session := []string{"TEAMBUS_DIR=" + e.node.Dir(), "TEAMBUS_TEAM=alpha", "TEAMBUS_MEMBER=tm1", "TEAMBUS_SESSION=S1"}
	runAs := func(exe, stdin string, args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(exe, args...)
		cmd.Env = append(os.Environ(), session...)
		cmd.Stdin = strings.NewReader(stdin)
		var o, eb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &eb
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return o.String(), eb.String(), ee.ExitCode()
		} else if err != nil {
			t.Fatalf("run %s %v: %v", exe, args, err)
		}
		return o.String(), eb.String(), 0
	}
	stored := func(body string) int { return count(e.mail("alpha"), teambus.MsgInfo, body) }

	// The member's sidecar, the client build with the node's token, as
	// the SessionStart hook starts it.
	agent := e.agent("tm1-agent")
	side := e.startCmd("tm1-sidecar", exec.Command(client, "teammate", "--dir", e.node.Dir(), "--team", "alpha", "--member", "tm1", "--session", "S1", "--pid", fmt.Sprint(agent.Pid()), "--log-level", "debug"))
	e.waitFor(10*time.Second, "the sidecar's relay", func() error {
		if side.exited() {
			return errors.New("sidecar exited:\n" + side.output())
		}
		if !strings.Contains(side.output(), "relay listening") {
			return errors.New("no relay yet")
		}
		return nil
	})

	// Through the relay, by the lean build alone.
	if stdout, stderr, code := runAs(aloneLink, "", "send", "--to", "tm2", "from the lean build"); code != 0 || !strings.HasPrefix(stdout, "stored seq ") {
		t.Fatalf("send by the lean build: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if n := stored("from the lean build"); n != 1 {
		t.Fatalf("stored %d messages, want 1", n)
	}
	if n := strings.Count(side.output(), "relay: forwarded"); n != 1 {
		t.Fatalf("%d requests through the relay, want 1:\n%s", n, side.output())
	}
	if stdout, stderr, code := runAs(aloneLink, "a body on stdin\n", "send", "-", "--to", "tm2", "--json"); code != 0 || !strings.Contains(stdout, `"seq"`) {
		t.Fatalf("send - --json: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if n := stored("a body on stdin"); n != 1 {
		t.Fatalf("stored %d messages from stdin, want 1", n)
	}
	// The same id twice stores once.
	for i, want := range []string{"stored seq ", "(duplicate)"} {
		if stdout, stderr, code := runAs(aloneLink, "", "send", "--to", "tm2", "--id", "once-1", "sent twice"); code != 0 || !strings.Contains(stdout, want) {
			t.Fatalf("send %d of the same id: exit %d, stdout %q, stderr %q", i+1, code, stdout, stderr)
		}
	}
	if n := stored("sent twice"); n != 1 {
		t.Fatalf("stored %d messages of one id, want 1", n)
	}

	// Bad input: the lean build (through the link, the client build
	// beside it) exits as the client build does, with the same lines, and
	// stores nothing.
	before := len(e.mail("alpha"))
	for _, tt := range []struct {
		stdin string
		args  []string
	}{
		{"", []string{"send"}},
		{"", []string{"send", "a", "b"}},
		{"", []string{"send", ""}},
		{"", []string{"send", "-"}},
		{"", []string{"send", "--type", "gossip", "x"}},
		{"", []string{"send", "--data", "{", "x"}},
		{"", []string{"send", "--id", "not an id!", "x"}},
		{"", []string{"send", "--to", "nobody", "x"}},
		{"", []string{"send", "--team", "Bad Team", "x"}},
		{"", []string{"send", "--no-such-flag", "x"}},
		{"", []string{"send", "--timeout", "0s", "x"}},
		{"", []string{"send", "--session", "S0", "x"}},
		{"", []string{"send", "x", "--to"}},
		{"", []string{"send", "--from", "/nonexistent"}},
	} {
		lo, le, lc := runAs(link, tt.stdin, tt.args...)
		co, ce, cc := runAs(client, tt.stdin, tt.args...)
		if lc == 0 || lc != cc || lo != co || le != ce {
			t.Errorf("%q: the lean build: exit %d, stdout %q, stderr %q; the client build: exit %d, stdout %q, stderr %q", tt.args, lc, lo, le, cc, co, ce)
		}
		t.Logf("%q: exit %d: %s", tt.args, lc, strings.TrimSpace(le))
		if lc != teambus.ExitPermanent && lc != teambus.ExitConflict {
			t.Errorf("%q: exit %d, want 2 (or 3 for a fenced session): %s", tt.args, lc, le)
		}
	}
	if after := len(e.mail("alpha")); after != before {
		t.Fatalf("bad input stored %d messages", after-before)
	}

	// Another command is the client build's, run in place of the lean one.
	if stdout, stderr, code := runAs(link, "", "inbox", "--member", "tm2", "--ack"); code != 0 || !strings.Contains(stdout, "from the lean build") {
		t.Fatalf("inbox through the link: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if stdout, _, code := runAs(link, "", "send", "--help"); code != 0 || !strings.Contains(stdout, "--from") {
		t.Fatalf("send --help through the link: exit %d, stdout %q", code, stdout)
	}

	// No sidecar: the client build beside it connects itself.
	side.kill(t)
	if stdout, stderr, code := runAs(link, "", "send", "--to", "tm2", "with no sidecar"); code != 0 || !strings.HasPrefix(stdout, "stored seq ") {
		t.Fatalf("send with no sidecar: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if n := stored("with no sidecar"); n != 1 {
		t.Fatalf("stored %d messages with no sidecar, want 1", n)
	}
	// Alone, the lean build says what is missing, and stores nothing.
	if _, stderr, code := runAs(aloneLink, "", "send", "--to", "tm2", "alone"); code != teambus.ExitPermanent || !strings.Contains(stderr, "install teambus-client or teambus beside it") {
		t.Fatalf("the lean build alone with no sidecar: exit %d, stderr %q", code, stderr)
	}
	if n := stored("alone"); n != 0 {
		t.Fatalf("stored %d messages, want 0", n)
	}
}
