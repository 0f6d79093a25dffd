package bustest

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/teambus/teambus/bus"
)

// NewServer starts a node in a new temporary directory on a random
// loopback port, with SyncModeAlways. The node is closed when the test
// ends.
func NewServer(t testing.TB) *bus.Node {
	t.Helper()
	return NewServerConfig(t, bus.NodeConfig{Dir: t.TempDir()})
}

// NewServerDir starts a node in dir, for example to restart a node on the
// store of an earlier one. The node is closed when the test ends.
func NewServerDir(t testing.TB, dir string) *bus.Node {
	t.Helper()
	return NewServerConfig(t, bus.NodeConfig{Dir: dir})
}

// NewServerConfig starts a node with cfg. An empty Dir is a temporary
// directory, an empty Listen a random loopback port, small store limits
// are used when none are set, and a nil Logger logs through t. The node
// is closed when the test ends.
func NewServerConfig(t testing.TB, cfg bus.NodeConfig) *bus.Node {
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
	n, err := bus.Open(ctx, cfg)
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
func Connect(t testing.TB, n *bus.Node) *bus.Conn {
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

// CheckFor calls f every interval until it returns nil, and fails the test
// with f's last error when timeout passes first.
func CheckFor(t testing.TB, timeout, interval time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %s: %v", timeout, err)
		}
		time.Sleep(interval)
	}
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
