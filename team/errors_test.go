package team_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/team"
)

// A create the store has no room for is a NoRoomError, matched by type
// (the store's refusal found by its error code, not its text), transient,
// naming no command-line flag, and leaves nothing behind.
func TestCreateTeam_NoRoomIsTyped(t *testing.T) {
	ctx := testCtx(t)
	// Room for two teams of the default limits, not three.
	n := nodetest.NewServerConfig(t, node.NodeConfig{MaxStore: 150 << 20})
	svc := team.New(nodetest.Connect(t, n).JS, team.Config{})
	for _, id := range []string{"one", "two"} {
		if _, err := svc.CreateTeam(ctx, id, "", []team.MemberSpec{{ID: "tm1"}}, teambus.DefaultPolicy()); err != nil {
			t.Fatal(err)
		}
	}
	_, err := svc.CreateTeam(ctx, "three", "", []team.MemberSpec{{ID: "tm1"}}, teambus.DefaultPolicy())
	var noRoom *team.NoRoomError
	if !errors.As(err, &noRoom) || noRoom.Team != "three" || noRoom.Mailbox == 0 {
		t.Fatalf("create with no room: %v, want a NoRoomError", err)
	}
	if teambus.ExitCode(err) != teambus.ExitTransient || !errors.Is(err, teambus.ErrUnavailable) {
		t.Errorf("exit code %d, want transient", teambus.ExitCode(err))
	}
	if strings.Contains(err.Error(), "--") {
		t.Errorf("error names a flag: %v", err)
	}
	if _, err := svc.Team(ctx, "three"); !errors.Is(err, teambus.ErrNotFound) {
		t.Errorf("failed create left team three: %v", err)
	}
}

// A delete refused for live sidecars is a LiveSidecarsError naming them.
func TestDeleteTeam_LiveSidecarsIsTyped(t *testing.T) {
	err := error(&team.LiveSidecarsError{Team: "a", Live: []string{"tm1"}})
	var live *team.LiveSidecarsError
	if !errors.As(err, &live) || teambus.ExitCode(err) != teambus.ExitPermanent || strings.Contains(err.Error(), "--") {
		t.Errorf("LiveSidecarsError: %v (exit %d)", err, teambus.ExitCode(err))
	}
}
