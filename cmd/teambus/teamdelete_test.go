package main

import (
	"context"
	"strings"
	"testing"

	"github.com/teambus/teambus/node/credstore"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/team"
)

// flagDefault returns the default value of a string flag of cmd.
func flagDefault(t *testing.T, cmd *cli.Command, name string) int64 {
	t.Helper()
	for _, f := range cmd.Flags {
		if sf, ok := f.(*cli.StringFlag); ok && sf.Name == name {
			n, err := parseSize("--"+name, sf.Value)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no flag --%s", name)
	return 0
}

// teamStreams returns the streams (buckets included) that belong to team.
func teamStreams(t *testing.T, n *node.Node, id string) []string {
	t.Helper()
	js := nodetest.Connect(t, n).JS
	var out []string
	names := js.StreamNames(t.Context())
	for name := range names.Name() {
		if strings.HasSuffix(name, "_"+id) {
			out = append(out, name)
		}
	}
	return out
}

// Issue 12 item 18: on default flags one bus holds at least 1,000 teams.
//
// Arithmetic: a team reserves its stream and bucket limits against the
// store limit: mailbox 32 MiB + event log 16 MiB + state 12 MiB +
// heartbeats 2 MiB = 62 MiB. The default --max-store is 64 GiB = 65,536
// MiB: 65,536 / 62 = 1,057 teams (before: 256 + 128 + 64 + 8 = 456 MiB of
// 8 GiB, 17 teams). The test checks that arithmetic on the real defaults
// and creates 40 teams (more than the 17 that fitted before) on a node
// with the default --max-store.
func TestTeamCreate_ManyTeamsOnDefaults(t *testing.T) {
	t.Parallel()
	maxStore := flagDefault(t, busStartCommand(), "max-store")
	create := teamCreateCommand()
	perTeam := flagDefault(t, create, "mailbox-max-bytes") + flagDefault(t, create, "events-max-bytes") + kv.DefaultStateBytes + kv.HeartbeatBytes
	if got := maxStore / perTeam; got < 1000 {
		t.Fatalf("default --max-store %d holds %d teams of %d bytes, want at least 1,000", maxStore, got, perTeam)
	}
	if maxStore != node.DefaultMaxStore {
		t.Errorf("bus start --max-store default %d, node.DefaultMaxStore %d", maxStore, node.DefaultMaxStore)
	}
	n := nodetest.NewServerConfig(t, node.NodeConfig{MaxStore: maxStore})
	dir := []string{"--dir", n.Dir()}
	for i := range 40 {
		evOK(t, append([]string{"team", "create", "t" + string(rune('a'+i/26)) + string(rune('a'+i%26)), "--member", "tm1"}, dir...)...)
	}
	if out := evOK(t, append([]string{"team", "list", "--json"}, dir...)...); strings.Count(out, "\n") != 40 {
		t.Errorf("team list shows %d teams, want 40", strings.Count(out, "\n"))
	}
}

// Issue 12 item 18: a create that does not fit says why and removes what
// it created.
func TestTeamCreate_NoRoomLeavesNothing(t *testing.T) {
	t.Parallel()
	// Room for two teams of 62 MiB, not three.
	n := nodetest.NewServerConfig(t, node.NodeConfig{MaxStore: 150 << 20})
	dir := []string{"--dir", n.Dir()}
	evOK(t, append([]string{"team", "create", "one", "--member", "tm1"}, dir...)...)
	evOK(t, append([]string{"team", "create", "two", "--member", "tm1"}, dir...)...)
	r := runCLI(t, append([]string{"team", "create", "three", "--member", "tm1"}, dir...)...)
	r.wantError(t, 1, "no room to reserve another team", "nothing was created", "--max-store")
	if left := teamStreams(t, n, "three"); len(left) > 0 {
		t.Errorf("failed create left %v behind", left)
	}
	// Deleting a team frees its reservation.
	evOK(t, append([]string{"team", "delete", "two"}, dir...)...)
	evOK(t, append([]string{"team", "create", "three", "--member", "tm1"}, dir...)...)
}

// Issue 12 item 18: team delete refuses a team with live sidecars unless
// --force, and removes its streams, buckets and credentials.
func TestTeamDelete(t *testing.T) {
	t.Parallel()
	n := nodetest.NewServer(t)
	dir := []string{"--dir", n.Dir()}
	evOK(t, append([]string{"team", "create", "del", "--member", "tm1", "--member", "tm2"}, dir...)...)
	conn := nodetest.Connect(t, n)
	ctx := t.Context()
	if _, err := credstore.IssueCreds(ctx, conn, "del", "tm1", nil); err != nil {
		t.Fatal(err)
	}
	svc := team.New(conn.JS, team.Config{})
	hb := &kv.Heartbeat{Member: "tm1", Session: "s1", Epoch: 1}
	if _, err := svc.Store().Beat(ctx, "del", kv.MemberKey("tm1"), hb, teambus.DefaultPolicy().MemberTimeout, 0); err != nil {
		t.Fatal(err)
	}
	runCLI(t, append([]string{"team", "delete", "del"}, dir...)...).wantError(t, 2, "live sidecars (member.tm1)", "--force")
	if left := teamStreams(t, n, "del"); len(left) != 4 {
		t.Errorf("refused delete changed the team: streams %v", left)
	}
	evOK(t, append([]string{"team", "delete", "del", "--force"}, dir...)...)
	if left := teamStreams(t, n, "del"); len(left) > 0 {
		t.Errorf("delete left %v behind", left)
	}
	auth, err := conn.JS.KeyValue(context.WithoutCancel(ctx), credstore.AuthBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := auth.Get(ctx, "del.tm1"); err == nil {
		t.Errorf("the credential of tm1 survived the delete")
	}
	runCLI(t, append([]string{"team", "delete", "del"}, dir...)...).wantError(t, 2, "not found")
	for _, args := range [][]string{{"team", "abort", "--help"}, {"team", "delete", "--help"}} {
		if out := evOK(t, args...); !strings.Contains(out, "team delete") && !strings.Contains(out, "streams") {
			t.Errorf("%v does not say what it frees:\n%s", args, out)
		}
	}
}
