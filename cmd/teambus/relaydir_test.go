//go:build unix

package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/relay"
	"github.com/teambus/teambus/team"
)

// A sidecar whose relay directory another local user made logs one
// warning that says the relay is off and why, and serves on.
func TestServeRelay_DirOfAnotherUserWarnsOnce(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to make a directory owned by another user")
	}
	n := nodetest.NewServer(t)
	conn := nodetest.Connect(t, n)
	if conn.NC.Opts.Token == "" {
		t.Skip("the test connection carries no token: the sidecar would serve no relay")
	}
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	dir := filepath.Dir(relay.Path(conn.NC.ConnectedUrl(), "alpha", "tm1"))
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	stop := serveRelay(t.Context(), conn, team.Actor{Team: "alpha", Member: "tm1", Session: "s1"}, log)
	stop()
	out := buf.String()
	if strings.Count(out, "level=WARN") != 1 || !strings.Contains(out, "relay off") || !strings.Contains(out, "belongs to uid 65534") {
		t.Fatalf("sidecar log: %q; want one warning saying the relay is off and why", out)
	}
}
