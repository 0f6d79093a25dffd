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

// runIn runs the teambus binary with stdin and extra environment and
// returns stdout, stderr and the exit code.
func (e *env) runIn(stdin string, env []string, args ...string) (string, string, int) {
	e.t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errb.String(), 0
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	default:
		e.t.Fatalf("run %v: %v", args, err)
		return "", "", -1
	}
}

// TestSend_BodyLimitOnEveryPath: a body over the team's limit is refused
// with one message and exit 2, and nothing is stored, whatever its size
// (300 KiB is under what a request carries, 1, 2 and 10 MiB over it) and
// whichever way it goes: a connection of its own with the node token, a
// member credential (--creds), a file of messages (--from), and the
// relay of the member's sidecar. An empty body is refused the same ways.
func TestSend_BodyLimitOnEveryPath(t *testing.T) {
	e := newEnv(t)
	e.createTeam("bs", teambus.DefaultPolicy(), "tm1", "tm2") // no lead runs: a fast lead-timeout would put tm1 in zombie mode (sends held) on a slow machine
	creds := filepath.Join(t.TempDir(), "tm1.creds")
	if _, stderr, code := e.run("team", "creds", "bs", "--member", "tm1", "--out", creds); code != 0 {
		t.Fatalf("team creds: exit %d: %s", code, stderr)
	}
	want := func(n int) string {
		return fmt.Sprintf("message body is %d bytes, at most %d: nothing sent; put large content in a file and send its path", n, teambus.DefaultMaxBody)
	}
	refused := func(path string, n int, stdout, stderr string, code int, parts ...string) {
		t.Helper()
		if code != teambus.ExitPermanent || stdout != "" {
			t.Errorf("%s, %d bytes: exit %d, stdout %q, stderr %q; want exit 2", path, n, code, stdout, stderr)
		}
		for _, p := range parts {
			if !strings.Contains(stderr, p) {
				t.Errorf("%s, %d bytes: stderr %q lacks %q", path, n, stderr, p)
			}
		}
	}
	dir := []string{"--dir", e.node.Dir()}
	direct := append([]string{"send", "--team", "bs", "--member", "tm1", "--to", "tm2"}, dir...)
	viaCreds := []string{"send", "--creds", creds, "--to", "tm2"}
	noRelay := []string{"TEAMBUS_NO_RELAY=1"}
	for _, n := range []int{300 << 10, 1 << 20, 2 << 20, 10 << 20} {
		body := strings.Repeat("x", n)
		o, se, code := e.runIn(body, noRelay, append(direct, "-")...)
		refused("node token", n, o, se, code, want(n))
		o, se, code = e.runIn(body, noRelay, append(viaCreds, "-")...)
		refused("--creds", n, o, se, code, want(n))
	}
	for _, n := range []int{300 << 10, 1 << 20, 2 << 20} {
		file := filepath.Join(t.TempDir(), "mail.jsonl")
		lines := `{"to":"tm2","body":"fine"}` + "\n" + `{"to":"tm2","body":"` + strings.Repeat("x", n) + `"}` + "\n"
		if err := os.WriteFile(file, []byte(lines), 0o600); err != nil {
			t.Fatal(err)
		}
		o, se, code := e.runIn("", noRelay, append([]string{"send", "--team", "bs", "--member", "tm1", "--from", file}, dir...)...)
		refused("--from", n, o, se, code, "line 2: "+want(n))
	}
	for _, body := range []string{"", " \n\t"} {
		o, se, code := e.runIn("", noRelay, append(direct, body)...)
		refused("node token", len(body), o, se, code, "message body is", "nothing sent")
		o, se, code = e.runIn("", noRelay, append(viaCreds, body)...)
		refused("--creds", len(body), o, se, code, "message body is", "nothing sent")
	}

	// With tm1's sidecar up, its commands go through the sidecar's relay.
	_, side := e.startTeammate("bs", "tm1", "S1")
	e.waitFor(10*time.Second, "the sidecar's relay", func() error {
		if !strings.Contains(side.output(), "relay listening") {
			return fmt.Errorf("no relay yet")
		}
		return nil
	})
	sends := func() int { return strings.Count(side.output(), "verb=send ") }
	viaRelay := append([]string{"send", "--team", "bs", "--member", "tm1", "--session", "S1", "--to", "tm2"}, dir...)
	for _, n := range []int{300 << 10, 1 << 20, 2 << 20, 10 << 20} {
		o, se, code := e.runIn(strings.Repeat("x", n), nil, append(viaRelay, "-")...)
		refused("relay", n, o, se, code, want(n))
	}
	o, se, code := e.runIn("", nil, append(viaRelay, "")...)
	refused("relay", 0, o, se, code, "message body is empty", "nothing sent")
	// No refused send was forwarded (the 300 KiB one was: the service
	// refused it); the good one is, through the relay.
	if got := sends(); got != 1 {
		t.Errorf("relay forwarded %d sends, want 1 (the 300 KiB one):\n%s", got, side.output())
	}
	if o, se, code := e.runIn("", nil, append(viaRelay, "small enough")...); code != 0 || !strings.HasPrefix(o, "stored seq ") {
		t.Fatalf("send through the relay: exit %d, stdout %q, stderr %q", code, o, se)
	}
	e.waitFor(5*time.Second, "the good send forwarded", func() error {
		if got := sends(); got != 2 {
			return fmt.Errorf("relay forwarded %d sends, want 2", got)
		}
		return nil
	})
	var sent []string
	for _, m := range e.mail("bs") {
		if m.From == "tm1" && m.To == "tm2" {
			sent = append(sent, m.Body)
		}
	}
	if len(sent) != 1 || sent[0] != "small enough" {
		t.Fatalf("tm1 -> tm2 mail stored: %d messages, want only the good send", len(sent))
	}
}
