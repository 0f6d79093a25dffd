package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/bus/bustest"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/node/nodetest"
)

func TestBusStatus(t *testing.T) {
	t.Parallel()
	n := nodetest.NewServer(t)

	r := runCLI(t, "bus", "status", "--dir", n.Dir(), "--json")
	if r.code != 0 {
		t.Fatalf("bus status --json: exit %d: %s", r.code, r.stderr)
	}
	var st bus.StatusInfo
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("decode %q: %v", r.stdout, err)
	}
	if st.URL != n.URL() || st.Sync != bus.SyncModeAlways || !st.SyncAlways || st.PID != os.Getpid() {
		t.Errorf("status url %q sync %q/%t pid %d, want %q always/true %d", st.URL, st.Sync, st.SyncAlways, st.PID, n.URL(), os.Getpid())
	}

	// Flags after the command name, text output.
	r = runCLI(t, "bus", "status", "--dir", n.Dir())
	if r.code != 0 {
		t.Fatalf("bus status: exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{n.URL(), "always (fsync before ack)", "teams      none"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("bus status does not contain %q:\n%s", want, r.stdout)
		}
	}
}

func TestBusStatus_Server(t *testing.T) {
	t.Parallel()
	n := nodetest.NewServer(t)
	empty := t.TempDir() // no discovery file: --server and --token decide

	r := runCLI(t, "bus", "status", "--json", "--dir", empty, "--server", n.URL(), "--token", n.Token())
	if r.code != 0 {
		t.Fatalf("bus status --server: exit %d: %s", r.code, r.stderr)
	}
	var st bus.StatusInfo
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("decode %q: %v", r.stdout, err)
	}
	if st.PID != 0 || st.Sync != "" {
		t.Errorf("external bus: pid %d sync %q, want none", st.PID, st.Sync)
	}

	runCLI(t, "bus", "status", "--dir", empty, "--server", n.URL(), "--token", "wrong").wantError(t, 2, "authorization")
	runCLI(t, "bus", "status", "--dir", empty).wantError(t, 1, "no bus node runs in", "teambus bus start")
}

func TestBusStatus_Unreachable(t *testing.T) {
	t.Parallel()
	runCLI(t, "bus", "status", "--dir", t.TempDir(), "--server", "nats://127.0.0.1:1", "--timeout", "2s").wantError(t, 1, "connect to bus")
}

// TestBusStart runs `teambus bus start` in-process until its context is
// cancelled, as SIGINT would.
func TestBusStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type done struct {
		code           int
		stdout, stderr string
	}
	exited := make(chan done, 1)
	go func() {
		var stdout, stderr bytes.Buffer
		code := run(ctx, []string{"teambus", "bus", "start", "--dir", dir, "--listen", "127.0.0.1:0", "--max-store", "64MiB", "--log-format", "json"}, strings.NewReader(""), &stdout, &stderr)
		exited <- done{code, stdout.String(), stderr.String()}
	}()
	bustest.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		select {
		case d := <-exited:
			t.Fatalf("bus start exited early: %d: %s", d.code, d.stderr)
		default:
		}
		_, err := bus.ReadDiscovery(dir)
		return err
	})

	r := runCLI(t, "bus", "status", "--dir", dir)
	if r.code != 0 {
		t.Fatalf("bus status: exit %d: %s", r.code, r.stderr)
	}
	runCLI(t, "bus", "start", "--dir", dir, "--listen", "127.0.0.1:0").wantError(t, 2, "already runs in")

	cancel()
	select {
	case d := <-exited:
		if d.code != 0 || !strings.Contains(d.stderr, `"msg":"bus node ready"`) || !strings.Contains(d.stderr, `"msg":"bus node stopped"`) {
			t.Errorf("bus start: exit %d, stderr %q", d.code, d.stderr)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("bus start did not return after cancel")
	}
	if _, err := os.Stat(filepath.Join(dir, bus.DiscoveryFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("discovery file after stop: %v, want removed", err)
	}
}

// TestBusStop_NoNode: stopping a node that does not run is what was
// asked, so it exits 0 and says so; a second stop after a real one too.
func TestBusStop_NoNode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := runCLI(t, "bus", "stop", "--dir", dir)
	if r.code != 0 || r.stdout != "no bus node was running in "+dir+"\n" || r.stderr != "" {
		t.Errorf("bus stop without a node: exit %d, stdout %q, stderr %q; want 0, no bus node was running", r.code, r.stdout, r.stderr)
	}
}

// TestBusStart_NonLoopbackNamesTheFlag: a non-loopback address is
// refused (exit 2, nothing started) with the flag that allows it.
func TestBusStart_NonLoopbackNamesTheFlag(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--listen", "0.0.0.0:4333"},
		{"--listen", "127.0.0.1:0", "--cluster-listen", "0.0.0.0:6222", "--routes", "nats://127.0.0.1:6223"},
	} {
		dir := t.TempDir()
		runCLI(t, append([]string{"bus", "start", "--dir", dir}, args...)...).wantError(t, 2, "loopback only", "--allow-remote")
		if _, err := bus.ReadDiscovery(dir); err == nil {
			t.Errorf("bus start %v: a node started", args)
		}
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "version", "--json")
	var v struct{ Version, NATSServer string }
	if err := json.Unmarshal([]byte(r.stdout), &v); r.code != 0 || err != nil || v.Version == "" {
		t.Errorf("version --json: exit %d, %q, %v", r.code, r.stdout, err)
	}
	if r := runCLI(t, "version"); r.code != 0 || !strings.HasPrefix(r.stdout, "teambus ") {
		t.Errorf("version: exit %d, %q", r.code, r.stdout)
	}
}

// bus scrub reads every mailbox and event log: exit 0 on a healthy
// store, the damage and exit 2 when a message is missing, a clear exit 2
// for a stream it does not scrub.
func TestBusScrub(t *testing.T) {
	t.Parallel()
	n := nodetest.NewServer(t)
	c := nodetest.Connect(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := mailbox.MailboxPrefix + "scrub"
	if _, err := c.JS.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{"scrubtest.>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if _, err := c.JS.Publish(ctx, "scrubtest.m", []byte("hello")); err != nil {
			t.Fatal(err)
		}
	}
	r := runCLI(t, "bus", "scrub", "--dir", n.Dir())
	if r.code != 0 || !strings.Contains(r.stdout, "read 50 of 50") || !strings.Contains(r.stdout, "no damage found") {
		t.Fatalf("bus scrub of a healthy store: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	st, err := c.JS.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(ctx, 5); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "bus", "scrub", "--dir", n.Dir(), "--stream", name, "--json")
	var res node.ScrubResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("decode %q: %v", r.stdout, err)
	}
	if r.code != 2 || len(res.Damage) != 1 || res.Damage[0].First != 5 || res.Damage[0].Lost != 1 || !strings.Contains(r.stderr, "store damaged") {
		t.Fatalf("bus scrub of a damaged stream: exit %d, %+v, %s", r.code, res, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(n.Dir(), node.ScrubFile)); !os.IsNotExist(err) {
		t.Errorf("position left after a complete scrub: %v", err)
	}
	for _, s := range []string{"TB_AUTH", mailbox.MailboxPrefix + "none"} {
		if r := runCLI(t, "bus", "scrub", "--dir", n.Dir(), "--stream", s); r.code != 2 || !strings.Contains(r.stderr, s) {
			t.Errorf("bus scrub --stream %s: exit %d: %s", s, r.code, r.stderr)
		}
	}
}
