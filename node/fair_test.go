package node_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/node/credstore"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/teamapi"
)

// TestFair_LongPollsHoldNoSlot: 300 inbox long-polls of one member take
// none of the service's request slots: another team's member and the
// operator are answered meanwhile, the member's fifth long-poll is
// answered busy at once, and the member's own short requests still run.
func TestFair_LongPollsHoldNoSlot(t *testing.T) {
	e := newSecEnv(t)
	ctx := testCtx(t)
	tm1 := e.member(t)
	alpha, err := teamapi.ForConn(tm1, "alpha", "tm1", "")
	if err != nil {
		t.Fatal(err)
	}
	// beta's tm1, on its own credential.
	admin := nodetest.Connect(t, e.node)
	cr, err := credstore.IssueCreds(ctx, admin, "beta", "tm1", []string{e.node.URL()})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "beta-tm1.creds")
	if err := bus.WriteCreds(file, cr); err != nil {
		t.Fatal(err)
	}
	bc, err := bus.Connect(ctx, bus.ConnectConfig{Creds: file})
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	beta, err := teamapi.ForConn(bc, "beta", "tm1", "")
	if err != nil {
		t.Fatal(err)
	}
	// Empty tm2's inbox of alpha... tm1 reads its own: drain it first so
	// the long-polls wait.
	if _, err := alpha.Inbox(ctx, teamapi.InboxRequest{Mode: teamapi.InboxAck, Max: 100}); err != nil {
		t.Fatal(err)
	}
	const polls = 300
	pctx, stopPolls := context.WithCancel(ctx)
	defer stopPolls()
	type outcome struct {
		err  error
		took time.Duration
	}
	done := make(chan outcome, polls)
	for range polls {
		go func() {
			start := time.Now()
			_, err := alpha.Inbox(pctx, teamapi.InboxRequest{Mode: teamapi.InboxPeek, WaitMS: 20_000})
			done <- outcome{err, time.Since(start)}
		}()
	}
	// The polls past the member's budget come back busy at once.
	busy := 0
	for busy < polls-node.DefaultMemberWaitsBudget {
		select {
		case o := <-done:
			if !errors.Is(o.err, teamapi.ErrBusy) || !errors.Is(o.err, teambus.ErrUnavailable) {
				t.Fatalf("a long-poll past the budget: %v after %s; want busy (transient)", o.err, o.took)
			}
			busy++
		case <-time.After(15 * time.Second):
			t.Fatalf("only %d of %d long-polls past the budget were answered busy", busy, polls-node.DefaultMemberWaitsBudget)
		}
	}
	// Meanwhile another team, the operator and tm1's own short requests
	// are served.
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := beta.Show(sctx, teamapi.ShowRequest{}); err != nil {
		t.Fatalf("beta's show while alpha/tm1 holds long-polls: %v", err)
	}
	if _, err := e.admin.Send(sctx, teamapi.SendRequest{Actor: teamapi.Actor{Team: "beta", Member: teambus.Lead}, To: "tm1", Body: "the operator still sends"}); err != nil {
		t.Fatalf("operator send: %v", err)
	}
	opc, err := teamapi.ForConn(admin, "alpha", teambus.Lead, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := opc.Show(sctx, teamapi.ShowRequest{}); err != nil {
		t.Fatalf("operator show through the service: %v", err)
	}
	if _, err := alpha.Show(sctx, teamapi.ShowRequest{}); err != nil {
		t.Fatalf("tm1's own show beside its long-polls: %v", err)
	}
	// Mail for tm1 ends the polls that wait.
	if _, err := e.admin.Send(sctx, teamapi.SendRequest{Actor: teamapi.Actor{Team: "alpha", Member: teambus.Lead}, To: "tm1", Body: "wake up"}); err != nil {
		t.Fatal(err)
	}
	stopPolls()
}
