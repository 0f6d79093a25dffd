package node_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/bus/bustest"
	"github.com/teambus/teambus/member"
	"github.com/teambus/teambus/team"
)

// TestCluster_NoLeaderIsTransient: on a cluster of three, a send to a
// team that does not exist is permanent (the server says its mailbox is
// not found), while a send to a team whose mailbox has no leader (two of
// the three nodes gone: no quorum, no election can finish) is transient,
// bus.ErrNoLeader, exit 1 — directly on the mailbox and through the team
// service — and never "has no mailbox".
func TestCluster_NoLeaderIsTransient(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster election takes a few seconds")
	}
	nodes := newCluster(t, 3)
	admin := connectReady(t, bus.ConnectConfig{Server: nodes[0].URL(), Token: "cluster-token"}, 3)
	ctx := testCtx(t)
	svc := team.New(admin.JS, team.Config{})
	bustest.CheckFor(t, 10*time.Second, 200*time.Millisecond, func() error {
		_, err := svc.CreateTeam(ctx, "cl", "", []team.MemberSpec{{ID: "tm1"}}, teambus.DefaultPolicy())
		if err != nil && strings.Contains(err.Error(), "already exists") {
			return nil
		}
		return err
	})
	msg := func(id string) *teambus.Message {
		return &teambus.Message{ID: id, From: teambus.Lead, To: "tm1", Type: teambus.MsgInfo, Body: "hello"}
	}
	if _, err := bus.NewMailbox(admin.JS, "cl", bus.MailboxConfig{}).Send(ctx, msg("m1"), false); err != nil {
		t.Fatalf("send with a leader: %v", err)
	}
	_, err := bus.NewMailbox(admin.JS, "nosuch", bus.MailboxConfig{}).Send(ctx, msg("m1"), false)
	if !errors.Is(err, teambus.ErrNotFound) || errors.Is(err, bus.ErrNoLeader) || !strings.Contains(err.Error(), "has no mailbox") {
		t.Fatalf("send to a team that does not exist = %v, want ErrNotFound has no mailbox", err)
	}

	cl, err := member.ForConn(admin, "cl", teambus.Lead, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := nodes[1].Close(); err != nil {
		t.Fatal(err)
	}
	if err := nodes[2].Close(); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = bus.NewMailbox(admin.JS, "cl", bus.MailboxConfig{}).Send(sctx, msg("m2"), false)
	if !errors.Is(err, bus.ErrNoLeader) || errors.Is(err, teambus.ErrNotFound) || teambus.ExitCode(err) != teambus.ExitTransient {
		t.Errorf("send without a leader = %v (exit %d), want bus.ErrNoLeader, exit 1", err, teambus.ExitCode(err))
	}
	if err != nil && strings.Contains(err.Error(), "--") {
		t.Errorf("library error %q names a command-line flag", err)
	}
	// Through the team service (its instance on the node left), with the
	// client's own retries within its timeout.
	start := time.Now()
	_, err = cl.Send(sctx, member.SendRequest{ID: "m3", To: "tm1", Body: "hello"})
	if errors.Is(err, teambus.ErrNotFound) || teambus.ExitCode(err) != teambus.ExitTransient {
		t.Errorf("service send without a leader = %v (exit %d), want exit 1", err, teambus.ExitCode(err))
	}
	t.Logf("service send without a leader: %v after %v", err, time.Since(start).Round(time.Millisecond))
}
