// Package nodetest starts a real embedded bus node with the team service
// for tests.
package nodetest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/bus/bustest"
	"github.com/teambus/teambus/node"
)

// NewServer starts a node in a new temporary directory (as
// bustest.NewServer does) and the team service on it. Both are closed when
// the test ends.
func NewServer(t testing.TB) *bus.Node {
	t.Helper()
	return NewServerConfig(t, bus.NodeConfig{Dir: t.TempDir()})
}

// NewServerDir starts a node with the team service in dir.
func NewServerDir(t testing.TB, dir string) *bus.Node {
	t.Helper()
	return NewServerConfig(t, bus.NodeConfig{Dir: dir})
}

// NewServerConfig starts a node with cfg (defaults as in
// bustest.NewServerConfig) and the team service on it.
func NewServerConfig(t testing.TB, cfg bus.NodeConfig) *bus.Node {
	t.Helper()
	n := bustest.NewServerConfig(t, cfg)
	Serve(t, n)
	return n
}

// Serve starts the team service on n over an in-process connection,
// stopped when the test ends.
func Serve(t testing.TB, n *bus.Node) *node.Service {
	t.Helper()
	nc, err := nats.Connect("", nats.InProcessServer(n.InProcess()), nats.Token(n.Token()), nats.Name("teambus-service"))
	if err != nil {
		t.Fatalf("connect team service: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := node.Open(ctx, nc, node.Config{})
	if err != nil {
		nc.Close()
		t.Fatalf("start team service: %v", err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		nc.Close()
	})
	return s
}
