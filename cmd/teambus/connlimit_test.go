package main

import "testing"

// `bus start --member-max-connections` below 1 is refused before a node
// starts.
func TestBusStart_MemberMaxConnectionsChecked(t *testing.T) {
	t.Parallel()
	runCLI(t, "bus", "start", "--dir", t.TempDir(), "--member-max-connections", "0").wantError(t, 2, "invalid --member-max-connections 0: at least 1")
}
