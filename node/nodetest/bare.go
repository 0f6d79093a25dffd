package nodetest

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/node"
)

// NewBareServer starts a node without the team service in a new
// temporary directory on a random loopback port, with SyncModeAlways. The
// node is closed when the test ends.
func NewBareServer(t testing.TB) *node.Node {
	t.Helper()
	return NewBareServerConfig(t, node.NodeConfig{Dir: t.TempDir()})
}

// NewBareServerDir starts a node without the team service in dir, for
// example to restart a node on the store of an earlier one. The node is
// closed when the test ends.
func NewBareServerDir(t testing.TB, dir string) *node.Node {
	t.Helper()
	return NewBareServerConfig(t, node.NodeConfig{Dir: dir})
}

// NewBareServerConfig starts a node with cfg (the team service only when
// cfg.Attach says so). An empty Dir is a temporary
// directory, an empty Listen a random loopback port, small store limits
// are used when none are set, and a nil Logger logs through t. The node
// is closed when the test ends.
func NewBareServerConfig(t testing.TB, cfg node.NodeConfig) *node.Node {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:-1"
	}
	if cfg.MaxStore == 0 {
		cfg.MaxStore = 64 << 30
	}
	if cfg.MaxMemory == 0 {
		cfg.MaxMemory = 64 << 20
	}
	var w *testWriter
	if cfg.Logger == nil {
		w = &testWriter{t: t}
		cfg.Logger = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	n, err := node.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start bus node: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("close bus node: %v", err)
		}
		if w != nil {
			w.stop()
		}
	})
	return n
}

// Connect opens an in-process connection to n, closed when the test ends.
func Connect(t testing.TB, n *node.Node) *bus.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := n.Connect(ctx)
	if err != nil {
		t.Fatalf("connect to bus node: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// testWriter logs through t until the test's node is closed; the server
// may still log from its goroutines after that, when t must not be used.
type testWriter struct {
	mu      sync.Mutex
	t       testing.TB
	stopped bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
}
