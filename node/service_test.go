package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/teambus/teambus/node/credstore"

	"github.com/nats-io/nats.go"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// env is a node with the team service, team alpha (tm1, tm2) and beta
// (tm1), and a connection of alpha/tm1's credential.
type env struct {
	node  *node.Node
	admin *team.Service
	conn  *bus.Conn // alpha/tm1's credential over TCP
	tm1   *teamapi.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := testCtx(t)
	n := nodetest.NewServer(t)
	c := nodetest.Connect(t, n)
	svc := team.New(c.JS, team.Config{})
	for _, tm := range []struct {
		id      string
		members []string
	}{{"alpha", []string{"tm1", "tm2"}}, {"beta", []string{"tm1"}}} {
		var specs []team.MemberSpec
		for _, m := range tm.members {
			specs = append(specs, team.MemberSpec{ID: m})
		}
		if _, err := svc.CreateTeam(ctx, tm.id, "", specs, teambus.DefaultPolicy()); err != nil {
			t.Fatal(err)
		}
	}
	cr, err := credstore.IssueCreds(ctx, c, "alpha", "tm1", []string{n.URL()})
	if err != nil {
		t.Fatal(err)
	}
	mc := connectCreds(t, cr)
	cl, err := teamapi.ForConn(mc, "alpha", "tm1", "")
	if err != nil {
		t.Fatal(err)
	}
	return &env{node: n, admin: svc, conn: mc, tm1: cl}
}

func connectCreds(t *testing.T, cr *bus.Creds) *bus.Conn {
	t.Helper()
	mc, err := bus.Connect(testCtx(t), bus.ConnectConfig{Server: cr.Servers[0], User: cr.User, Pass: cr.Password, InboxPrefix: cr.InboxPrefix, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mc.Close)
	return mc
}

func TestService_MemberSendThroughImport(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	res, err := e.tm1.Send(ctx, teamapi.SendRequest{To: "tm2", Body: "hello", ID: "k1"})
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	if res.Seq == 0 || res.Duplicate {
		t.Fatalf("send = %+v, want a new seq", res)
	}
	msgs, err := e.admin.Inbox(ctx, team.Actor{Team: "alpha", Member: "tm2"}, mailbox.InboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0].From != "tm1" || msgs[0].Body != "hello" {
		t.Fatalf("tm2 inbox = %+v, want one message from tm1", msgs)
	}
	// Claiming to be tm2 in the payload is refused.
	raw, _ := json.Marshal(teamapi.SendRequest{Actor: teamapi.Actor{Member: "tm2"}, To: "lead", Body: "forged"})
	msg, err := e.conn.NC.Request(teamapi.MemberServiceSubject(teamapi.VerbSend), raw, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Header.Get(teamapi.ErrorCodeHeader) != string(teamapi.CodeRefused) {
		t.Fatalf("forged member: reply %q %s, want an invalid error", msg.Header.Get(teamapi.ErrorCodeHeader), msg.Data)
	}
}

// TestService_RequestInfo shows what the service sees of a member's
// request: the server's account and user, never the payload's.
func TestService_RequestInfo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := nodetest.Connect(t, e.node)
	sub, err := g.NC.SubscribeSync(teamapi.ServiceSubject("alpha", "probe"))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	// A forged header with the exact key is replaced by the server's.
	req := nats.NewMsg(teamapi.MemberServiceSubject("probe"))
	req.Header.Set(node.RequestInfoHeader, `{"acc":"$G","user":"alpha.tm2"}`)
	if err := e.conn.NC.PublishMsg(req); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ri struct{ Acc, User string }
	if err := json.Unmarshal([]byte(m.Header.Get(node.RequestInfoHeader)), &ri); err != nil {
		t.Fatal(err)
	}
	if ri.Acc != "TBM_alpha" || ri.User != "alpha.tm1" {
		t.Fatalf("request info = %+v, want acc TBM_alpha user alpha.tm1", ri)
	}
}

func TestService_NoServiceNoResponders(t *testing.T) {
	t.Parallel()
	n := nodetest.NewBareServer(t)
	c := nodetest.Connect(t, n)
	cl, err := teamapi.New(c.NC, teamapi.Config{Team: "alpha", Member: "tm1", Operator: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cl.Send(testCtx(t), teamapi.SendRequest{Body: "x"})
	if !errors.Is(err, teambus.ErrUnavailable) {
		t.Fatalf("send without service = %v, want unavailable", err)
	}
}
