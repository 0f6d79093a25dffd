package faults

import (
	"testing"

	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/node/nodetest"
)

// isolationNode starts the node the attacker suite attacks, as `teambus
// bus start` runs it: a node that hosts the team service, members in their
// team's member account.
func isolationNode(t *testing.T) *node.Node {
	t.Helper()
	return nodetest.NewServer(t)
}
