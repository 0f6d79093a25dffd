package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/teambus/teambus/node/nodetest"
)

// TestMemberCreds_OperatorCommandsRefused: with a member credential, a
// command that needs the operator's credential exits 2 at once, says so,
// and changes nothing; the member verbs work.
func TestMemberCreds_OperatorCommandsRefused(t *testing.T) {
	t.Parallel()
	dir, creds := credsTeam(t)
	home := t.TempDir() // no node here: the credential names the bus
	as := func(args ...string) []string { return append(args, "--dir", home, "--creds", creds) }
	for _, args := range [][]string{
		{"team", "create", "beta"},
		{"team", "list"},
		{"team", "set", "alpha", "--mailbox-max-bytes", "64MiB"},
		{"replay", "--team", "alpha", "--follow"},
		{"teammate", "--team", "alpha", "--member", "tm1", "--session", "s1"},
		{"ui"},
	} {
		runCLI(t, as(args...)...).wantError(t, 2, "needs the operator's credential", "tm1 in team alpha")
	}
	// The lead's commands reach the service, which refuses a member.
	runCLI(t, as("task", "add", "x", "--team", "alpha")...).wantError(t, 2, "can act only as tm1, not as lead")
	runCLI(t, as("team", "probe", "alpha")...).wantError(t, 2, "can act only as tm1, not as lead")
	runCLI(t, as("events", "export", "--team", "alpha")...).wantError(t, 2, "can act only as tm1, not as lead")
	if r := runCLI(t, as("send", "--team", "alpha", "--member", "tm1", "--to", "lead", "hello")...); r.code != 0 {
		t.Fatalf("send with the member credential: %d %s", r.code, r.stderr)
	}
	// Mail tm1 is not part of, and a replay of its own mail through the
	// service that leaves it out.
	evOK(t, append([]string{"send", "--team", "alpha", "--member", "lead", "--to", "tm2", "not for tm1"}, dir...)...)
	r := runCLI(t, as("replay", "--team", "alpha")...)
	if r.code != 0 || !strings.Contains(r.stdout, "hello") || strings.Contains(r.stdout, "not for tm1") {
		t.Fatalf("replay with the member credential: %d %q %s; want tm1's own mail only", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, append([]string{"team", "list", "--json"}, dir...)...)
	if r.code != 0 || strings.Contains(r.stdout, "beta") {
		t.Fatalf("team list after the refusals: %d %q %s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, append([]string{"task", "list", "--team", "alpha", "--json"}, dir...)...)
	if r.code != 0 || strings.Contains(r.stdout, `"x"`) {
		t.Fatalf("task list after the refusals: %d %q %s", r.code, r.stdout, r.stderr)
	}
}

// credsTeam starts a node hosting the team service with team alpha (tm1,
// tm2) and returns the operator's --dir arguments and tm1's credential
// file.
func credsTeam(t *testing.T) (dir []string, creds string) {
	t.Helper()
	n := nodetest.NewServer(t)
	dir = []string{"--dir", n.Dir()}
	if r := runCLI(t, append([]string{"team", "create", "alpha", "--member", "tm1", "--member", "tm2"}, dir...)...); r.code != 0 {
		t.Fatalf("team create: %d %s", r.code, r.stderr)
	}
	creds = filepath.Join(t.TempDir(), "tm1.creds")
	if r := runCLI(t, append([]string{"team", "creds", "alpha", "--member", "tm1", "--out", creds}, dir...)...); r.code != 0 {
		t.Fatalf("team creds: %d %s", r.code, r.stderr)
	}
	return dir, creds
}

// TestLeadCreds_LeadCommands: the lead's credential adds tasks and probes
// its team through the team service, and reaches no other team.
func TestLeadCreds_LeadCommands(t *testing.T) {
	t.Parallel()
	dir, _ := credsTeam(t)
	evOK(t, append([]string{"team", "create", "beta", "--member", "tm1"}, dir...)...)
	creds := filepath.Join(t.TempDir(), "lead.creds")
	evOK(t, append([]string{"team", "creds", "alpha", "--member", "lead", "--out", creds}, dir...)...)
	as := func(args ...string) []string { return append(args, "--dir", t.TempDir(), "--creds", creds) }
	if r := runCLI(t, as("task", "add", "t9", "--team", "alpha", "--desc", "from the lead")...); r.code != 0 || !strings.Contains(r.stdout, "added task t9") {
		t.Fatalf("task add with the lead credential: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, as("team", "probe", "alpha", "--json")...); r.code != 0 || !strings.Contains(r.stdout, `"team": "alpha"`) {
		t.Fatalf("team probe with the lead credential: %d %q %s", r.code, r.stdout, r.stderr)
	}
	runCLI(t, as("task", "add", "t9", "--team", "beta")...).wantError(t, 2, "for member lead of team alpha only")
	// The team's event log and its whole mailbox.
	if r := runCLI(t, as("events", "export", "--team", "alpha")...); r.code != 0 || !strings.Contains(r.stdout, `"task.added"`) && !strings.Contains(r.stdout, `"type"`) {
		t.Fatalf("events export with the lead credential: %d %q %s", r.code, r.stdout, r.stderr)
	}
	evOK(t, append([]string{"send", "--team", "alpha", "--member", "tm1", "--to", "tm2", "between teammates"}, dir...)...)
	if r := runCLI(t, as("replay", "--team", "alpha")...); r.code != 0 || !strings.Contains(r.stdout, "between teammates") {
		t.Fatalf("replay with the lead credential: %d %q %s; want the team's whole mailbox", r.code, r.stdout, r.stderr)
	}
	r := runCLI(t, append([]string{"task", "list", "--team", "beta", "--json"}, dir...)...)
	if r.code != 0 || strings.Contains(r.stdout, `"t9"`) {
		t.Fatalf("task list of beta: %d %q %s", r.code, r.stdout, r.stderr)
	}
}
