package faults

import (
	"testing"

	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/bus/bustest"
)

// isolationNode starts the node the attacker suite attacks, as `teambus
// bus start` runs it. It is the one line to change when the node's start
// changes (a node that hosts the team service).
func isolationNode(t *testing.T) *bus.Node {
	t.Helper()
	return bustest.NewServer(t)
}
