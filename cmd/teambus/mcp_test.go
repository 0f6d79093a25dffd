package main

import (
	"path/filepath"
	"testing"

	"github.com/teambus/teambus/node/nodetest"
)

// TestMCP_CredsIdentity: a member credential fixes team and member;
// --team or --member that contradict it exit 2 before anything is served,
// and a credential alone is enough (stdin at EOF: the server ends, 0).
func TestMCP_CredsIdentity(t *testing.T) {
	t.Parallel()
	n := nodetest.NewServer(t)
	dir := []string{"--dir", n.Dir()}
	if r := runCLI(t, append([]string{"team", "create", "alpha", "--member", "tm1", "--member", "tm2"}, dir...)...); r.code != 0 {
		t.Fatalf("team create: %d %s", r.code, r.stderr)
	}
	creds := filepath.Join(t.TempDir(), "tm1.creds")
	if r := runCLI(t, append([]string{"team", "creds", "alpha", "--member", "tm1", "--out", creds}, dir...)...); r.code != 0 {
		t.Fatalf("team creds: %d %s", r.code, r.stderr)
	}
	home := t.TempDir() // no node here: the credential names the bus
	runCLI(t, "mcp", "--dir", home, "--creds", creds, "--member", "tm2").wantError(t, 2, "--member tm2", "member tm1 of team alpha only")
	runCLI(t, "mcp", "--dir", home, "--creds", creds, "--team", "beta").wantError(t, 2, "--team beta", "member tm1 of team alpha only")
	if r := runCLI(t, "mcp", "--dir", home, "--creds", creds, "--session", "s-1"); r.code != 0 || r.stdout != "" {
		t.Fatalf("mcp with a member credential at EOF: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}
