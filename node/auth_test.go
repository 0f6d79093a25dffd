package node_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus/node/credstore"

	"github.com/nats-io/nats.go"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/bus/bustest"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// secEnv is a node with two teams: alpha (tm1, tm2) and beta (tm1), some
// mail for everyone, a task in each, and a credential of alpha's tm1.
type secEnv struct {
	node  *node.Node
	admin *team.Service
	creds *bus.Creds
	file  string
}

func newSecEnv(t *testing.T) *secEnv {
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
		if _, err := svc.AddTask(ctx, tm.id, team.TaskSpec{ID: "t1", Description: "secret plan of " + tm.id}); err != nil {
			t.Fatal(err)
		}
		for _, m := range tm.members {
			if _, err := svc.Send(ctx, teamapi.SendRequest{Actor: team.Actor{Team: tm.id, Member: teambus.Lead}, To: m, Body: "secret for " + tm.id + "/" + m}); err != nil {
				t.Fatal(err)
			}
		}
	}
	cr, err := credstore.IssueCreds(ctx, c, "alpha", "tm1", []string{n.URL()})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "tm1.creds")
	if err := bus.WriteCreds(file, cr); err != nil {
		t.Fatal(err)
	}
	return &secEnv{node: n, admin: svc, creds: cr, file: file}
}

// member connects with the credential file over TCP.
func (e *secEnv) member(t *testing.T) *bus.Conn {
	t.Helper()
	c, err := bus.Connect(testCtx(t), bus.ConnectConfig{Creds: e.file, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("connect with member credential: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// probe is a raw member connection that reports permission violations.
type probe struct {
	nc   *nats.Conn
	errs chan error
}

func (e *secEnv) probe(t *testing.T) *probe {
	t.Helper()
	p := &probe{errs: make(chan error, 64)}
	nc, err := nats.Connect(e.node.URL(),
		nats.UserInfo(e.creds.User, e.creds.Password),
		nats.CustomInboxPrefix(e.creds.InboxPrefix),
		nats.PermissionErrOnSubscribe(true),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case p.errs <- err:
			default:
			}
		}))
	if err != nil {
		t.Fatalf("raw member connection: %v", err)
	}
	t.Cleanup(nc.Close)
	p.nc = nc
	return p
}

// deniedPub publishes a request to subject and asserts that the server
// reports a publish permission violation for exactly that subject and
// that no answer arrives.
func (p *probe) deniedPub(t *testing.T, subject string, data []byte) {
	t.Helper()
	inbox := p.nc.NewInbox()
	sub, err := p.nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := p.nc.PublishRequest(subject, inbox, data); err != nil {
		t.Fatal(err)
	}
	want := `publish to "` + subject + `"`
	deadline := time.After(3 * time.Second)
	for {
		select {
		case err := <-p.errs:
			if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(want)) {
				continue // an earlier probe's
			}
			if m, err := sub.NextMsg(50 * time.Millisecond); err == nil {
				t.Errorf("publish to %s was denied but answered: %q %v", subject, m.Data, m.Header)
			}
			return
		case <-deadline:
			m, err := sub.NextMsg(10 * time.Millisecond)
			t.Fatalf("publish to %s: no permission violation reported (answer %v, %v)", subject, m, err)
		}
	}
}

// deniedSub subscribes to subject and asserts a permission violation.
func (p *probe) deniedSub(t *testing.T, subject string) {
	t.Helper()
	sub, err := p.nc.SubscribeSync(subject)
	if err != nil {
		return // refused at once
	}
	defer sub.Unsubscribe()
	_, err = sub.NextMsg(3 * time.Second)
	if !errors.Is(err, nats.ErrPermissionViolation) {
		t.Errorf("subscribe %s: NextMsg = %v, want a permission violation", subject, err)
	}
}

