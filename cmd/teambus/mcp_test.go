package main

import (
	"testing"
)

// TestMCP_CredsIdentity: a member credential fixes team and member;
// --team or --member that contradict it exit 2 before anything is served,
// and a credential alone is enough (stdin at EOF: the server ends, 0).
func TestMCP_CredsIdentity(t *testing.T) {
	t.Parallel()
	_, creds := credsTeam(t)
	home := t.TempDir() // no node here: the credential names the bus
	runCLI(t, "mcp", "--dir", home, "--creds", creds, "--member", "tm2").wantError(t, 2, "--member tm2", "member tm1 of team alpha only")
	runCLI(t, "mcp", "--dir", home, "--creds", creds, "--team", "beta").wantError(t, 2, "--team beta", "member tm1 of team alpha only")
	if r := runCLI(t, "mcp", "--dir", home, "--creds", creds, "--session", "s-1"); r.code != 0 || r.stdout != "" {
		t.Fatalf("mcp with a member credential at EOF: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}
