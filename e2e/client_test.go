package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus"
)

// clientBin builds the client build (-tags teambus_client) once for the
// test, into dir, named teambus-client.
func clientBin(t *testing.T, dir string) string {
	t.Helper()
	exe := filepath.Join(dir, "teambus-client")
	cmd := exec.Command("go", "build", "-tags", "teambus_client", "-o", exe, "../cmd/teambus")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build teambus-client: %v\n%s", err, out)
	}
	return exe
}

// TestClientBuild_NoServerLinkedAndMemberPathWorks builds teambus-client
// and checks what it is for: it links no nats-server package; a member
// runs its one-shot commands and its sidecar with it (send, inbox --ack, a
// teammate sidecar registering); the node's commands are refused plainly
// with exit 2; and `init claude` run from a teambus with teambus-client
// beside it wires the hooks to teambus-client.
func TestClientBuild_NoServerLinkedAndMemberPathWorks(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-tags", "teambus_client", "../cmd/teambus").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if strings.Contains(string(out), "nats-io/nats-server") {
		t.Fatalf("the client build links nats-server packages:\n%s", grepLines(string(out), "nats-server"))
	}

	binDir := t.TempDir()
	client := clientBin(t, binDir)
	e := newEnv(t)
	e.createTeam("alpha", fastPolicy(), "tm1", "tm2")
	creds := filepath.Join(t.TempDir(), "tm1.creds")
	if _, stderr, code := e.run("team", "creds", "alpha", "--member", "tm1", "--out", creds); code != 0 {
		t.Fatalf("team creds: exit %d: %s", code, stderr)
	}
	runClient := func(args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(client, args...)
		var o, eb strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &eb
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return o.String(), eb.String(), ee.ExitCode()
		} else if err != nil {
			t.Fatalf("run teambus-client %v: %v", args, err)
		}
		return o.String(), eb.String(), 0
	}

	if stdout, stderr, code := runClient("send", "--creds", creds, "--to", "tm2", "hello from the client build"); code != 0 || !strings.HasPrefix(stdout, "stored seq ") {
		t.Fatalf("send: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// tm2 reads it with the full binary: the same bus, the same mail.
	if stdout, stderr, code := e.run("inbox", "--team", "alpha", "--member", "tm2", "--ack"); code != 0 || !strings.Contains(stdout, "hello from the client build") {
		t.Fatalf("inbox of tm2: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	// A teammate sidecar run by the client build registers its member.
	agent := e.agent("tm1-agent")
	side := e.startCmd("tm1-sidecar-client", exec.Command(client, "teammate", "--dir", e.node.Dir(), "--team", "alpha", "--member", "tm1", "--session", "S1", "--pid", fmt.Sprint(agent.Pid()), "--log-level", "debug"))
	e.waitFor(10*time.Second, "tm1 registered by the client build's sidecar", func() error {
		m, _, err := e.svc.Store().Member(context.Background(), "alpha", "tm1")
		if err != nil {
			return err
		}
		if m.Session != "S1" || m.Status == teambus.MemberSpawned {
			return fmt.Errorf("session %q status %s", m.Session, m.Status)
		}
		if side.exited() {
			return fmt.Errorf("sidecar exited:\n%s", side.output())
		}
		return nil
	})

	// With its sidecar up, the member's one-shot commands go through the
	// sidecar's relay (package relay), with the member's credential.
	e.waitFor(10*time.Second, "the sidecar's relay", func() error {
		if !strings.Contains(side.output(), "relay listening") {
			return fmt.Errorf("no relay yet:\n%s", side.output())
		}
		return nil
	})
	if stdout, stderr, code := runClient("send", "--creds", creds, "--session", "S1", "--to", "tm2", "through the relay"); code != 0 || !strings.HasPrefix(stdout, "stored seq ") {
		t.Fatalf("send through the relay: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if !strings.Contains(side.output(), "relay: forwarded") {
		t.Fatalf("the send did not go through the sidecar's relay:\n%s", side.output())
	}
	if stdout, stderr, code := e.run("inbox", "--team", "alpha", "--member", "tm2", "--ack"); code != 0 || !strings.Contains(stdout, "through the relay") {
		t.Fatalf("inbox of tm2: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// A sidecar killed leaves its socket behind: the next command
	// connects itself.
	side.kill(t)
	if stdout, stderr, code := runClient("send", "--creds", creds, "--session", "S1", "--to", "tm2", "after the sidecar died"); code != 0 || !strings.HasPrefix(stdout, "stored seq ") {
		t.Fatalf("send with a dead sidecar: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	for _, args := range [][]string{{"bus", "start"}, {"serve"}, {"demo"}, {"ui"}, {"mcp"}} {
		_, stderr, code := runClient(args...)
		if code != teambus.ExitPermanent || !strings.Contains(stderr, "full teambus binary") {
			t.Errorf("teambus-client %s: exit %d, stderr %q; want exit 2 naming the full binary", strings.Join(args, " "), code, stderr)
		}
	}
	if stdout, _, code := runClient("version", "--json"); code != 0 {
		t.Errorf("version: exit %d", code)
	} else {
		var v struct {
			NATSServer string `json:"nats_server"`
		}
		if err := json.Unmarshal([]byte(stdout), &v); err != nil || v.NATSServer != "not linked" {
			t.Errorf("version --json = %s (%v); want nats_server \"not linked\"", stdout, err)
		}
	}

	// init claude from teambus with teambus-client beside it.
	full := filepath.Join(binDir, "teambus")
	if err := os.Link(bin, full); err != nil {
		b, rerr := os.ReadFile(bin)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if err := os.WriteFile(full, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The client build's mcp hands over to the full build beside it.
	if stdout, stderr, code := runClient("mcp", "--help"); code != 0 || !strings.Contains(stdout, "teambus mcp") {
		t.Errorf("teambus-client mcp --help beside teambus: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	project := t.TempDir()
	cmd := exec.Command(full, "init", "claude", "--scope", "local", "--team", "alpha", "--member", "tm1", "--dir", e.node.Dir())
	cmd.Dir = project
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("init claude: %v\n%s", err, out)
	}
	settings, err := os.ReadFile(filepath.Join(project, ".claude", "settings.local.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(settings), client) {
		t.Errorf("settings do not run %s:\n%s", client, settings)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
