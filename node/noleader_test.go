package node_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/bus/bustest"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
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
	if _, err := mailbox.NewMailbox(admin.JS, "cl", mailbox.MailboxConfig{}).Send(ctx, msg("m1"), false); err != nil {
		t.Fatalf("send with a leader: %v", err)
	}
	_, err := mailbox.NewMailbox(admin.JS, "nosuch", mailbox.MailboxConfig{}).Send(ctx, msg("m1"), false)
	if !errors.Is(err, teambus.ErrNotFound) || errors.Is(err, bus.ErrNoLeader) || !strings.Contains(err.Error(), "has no mailbox") {
		t.Fatalf("send to a team that does not exist = %v, want ErrNotFound has no mailbox", err)
	}

	cl, err := teamapi.ForConn(admin, "cl", teambus.Lead, "")
	if err != nil {
		t.Fatal(err)
	}
	// A leader election (the mailbox's leader steps down) while sends go
	// on: each is stored (the retry covers the election) or, if the
	// election outlasts it, transient; never "has no mailbox".
	// The new leader is n1, which stays when the others go below.
	if _, err := admin.NC.RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+mailbox.MailboxPrefix+"cl", []byte(`{"placement":{"preferred":"n1"}}`)); err != nil {
		t.Fatalf("leader stepdown: %v", err)
	}
	for i := range 5 {
		_, err := cl.Send(ctx, teamapi.SendRequest{ID: fmt.Sprintf("e%d", i), To: "tm1", Body: "during the election"})
		if err != nil && (errors.Is(err, teambus.ErrNotFound) || teambus.ExitCode(err) != teambus.ExitTransient) {
			t.Errorf("send during an election = %v (exit %d), want stored or exit 1", err, teambus.ExitCode(err))
		}
		t.Logf("send %d during an election: %v", i, err)
	}
	bustest.CheckFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		st, err := admin.JS.Stream(ctx, mailbox.MailboxPrefix+"cl")
		if err != nil {
			return err
		}
		if info := st.CachedInfo(); info.Cluster == nil || info.Cluster.Leader != "n1" {
			return fmt.Errorf("mailbox leader %+v, want n1", info.Cluster)
		}
		return nil
	})

	if err := nodes[1].Close(); err != nil {
		t.Fatal(err)
	}
	if err := nodes[2].Close(); err != nil {
		t.Fatal(err)
	}
	// Without a quorum no leader can be elected: the send fails, and it
	// is transient. n1 notices it lost its peers and stops leading: the
	// publish then meets no responders, and the stream, which the
	// server does not say is missing, is still electing (bus.ErrNoLeader).
	// A publish sent while n1 still believes it leads times out instead:
	// transient too.
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = mailbox.NewMailbox(admin.JS, "cl", mailbox.MailboxConfig{}).Send(sctx, msg("m2"), false)
	if err == nil || errors.Is(err, teambus.ErrNotFound) || teambus.ExitCode(err) != teambus.ExitTransient {
		t.Errorf("send without a leader = %v (exit %d), want exit 1", err, teambus.ExitCode(err))
	}
	if err != nil && strings.Contains(err.Error(), "--") {
		t.Errorf("library error %q names a command-line flag", err)
	}
	t.Logf("send without a leader: %v (ErrNoLeader: %t)", err, errors.Is(err, bus.ErrNoLeader))
	// Through the team service (its instance on the node left), with the
	// client's own retries within its timeout.
	sctx, cancel = context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err = cl.Send(sctx, teamapi.SendRequest{ID: "m3", To: "tm1", Body: "hello"})
	if err == nil || errors.Is(err, teambus.ErrNotFound) || teambus.ExitCode(err) != teambus.ExitTransient {
		t.Errorf("service send without a leader = %v (exit %d), want exit 1", err, teambus.ExitCode(err))
	}
	t.Logf("service send without a leader: %v (ErrNoLeader: %t) after %v", err, errors.Is(err, bus.ErrNoLeader), time.Since(start).Round(time.Millisecond))
}

// TestNoResponse_Classified: the JetStream errors of a stream nobody
// answers for are told apart by errors.Is and the API error codes, from
// a real server: a publish to a subject no stream takes is a NoResponse,
// and the stream then StreamMissing; an existing stream is not.
func TestNoResponse_Classified(t *testing.T) {
	n := nodetest.NewBareServer(t)
	c := nodetest.Connect(t, n)
	ctx := testCtx(t)
	_, err := c.JS.Publish(ctx, "tb.nosuch.mbx.tm1.info.lead", []byte("x"))
	if !bus.NoResponse(err) || bus.Electing(err) {
		t.Fatalf("publish without a stream = %v: NoResponse %t, Electing %t; want NoResponse only", err, bus.NoResponse(err), bus.Electing(err))
	}
	if !bus.StreamMissing(ctx, c.JS, mailbox.MailboxPrefix+"nosuch") {
		t.Errorf("StreamMissing of a stream that does not exist = false")
	}
	mb := mailbox.NewMailbox(c.JS, "here", mailbox.MailboxConfig{})
	if err := mb.Declare(ctx); err != nil {
		t.Fatal(err)
	}
	if bus.StreamMissing(ctx, c.JS, mb.Stream()) {
		t.Errorf("StreamMissing of a stream that exists = true")
	}
	_, err = mailbox.NewMailbox(c.JS, "nosuch", mailbox.MailboxConfig{}).Send(ctx, &teambus.Message{ID: "m1", From: teambus.Lead, To: "tm1", Type: teambus.MsgInfo, Body: "x"}, false)
	if !errors.Is(err, teambus.ErrNotFound) || errors.Is(err, bus.ErrNoLeader) {
		t.Errorf("send to a team without a mailbox = %v, want ErrNotFound", err)
	}
}
