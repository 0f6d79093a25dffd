package nodetest

import (
	"testing"

	"github.com/teambus/teambus/node"
)

// NewServer starts a node in a new temporary directory (as NewBareServer
// does) and the team service on it. Both are closed when
// the test ends.
func NewServer(t testing.TB) *node.Node {
	t.Helper()
	return NewServerConfig(t, node.NodeConfig{Dir: t.TempDir()})
}

// NewServerConfig starts a node with cfg (defaults as in
// NewBareServerConfig) that hosts the team service, as `teambus bus
// start` does; with cfg.Dir alone, for example to restart a node on the
// store of an earlier one.
func NewServerConfig(t testing.TB, cfg node.NodeConfig) *node.Node {
	t.Helper()
	if cfg.Attach == nil {
		cfg.Attach = node.Attach(node.Config{})
	}
	return NewBareServerConfig(t, cfg)
}
