package main

import (
	"testing"

	"github.com/teambus/teambus/teamapi"
)

// TestMemberCommands: every command a member credential may run goes
// through a verb of the team service (mcp through all of them).
func TestMemberCommands(t *testing.T) {
	for cmd, verb := range memberCommands {
		if cmd != "mcp" && !teamapi.IsVerb(verb) {
			t.Errorf("command %q: %q is no verb of the team service", cmd, verb)
		}
	}
}
