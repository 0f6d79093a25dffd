package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/teambus/teambus/relay"
)

// readCounter is stdin that counts what was read from it.
type readCounter struct {
	r *strings.Reader
	n int
}

func (rc *readCounter) Read(p []byte) (int, error) {
	n, err := rc.r.Read(p)
	rc.n += n
	return n, err
}

// TestRun_HandsOverBeforeReadingAnything: what the lean build does not
// run itself — another command, help, --from, --creds, a bad command line,
// no relay to reach, the relay turned off — it hands over having printed
// nothing and read nothing of stdin, so the build it hands over to gets
// the command whole.
func TestRun_HandsOverBeforeReadingAnything(t *testing.T) {
	dir := t.TempDir() // a node directory with no node: no relay
	t.Setenv("TEAMBUS_DIR", dir)
	t.Setenv("TEAMBUS_TEAM", "alpha")
	t.Setenv("TEAMBUS_MEMBER", "tm1")
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	for _, tt := range []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"no command", nil, []string{"teambus"}},
		{"another command", nil, []string{"teambus", "inbox", "--ack"}},
		{"a root flag first", nil, []string{"teambus", "--dir", dir, "send", "x"}},
		{"help", nil, []string{"teambus", "send", "-", "--help"}},
		{"help short", nil, []string{"teambus", "send", "-h"}},
		{"from a file", nil, []string{"teambus", "send", "--from", "-"}},
		{"a credentials file", nil, []string{"teambus", "send", "--creds", "/nonexistent", "-"}},
		{"a credentials file in the environment", map[string]string{"TEAMBUS_CREDS": "/nonexistent"}, []string{"teambus", "send", "-"}},
		{"no body", nil, []string{"teambus", "send"}},
		{"two bodies", nil, []string{"teambus", "send", "-", "x"}},
		{"an unknown flag", nil, []string{"teambus", "send", "--bogus", "-"}},
		{"a bad team", map[string]string{"TEAMBUS_TEAM": "Bad Team"}, []string{"teambus", "send", "-"}},
		{"no member", map[string]string{"TEAMBUS_MEMBER": ""}, []string{"teambus", "send", "-"}},
		{"a bad timeout", nil, []string{"teambus", "send", "--timeout", "0s", "-"}},
		{"no node to find", nil, []string{"teambus", "send", "-"}},
		{"a server without a token", nil, []string{"teambus", "send", "--server", "nats://127.0.0.1:1", "-"}},
		{"the relay turned off", map[string]string{relay.DisableEnv: "1"}, []string{"teambus", "send", "-"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			stdin := &readCounter{r: strings.NewReader("a body\n")}
			var stdout, stderr bytes.Buffer
			_, handOver := run(context.Background(), tt.args, stdin, &stdout, &stderr)
			if !handOver || stdin.n != 0 || stdout.Len() != 0 || stderr.Len() != 0 {
				t.Fatalf("%q: hand over %t, read %d bytes of stdin, stdout %q, stderr %q; want a hand-over having read and printed nothing", tt.args, handOver, stdin.n, stdout.String(), stderr.String())
			}
		})
	}
}

// TestRun_RelayWithATokenAndNoSidecar: a node directory whose discovery
// file names a bus, but no sidecar listens: the send hands over.
func TestRun_RelayWithATokenAndNoSidecar(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, discoveryFile), []byte(`{"url":"nats://127.0.0.1:4222","token":"secret"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	stdin := &readCounter{r: strings.NewReader("a body\n")}
	var stdout, stderr bytes.Buffer
	_, handOver := run(context.Background(), []string{"teambus", "send", "--dir", dir, "--team", "alpha", "--member", "tm1", "-"}, stdin, &stdout, &stderr)
	if !handOver || stdin.n != 0 || stdout.Len() != 0 || stderr.Len() != 0 {
		t.Fatalf("hand over %t, read %d, stdout %q, stderr %q", handOver, stdin.n, stdout.String(), stderr.String())
	}
}