func TestMemberCreds_DeniedMatrix(t *testing.T) {
	e := newSecEnv(t)
	p := e.probe(t)
	jsReq := func(v any) []byte { b, _ := json.Marshal(v); return b }
	consumerCfg := func(stream, name, filter string) []byte {
		return jsReq(map[string]any{"stream_name": stream, "config": map[string]any{"durable_name": name, "filter_subject": filter, "ack_policy": "explicit", "deliver_subject": "tb.beta.mbx.lead.info.tm1"}})
	}
	pubs := []struct {
		name, subject string
		data          []byte
	}{
		{"consumer on another team's mailbox", "$JS.API.CONSUMER.CREATE.TBM_beta.spy.tb.beta.>", consumerCfg("TBM_beta", "spy", "tb.beta.>")},
		{"consumer on own team's mailbox", "$JS.API.CONSUMER.CREATE.TBM_alpha.spy.tb.alpha.>", consumerCfg("TBM_alpha", "spy", "tb.alpha.>")},
		{"consumer, old form", "$JS.API.CONSUMER.CREATE.TBM_alpha", consumerCfg("TBM_alpha", "", "tb.alpha.>")},
		{"durable consumer", "$JS.API.CONSUMER.DURABLE.CREATE.TBM_alpha.spy", consumerCfg("TBM_alpha", "spy", "tb.alpha.>")},
		{"consumer on own state bucket", "$JS.API.CONSUMER.CREATE.KV_TBS_alpha.w.$KV.TBS_alpha.>", consumerCfg("KV_TBS_alpha", "w", "$KV.TBS_alpha.>")},
		{"pull another member's inbox", "$JS.API.CONSUMER.MSG.NEXT.TBM_alpha.in_tm2", []byte(`{"batch":10,"no_wait":true}`)},
		{"pull another member's sidecar inbox", "$JS.API.CONSUMER.MSG.NEXT.TBM_alpha.sc_tm2", []byte(`{"batch":10,"no_wait":true}`)},
		{"pull the lead's inbox", "$JS.API.CONSUMER.MSG.NEXT.TBM_alpha.in_lead", []byte(`{"batch":10,"no_wait":true}`)},
		{"pull same-named member of another team", "$JS.API.CONSUMER.MSG.NEXT.TBM_beta.in_tm1", []byte(`{"batch":10,"no_wait":true}`)},
		{"ack another member's mail", "$JS.ACK.TBM_alpha.in_tm2.1.3.3.0.0", nil},
		{"info of another member's consumer", "$JS.API.CONSUMER.INFO.TBM_alpha.in_tm2", nil},
		{"list consumers", "$JS.API.CONSUMER.LIST.TBM_alpha", nil},
		{"direct get own mailbox", "$JS.API.DIRECT.GET.TBM_alpha", []byte(`{"seq":1}`)},
		{"direct get own mailbox by subject", "$JS.API.DIRECT.GET.TBM_alpha.tb.alpha.mbx.tm2.info.lead", nil},
		{"direct get other mailbox", "$JS.API.DIRECT.GET.TBM_beta", []byte(`{"seq":1}`)},
		{"msg get own mailbox", "$JS.API.STREAM.MSG.GET.TBM_alpha", []byte(`{"seq":1}`)},
		{"msg get other mailbox", "$JS.API.STREAM.MSG.GET.TBM_beta", []byte(`{"seq":1}`)},
		{"direct get other team's state", "$JS.API.DIRECT.GET.KV_TBS_beta", []byte(`{"multi_last":["$KV.TBS_beta.>"]}`)},
		{"direct get other team's key", "$JS.API.DIRECT.GET.KV_TBS_beta.$KV.TBS_beta.task.t1", nil},
		{"msg get other team's state", "$JS.API.STREAM.MSG.GET.KV_TBS_beta", []byte(`{"seq":1}`)},
		{"msg get own team's state", "$JS.API.STREAM.MSG.GET.KV_TBS_alpha", []byte(`{"seq":1}`)},
		{"info of other team's bucket", "$JS.API.STREAM.INFO.KV_TBS_beta", nil},
		{"info of other team's heartbeats", "$JS.API.DIRECT.GET.KV_TBH_beta", []byte(`{"seq":1}`)},
		{"info of own mailbox stream", "$JS.API.STREAM.INFO.TBM_alpha", nil},
		{"write other team's state", "$KV.TBS_beta.task.t1", []byte(`{"id":"t1","status":"done"}`)},
		{"write other team's heartbeat", "$KV.TBH_beta.member.tm1", []byte(`{}`)},
		{"delete own mailbox", "$JS.API.STREAM.DELETE.TBM_alpha", nil},
		{"purge own mailbox", "$JS.API.STREAM.PURGE.TBM_alpha", nil},
		{"delete own state bucket", "$JS.API.STREAM.DELETE.KV_TBS_alpha", nil},
		{"purge own state bucket", "$JS.API.STREAM.PURGE.KV_TBS_alpha", nil},
		{"update own mailbox", "$JS.API.STREAM.UPDATE.TBM_alpha", jsReq(map[string]any{"name": "TBM_alpha", "subjects": []string{">"}})},
		{"create a stream", "$JS.API.STREAM.CREATE.SPY", jsReq(map[string]any{"name": "SPY", "subjects": []string{"tb.>"}})},
		{"delete a consumer", "$JS.API.CONSUMER.DELETE.TBM_alpha.in_tm2", nil},
		{"list streams", "$JS.API.STREAM.LIST", nil},
		{"stream names", "$JS.API.STREAM.NAMES", nil},
		{"read credentials", "$JS.API.DIRECT.GET.KV_TB_AUTH.$KV.TB_AUTH.alpha.tm2", nil},
		{"write credentials", "$KV.TB_AUTH.alpha.tm2", []byte(`{}`)},
		{"read other team's event log", "$JS.API.DIRECT.GET.TBE_beta", []byte(`{"seq":1}`)},
		{"msg get other team's event log", "$JS.API.STREAM.MSG.GET.TBE_beta", []byte(`{"seq":1}`)},
		{"the team service in the data account", "tbsvc.beta.send", []byte(`{"to":"lead","body":"hi"}`)},
		{"service discovery", "$SRV.PING", nil},
		{"a service import reply", "_R_.x.y", nil},
		{"system account", "$SYS.REQ.SERVER.PING", nil},
		{"reply into the shared inbox", "_INBOX.x", nil},
	}
	// The probe tells denial from silence: the team service answers it.
	if m, err := p.nc.Request(teamapi.MemberServiceSubject(teamapi.VerbInbox), []byte(`{}`), 3*time.Second); err != nil || m.Header.Get(teamapi.ErrorCodeHeader) != "" {
		t.Fatalf("own inbox through the service = %v, %v", m, err)
	}
	// Subjects below tb. are the member's to publish, and reach only its
	// own team's service verbs: the old stream subjects answer nothing.
	for _, subject := range []string{"tb.beta.mbx.lead.info.tm1", "tb.alpha.mbx.lead.info.tm2", "tb.alpha.held.tm2.lead.info", "tb.beta.evt.x.task-claimed", "tb.beta.send", "tb.tbsvc.beta.send"} {
		_, err := p.nc.Request(subject, []byte(`{"id":"x","from":"tm2","to":"lead","type":"info","body":"hi"}`), 2*time.Second)
		if !errors.Is(err, nats.ErrNoResponders) {
			t.Errorf("request %s: %v, want no responders", subject, err)
		}
	}
	for _, tt := range pubs {
		t.Run("pub/"+tt.name, func(t *testing.T) { p.deniedPub(t, tt.subject, tt.data) })
	}
	for _, subject := range []string{
		">", "tb.>", "tb.beta.mbx.>", "tb.alpha.mbx.>", "tb.alpha.mbx.tm2.>", "$KV.TBS_beta.>", "$KV.TBS_alpha.>",
		"_INBOX.>", "_TB_INBOX.>", "_TB_INBOX.alpha.tm2.>", "_TB_INBOX.beta.tm1.>", "_TB_INBOX.alpha.*.>", "$SYS.>", "$JS.>",
	} {
		t.Run("sub/"+subject, func(t *testing.T) { p.deniedSub(t, subject) })
	}

	// Reply-subject injection: the service's answer goes to a server-made
	// reply in the data account and back into the member's own account,
	// where nothing acts on it.
	for _, reply := range []string{"$JS.API.STREAM.DELETE.TBM_alpha", "$JS.API.STREAM.PURGE.TBM_beta", "$JS.API.STREAM.DELETE.KV_TBS_alpha",
		"$JS.API.STREAM.PURGE.KV_TB_AUTH", "tb.beta.mbx.lead.info.tm1", "tbsvc.beta.send", "tb.send", "$KV.TBS_alpha.task.t1"} {
		for _, verb := range []string{teamapi.VerbSend, teamapi.VerbInbox, teamapi.VerbHeartbeat} {
			if err := p.nc.PublishRequest(teamapi.MemberServiceSubject(verb), reply, []byte(`{"to":"tm2","body":"injected"}`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := p.nc.Flush(); err != nil {
		t.Fatal(err)
	}

	// Through the library, a member can not read another team.
	m := e.member(t)
	svc := team.New(m.JS, team.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if snap, err := svc.Store().Snapshot(ctx, "beta"); err == nil {
		t.Errorf("member of alpha read team beta: %+v", snap.Team)
	}
	if _, err := svc.Inbox(ctx, team.Actor{Team: "beta", Member: "tm1"}, mailbox.InboxOptions{}); err == nil {
		t.Errorf("member of alpha read the inbox of beta's tm1")
	}
	if m.Denied() == nil {
		t.Errorf("the denials above were not recorded on the connection")
	}

	// Nothing the probes tried changed anything.
	ctx = testCtx(t)
	admin := nodetest.Connect(t, e.node)
	for _, st := range []string{"TBM_alpha", "TBM_beta", "KV_TBS_alpha", "KV_TBS_beta", "KV_TB_AUTH"} {
		if _, err := admin.JS.Stream(ctx, st); err != nil {
			t.Errorf("stream %s: %v", st, err)
		}
	}
	snap, err := e.admin.Store().Snapshot(ctx, "beta")
	if err != nil {
		t.Fatal(err)
	}
	if tk := snap.Tasks["t1"]; tk == nil || tk.Status != teambus.TaskPending && tk.Status != teambus.TaskAvailable {
		t.Errorf("beta's t1 = %+v, want untouched", tk)
	}
	for _, tm := range []struct{ team, member string }{{"alpha", "tm2"}, {"beta", "tm1"}, {"alpha", teambus.Lead}} {
		msgs, err := e.admin.Mailbox(tm.team).Inbox(ctx, tm.member, mailbox.InboxOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, msg := range msgs {
			if msg.Body == "hi" {
				t.Errorf("%s/%s got a forged message %+v", tm.team, tm.member, msg)
			}
			if msg.Body == "injected" && (tm.team != "alpha" || tm.member != "tm2" || msg.From != "tm1") {
				t.Errorf("%s/%s got injected mail %+v", tm.team, tm.member, msg)
			}
			if msg.Body != "injected" {
				n++ // tm1's own legitimate sends to tm2 above
			}
		}
		if tm.member != teambus.Lead && n != 1 {
			t.Errorf("%s/%s inbox = %d messages, want its one secret still pending", tm.team, tm.member, len(msgs))
		}
	}
}

func TestMemberCreds_AuthRefused(t *testing.T) {
	e := newSecEnv(t)
	ctx := testCtx(t)
	wrong := *e.creds
	wrong.Password = strings.Repeat("0", len(wrong.Password))
	wrongFile := filepath.Join(t.TempDir(), "wrong.creds")
	if err := bus.WriteCreds(wrongFile, &wrong); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		cfg  bus.ConnectConfig
	}{
		{"no credentials", bus.ConnectConfig{Server: e.node.URL()}},
		{"wrong password", bus.ConnectConfig{Creds: wrongFile}},
		{"user without password", bus.ConnectConfig{Server: e.node.URL(), User: e.creds.User}},
		{"unknown member", bus.ConnectConfig{Server: e.node.URL(), User: "alpha.tm9", Pass: e.creds.Password}},
		{"password of another user", bus.ConnectConfig{Server: e.node.URL(), User: "alpha.tm2", Pass: e.creds.Password}},
		{"wildcard user", bus.ConnectConfig{Server: e.node.URL(), User: "alpha.*", Pass: e.creds.Password}},
		{"wrong token", bus.ConnectConfig{Server: e.node.URL(), Token: "not-the-token"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Timeout = time.Second
			c, err := bus.Connect(ctx, tt.cfg)
			if err == nil {
				c.Close()
				t.Fatal("connected")
			}
			if !errors.Is(err, teambus.ErrInvalid) || !strings.Contains(err.Error(), "authorization") {
				t.Errorf("err = %v, want an authorization refusal", err)
			}
		})
	}
	// The node's token still opens everything.
	c, err := bus.Connect(ctx, bus.ConnectConfig{Dir: e.node.Dir()})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	// --user and --password of the member work like its file.
	c, err = bus.Connect(ctx, bus.ConnectConfig{Server: e.node.URL(), User: e.creds.User, Pass: e.creds.Password})
	if err != nil {
		t.Fatalf("user and password of the credential: %v", err)
	}
	c.Close()
}

// TestMemberCreds_Works runs everything a member does with only its
// credential, through the team service: send, inbox, ack, lease, claim,
// checkpoint, complete, heartbeat, brief, replay.
func TestMemberCreds_Works(t *testing.T) {
	e := newSecEnv(t)
	m := e.member(t)
	if m.Creds() == nil || m.Creds().Member != "tm1" {
		t.Fatalf("Creds() = %+v", m.Creds())
	}
	cl, err := teamapi.ForConn(m, "alpha", "tm1", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	for _, to := range []string{teambus.Lead, "tm2", teambus.All} {
		if _, err := cl.Send(ctx, teamapi.SendRequest{To: to, ID: "k-" + to, Body: "hello " + to}); err != nil {
			t.Fatalf("send to %s: %v", to, err)
		}
	}
	if res, err := cl.Send(ctx, teamapi.SendRequest{To: "tm2", ID: "k-tm2", Body: "hello tm2"}); err != nil || !res.Duplicate {
		t.Fatalf("resend = %+v, %v; want a duplicate", res, err)
	}
	msgs, err := cl.Read(ctx, teamapi.InboxPeek, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0].Body != "secret for alpha/tm1" || msgs[0].Token != "" {
		t.Fatalf("inbox = %+v, want the lead's one message", msgs)
	}
	res, err := cl.AckSeqs(ctx, []uint64{msgs[0].Seq})
	if err != nil || len(res.Acked) != 1 {
		t.Fatalf("ack = %+v, %v", res, err)
	}
	if res, err := cl.AckSeqs(ctx, []uint64{msgs[0].Seq}); err != nil || len(res.Already) != 1 {
		t.Fatalf("second ack = %+v, %v; want already", res, err)
	}
	if msgs, err := cl.Read(ctx, teamapi.InboxPeek, 0, 0); err != nil || len(msgs) != 0 {
		t.Fatalf("inbox after ack = %+v, %v", msgs, err)
	}
	// A lease holds the mail until it is acked by token.
	if _, err := e.admin.Send(ctx, teamapi.SendRequest{Actor: team.Actor{Team: "alpha", Member: teambus.Lead}, To: "tm1", Body: "leased"}); err != nil {
		t.Fatal(err)
	}
	leased, err := cl.Read(ctx, teamapi.InboxLease, 0, time.Second)
	if err != nil || len(leased) != 1 || leased[0].Token == "" {
		t.Fatalf("lease = %+v, %v", leased, err)
	}
	forged := []teamapi.Leased{leased[0]}
	forged[0].Token = strings.Replace(forged[0].Token, "in_tm1", "in_tm2", 1)
	if _, err := cl.AckLeased(ctx, forged); !errors.Is(err, teambus.ErrInvalid) {
		t.Fatalf("ack with another member's token = %v, want invalid", err)
	}
	if res, err := cl.AckLeased(ctx, leased); err != nil || len(res.Acked) != 1 {
		t.Fatalf("ack by token = %+v, %v", res, err)
	}
	if _, _, err := cl.Do(ctx, teamapi.TaskRequest{Op: teamapi.TaskClaim, ID: "t1"}); err != nil {
		t.Fatalf("claim: %v", err)
	}
	if _, err := cl.Record(ctx, teamapi.CheckpointRequest{Task: "t1", Done: []string{"read"}, Remaining: []string{"write"}}); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	if _, _, err := cl.Do(ctx, teamapi.TaskRequest{Op: teamapi.TaskComplete, ID: "t1"}); err != nil {
		t.Fatalf("complete: %v", err)
	}
	if _, err := cl.Beat(ctx, teamapi.HeartbeatRequest{Status: teambus.MemberIdle}); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	var b team.Brief
	if err := cl.BriefInto(ctx, "tm1", 5, &b); err != nil || b.Member != "tm1" {
		t.Fatalf("brief = %+v, %v", b, err)
	}
	if err := cl.BriefInto(ctx, "tm2", 5, &b); !errors.Is(err, teambus.ErrInvalid) {
		t.Fatalf("brief of a teammate = %v, want refused", err)
	}
	page, err := cl.ReplayPage(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range page.Messages {
		if msg.To != "tm1" && msg.From != "tm1" && msg.To != teambus.All {
			t.Errorf("replay showed mail of others: %+v", msg)
		}
	}
	if len(page.Messages) != 5 {
		t.Errorf("replay = %d messages, want 5 (3 sent, 2 received)", len(page.Messages))
	}
	if err := m.Denied(); err != nil {
		t.Errorf("a member's own work was denied: %v", err)
	}
	// What the member did is what the operator sees.
	tk, _, err := e.admin.Store().Task(ctx, "alpha", "t1")
	if err != nil || tk.Status != teambus.TaskComplete || tk.AssignedTo != "tm1" {
		t.Errorf("t1 = %+v, %v; want done by tm1", tk, err)
	}
	lead, err := e.admin.Mailbox("alpha").Inbox(ctx, teambus.Lead, mailbox.InboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, msg := range lead {
		got = append(got, msg.From+":"+msg.Body)
	}
	if strings.Join(got, ",") != "tm1:hello lead,tm1:hello all" {
		t.Errorf("lead inbox = %v", got)
	}
}

// TestMemberCreds_ForgedConnect sends CONNECT lines by hand: a member's
// password with an nkey (which the server would show the service as the
// user), a JWT or a token besides it is refused.
func TestMemberCreds_ForgedConnect(t *testing.T) {
	e := newSecEnv(t)
	addr := strings.TrimPrefix(e.node.URL(), "nats://")
	for _, tt := range []struct {
		name, extra string
		ok          bool
	}{
		{"plain password", ``, true},
		{"nkey of a teammate", `,"nkey":"alpha.tm2"`, false},
		// Outside operator mode the server drops a JWT before auth: it never
		// names the user.
		{"jwt (dropped by the server)", `,"jwt":"eyJ0eXAiOiJKV1QifQ.e30.x"`, true},
		{"token besides the password", `,"auth_token":"x"`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			r := bufio.NewReader(conn)
			if _, err := r.ReadString('\n'); err != nil { // INFO
				t.Fatal(err)
			}
			fmt.Fprintf(conn, "CONNECT {\"verbose\":false,\"pedantic\":false,\"protocol\":1,\"headers\":true,\"user\":%q,\"pass\":%q%s}\r\nPING\r\n", e.creds.User, e.creds.Password, tt.extra)
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.HasPrefix(line, "PONG"); got != tt.ok {
				t.Errorf("answer %q, want accepted=%v", strings.TrimSpace(line), tt.ok)
			}
		})
	}
}

func TestMemberCreds_RestartRotateRevoke(t *testing.T) {
	e := newSecEnv(t)
	dir := e.node.Dir()
	if err := e.node.Close(); err != nil {
		t.Fatal(err)
	}
	// A restarted node still knows the credential (it lives in TB_AUTH).
	n := nodetest.NewServerConfig(t, node.NodeConfig{Dir: dir})
	e.node = n
	e.creds.Servers = []string{n.URL()}
	if err := bus.WriteCreds(e.file, e.creds); err != nil {
		t.Fatal(err)
	}
	m := e.member(t)
	admin := nodetest.Connect(t, n)
	ctx := testCtx(t)

	// Issuing again replaces the password: the old one is refused.
	cr2, err := credstore.IssueCreds(ctx, admin, "alpha", "tm1", []string{n.URL()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bus.Connect(ctx, bus.ConnectConfig{Creds: e.file, Timeout: time.Second}); err == nil {
		t.Error("the replaced password still connects")
	}
	file2 := filepath.Join(t.TempDir(), "tm1-2.creds")
	if err := bus.WriteCreds(file2, cr2); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(file2); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("credentials file mode = %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	m2, err := bus.Connect(ctx, bus.ConnectConfig{Creds: file2, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()

	// Revoking closes the open connections and refuses new ones.
	if err := credstore.RevokeCreds(ctx, admin, "alpha", "tm1"); err != nil {
		t.Fatal(err)
	}
	bustest.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		if m.NC.IsConnected() || m2.NC.IsConnected() {
			return errors.New("member connections still open")
		}
		return nil
	})
	if _, err := bus.Connect(ctx, bus.ConnectConfig{Creds: file2, Timeout: time.Second}); err == nil {
		t.Error("a revoked credential connects")
	}
	if err := credstore.RevokeCreds(ctx, admin, "alpha", "tm1"); err != nil {
		t.Errorf("revoking twice: %v", err)
	}
}

func TestIssueCreds_InvalidIDs(t *testing.T) {
	n := nodetest.NewBareServer(t)
	c := nodetest.Connect(t, n)
	for _, tt := range []struct{ team, member string }{
		{"alpha", "*"}, {"alpha", ">"}, {"al.pha", "tm1"}, {"alpha", "tm.1"}, {"*", "tm1"}, {"alpha", ""}, {"", "tm1"}, {"alpha", teambus.All},
	} {
		if _, err := credstore.IssueCreds(testCtx(t), c, tt.team, tt.member, nil); !errors.Is(err, teambus.ErrInvalid) {
			t.Errorf("IssueCreds(%q, %q) = %v, want ErrInvalid", tt.team, tt.member, err)
		}
	}
}

func FuzzMemberPermissions(f *testing.F) {
	f.Add("alpha", "tm1")
	f.Add("a_b", "c")
	f.Add("a", "b_c")
	f.Fuzz(func(t *testing.T, team, member string) {
		if teambus.ValidateID("team", team) != nil || teambus.ValidateMemberID(member) != nil {
			return
		}
		p := node.MemberPermissions(team, member)
		if len(p.Publish.Allow) != 1 || p.Publish.Allow[0] != "tb.>" {
			t.Fatalf("publish allow = %v, want only the member's service subjects", p.Publish.Allow)
		}
		for _, s := range p.Subscribe.Allow {
			for _, tok := range strings.Split(s, ".") {
				if strings.ContainsAny(tok, "*>") && tok != ">" {
					t.Fatalf("rule %q has a wildcard from an id", s)
				}
			}
			if !strings.HasPrefix(s, bus.MemberInboxPrefix(team, member)+".") {
				t.Fatalf("subscribe rule %q is not the member's own inbox", s)
			}
		}
		inbox := bus.MemberInboxPrefix(team, member)
		if got := strings.Split(inbox, "."); len(got) != 3 || got[1] != team || got[2] != member {
			t.Fatalf("inbox prefix %q does not hold team and member as tokens", inbox)
		}
	})
}
