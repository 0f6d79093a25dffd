// Package nodetest starts a real embedded bus node with the team service
// for tests.
package nodetest

import (
	"testing"

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
// bustest.NewServerConfig) that hosts the team service, as `teambus bus
// start` does.
func NewServerConfig(t testing.TB, cfg bus.NodeConfig) *bus.Node {
	t.Helper()
	if cfg.Attach == nil {
		cfg.Attach = node.Attach(node.Config{})
	}
	return bustest.NewServerConfig(t, cfg)
}
