package node_test

import (
	"errors"
	"testing"

	"github.com/teambus/teambus/node/credstore"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// operator is the operator's client acting as m of team.
func (e *env) operator(t *testing.T, teamID, m, session string) *teamapi.Client {
	t.Helper()
	c := nodetest.Connect(t, e.node)
	cl, err := teamapi.ForConn(c, teamID, m, session)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func TestService_ShutdownRequestOnlyFromLead(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	_, err := e.tm1.Send(ctx, teamapi.SendRequest{To: "tm2", Type: teambus.MsgShutdownRequest, Body: "stop"})
	if !errors.Is(err, teambus.ErrInvalid) || teambus.ExitCode(err) != teambus.ExitPermanent {
		t.Fatalf("shutdown_request from tm1 = %v, want refused (exit 2)", err)
	}
	if _, err := e.tm1.Send(ctx, teamapi.SendRequest{To: "tm2", Type: teambus.MsgShutdownResponse, Body: "ok"}); !errors.Is(err, teambus.ErrInvalid) {
		t.Fatalf("shutdown_response to a teammate = %v, want refused", err)
	}
	if _, err := e.tm1.Send(ctx, teamapi.SendRequest{To: teambus.Lead, Type: teambus.MsgShutdownResponse, Body: `approve`}); err != nil {
		t.Fatalf("shutdown_response to the lead: %v", err)
	}
	// The lead's own credential may ask.
	cr, err := credstore.IssueCreds(ctx, nodetest.Connect(t, e.node), "alpha", teambus.Lead, []string{e.node.URL()})
	if err != nil {
		t.Fatal(err)
	}
	lead, err := teamapi.ForConn(connectCreds(t, cr), "alpha", teambus.Lead, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lead.Send(ctx, teamapi.SendRequest{To: "tm2", Type: teambus.MsgShutdownRequest, Body: "stop"}); err != nil {
		t.Fatalf("shutdown_request from the lead: %v", err)
	}
	msgs, err := e.admin.Mailbox("alpha").Inbox(ctx, "tm2", mailbox.InboxOptions{Sidecar: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0].From != teambus.Lead {
		t.Fatalf("tm2 sidecar mail = %+v, want the lead's one request", msgs)
	}
}

// TestService_FencedIncarnation: every write of a replaced session is
// refused with a conflict (exit 3), through the service as directly.
func TestService_FencedIncarnation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	if _, err := e.admin.AddTask(ctx, "alpha", team.TaskSpec{ID: "t1"}); err != nil {
		t.Fatal(err)
	}
	op := e.operator(t, "alpha", "tm1", "s1")
	if _, err := op.JoinSession(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.operator(t, "alpha", "tm1", "s2").JoinSession(ctx); err != nil {
		t.Fatal(err)
	}
	old, err := teamapi.ForConn(e.conn, "alpha", "tm1", "s1")
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"send": func() error { _, err := old.Send(ctx, teamapi.SendRequest{Body: "x"}); return err },
		"claim": func() error {
			_, _, err := old.Do(ctx, teamapi.TaskRequest{Op: teamapi.TaskClaim, ID: "t1"})
			return err
		},
		"checkpoint": func() error { _, err := old.Record(ctx, teamapi.CheckpointRequest{Task: "t1"}); return err },
		"heartbeat":  func() error { _, err := old.Beat(ctx, teamapi.HeartbeatRequest{}); return err },
		"lease":      func() error { _, err := old.Read(ctx, teamapi.InboxLease, 0, 0); return err },
		"ack":        func() error { _, err := old.AckSeqs(ctx, []uint64{1}); return err },
		"replay":     func() error { _, err := old.ReplayPage(ctx, 0, 0); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, teambus.ErrFenced) || teambus.ExitCode(err) != teambus.ExitConflict {
			t.Errorf("%s from the old session = %v (exit %d), want fenced (exit 3)", name, err, teambus.ExitCode(err))
		}
	}
	// The current session works.
	cur, err := teamapi.ForConn(e.conn, "alpha", "tm1", "s2")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := cur.Do(ctx, teamapi.TaskRequest{Op: teamapi.TaskClaim, ID: "t1"}); err != nil {
		t.Fatalf("claim from the current session: %v", err)
	}
}

// TestService_OperatorActsForAMember: with the node token the request
// names the member, and the mail is from that member.
func TestService_OperatorActsForAMember(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	op := e.operator(t, "alpha", "tm2", "")
	if _, err := op.Send(ctx, teamapi.SendRequest{To: "tm1", Body: "from tm2"}); err != nil {
		t.Fatal(err)
	}
	msgs, err := e.tm1.Read(ctx, teamapi.InboxPeek, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0].From != "tm2" {
		t.Fatalf("tm1 inbox = %+v, want one message from tm2", msgs)
	}
	// A member credential can not name another member.
	if _, err := teamapi.ForConn(e.conn, "alpha", "tm2", ""); !errors.Is(err, teambus.ErrInvalid) {
		t.Fatalf("client of tm2 on tm1's credential = %v, want refused", err)
	}
}

// TestService_RefusedWritesNothing: refused requests of a member leave
// every stream of every team as it was: nothing is logged into a team's
// streams, least of all another team's.
func TestService_RefusedWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	admin := nodetest.Connect(t, e.node)
	streams := []string{"TBM_alpha", "TBM_beta", "TBE_alpha", "TBE_beta", "KV_TBS_alpha", "KV_TBS_beta", "KV_TBH_alpha", "KV_TBH_beta"}
	state := func() map[string]jetstream.StreamState {
		out := map[string]jetstream.StreamState{}
		for _, name := range streams {
			st, err := admin.JS.Stream(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			out[name] = st.CachedInfo().State
		}
		return out
	}
	before := state()
	refused := []func() error{
		func() error {
			_, err := e.tm1.Send(ctx, teamapi.SendRequest{To: "tm2", Type: teambus.MsgShutdownRequest, Body: "x"})
			return err
		},
		func() error { _, err := e.tm1.Send(ctx, teamapi.SendRequest{To: "ghost", Body: "x"}); return err },
		func() error { _, err := e.tm1.Send(ctx, teamapi.SendRequest{To: "tm1", Body: "x"}); return err },
		func() error { var v any; return e.tm1.BriefInto(ctx, "tm2", 1, &v) },
		func() error {
			_, err := e.tm1.AckLeased(ctx, []teamapi.Leased{{Message: teambus.Message{Seq: 1}, Token: "$JS.ACK.TBM_beta.in_tm1.1.1.1.1.0"}})
			return err
		},
		func() error {
			_, err := e.tm1.ReleaseLeased(ctx, []teamapi.Leased{{Message: teambus.Message{Seq: 1}, Token: "$JS.API.STREAM.PURGE.TBM_alpha"}})
			return err
		},
		func() error {
			_, _, err := e.tm1.Do(ctx, teamapi.TaskRequest{Op: teamapi.TaskReopen, ID: "nope"})
			return err
		},
		func() error {
			return e.tm1.Call(ctx, teamapi.VerbSend, map[string]any{"member": "tm2", "body": "x"}, nil)
		},
		func() error { return e.tm1.Call(ctx, teamapi.VerbSend, "not an object", nil) },
	}
	for i, call := range refused {
		err := call()
		if err == nil || teambus.ExitCode(err) != teambus.ExitPermanent {
			t.Errorf("refused request %d = %v (exit %d), want exit 2", i, err, teambus.ExitCode(err))
		}
	}
	// A write the member may do, to see that the comparison can fail.
	if _, err := e.tm1.Send(ctx, teamapi.SendRequest{Body: "legit"}); err != nil {
		t.Fatal(err)
	}
	after := state()
	for _, name := range streams {
		b, a := before[name], after[name]
		changed := b.LastSeq != a.LastSeq || b.Msgs != a.Msgs
		// The legitimate send: one message in alpha's mailbox, and the
		// member's activity in alpha's state.
		want := name == "TBM_alpha" || name == "KV_TBS_alpha"
		if changed != want {
			t.Errorf("stream %s: %d msgs (last %d) -> %d msgs (last %d); want changed %v", name, b.Msgs, b.LastSeq, a.Msgs, a.LastSeq, want)
		}
	}
}
