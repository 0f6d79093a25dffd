package faults

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/teambus/teambus/node/credstore"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// The attacker suite (issue 10). A real node holds two teams, alpha (lead,
// tm1, tm2) and beta (lead, tm1), with mail, tasks, checkpoints, events and
// state in both. The attacker holds only alpha/tm1's member credential and
// a raw nats.go connection (and a raw TCP one for CONNECT forgery). Each
// row of isolationAttacks runs against a fresh node:
//
//  1. the attacker connects and subscribes (its own inbox prefix, and for
//     one row every wildcard and other inbox it can name);
//  2. the operator makes secret traffic (mail to and from tm2 and beta,
//     reads of tm2's inbox) while those subscriptions are live;
//  3. the operator snapshots every stream (state, every message, durable
//     consumers' positions), which covers every KV key's revisions and
//     every team's replay;
//  4. the attack runs; the attacker flushes; the snapshots are polled until
//     they stop changing;
//  5. the change is judged: every stored message must still be there
//     (except older revisions of tm1's own keys), and every new message
//     must be tm1's own legitimate write: mail from tm1 (never a
//     shutdown_request, a shutdown reply only to the lead), tm1's own
//     activity, heartbeat or member record (a valid record, never a
//     payload of the attacker's), a task tm1 holds or held, an event of
//     alpha's log that is not the attacker's text; nothing else in any
//     stream of any team. No durable consumer of another member may move,
//     and nothing of another team or member may be received.
//
// Every attack payload carries attackMark; the operator's secret mail
// carries secretMark. A failure names the row and what got through.

const (
	attackMark = "ATTACK-by-alpha-tm1"
	secretMark = "SECRET"
	legitMark  = "LEGIT"
)

// isoWorld is one node with the two teams and the attacker's credential.
type isoWorld struct {
	t     *testing.T
	node  *node.Node
	op    *bus.Conn
	svc   *team.Service
	creds *bus.Creds
	pol   teambus.Policy
}

func newIsoWorld(t *testing.T) *isoWorld {
	t.Helper()
	n := isolationNode(t)
	op := nodetest.Connect(t, n)
	w := &isoWorld{t: t, node: n, op: op, svc: team.New(op.JS, team.Config{}), pol: teambus.DefaultPolicy()}
	ctx := isoCtx(t)
	for _, tm := range []struct {
		id      string
		members []string
		tasks   []string
	}{
		{"alpha", []string{"tm1", "tm2"}, []string{"a1", "a2", "a3"}},
		{"beta", []string{"tm1"}, []string{"b1", "b2"}},
	} {
		var specs []team.MemberSpec
		for _, m := range tm.members {
			specs = append(specs, team.MemberSpec{ID: m})
		}
		if _, err := w.svc.CreateTeam(ctx, tm.id, "L-"+tm.id, specs, w.pol); err != nil {
			t.Fatalf("create team %s: %v", tm.id, err)
		}
		for _, m := range tm.members {
			if _, err := w.svc.Join(ctx, tm.id, m, "s-"+m); err != nil {
				t.Fatalf("join %s/%s: %v", tm.id, m, err)
			}
		}
		for _, id := range tm.tasks {
			if _, err := w.svc.AddTask(ctx, tm.id, team.TaskSpec{ID: id, Description: "task " + id}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// tm2 of alpha and tm1 of beta hold a task with a checkpoint.
	for _, h := range []struct{ team, member, task string }{{"alpha", "tm2", "a1"}, {"beta", "tm1", "b1"}} {
		a := team.Actor{Team: h.team, Member: h.member, Session: "s-" + h.member}
		if _, err := w.svc.Claim(ctx, a, h.task); err != nil {
			t.Fatal(err)
		}
		if _, err := w.svc.Checkpoint(ctx, teamapi.CheckpointRequest{Actor: a, Task: h.task, LastAction: "working on " + h.task}); err != nil {
			t.Fatal(err)
		}
	}
	w.traffic(ctx, "setup", true)
	cr, err := credstore.IssueCreds(ctx, op, "alpha", "tm1", []string{n.URL()})
	if err != nil {
		t.Fatal(err)
	}
	w.creds = cr
	return w
}

func isoCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// traffic is mail the attacker must never see: to and from tm2 and
// within beta, and a read of tm2's inbox (replies on the operator's
// inbox). Only mail to alpha/tm1 or to all of alpha is its to read.
func (w *isoWorld) traffic(ctx context.Context, round string, readTM2 bool) {
	w.t.Helper()
	for _, s := range []struct {
		team, from, to string
	}{
		{"alpha", teambus.Lead, "tm2"},
		{"alpha", "tm2", teambus.Lead},
		{"beta", teambus.Lead, "tm1"},
		{"beta", "tm1", teambus.Lead},
	} {
		a := team.Actor{Team: s.team, Member: s.from, Session: "s-" + s.from}
		if s.from == teambus.Lead {
			a.Session = "L-" + s.team
		}
		body := fmt.Sprintf("%s %s %s/%s to %s", secretMark, round, s.team, s.from, s.to)
		if _, err := w.svc.Send(ctx, teamapi.SendRequest{Actor: a, To: s.to, Body: body}); err != nil {
			w.t.Fatalf("secret traffic: %v", err)
		}
	}
	if _, err := w.svc.Send(ctx, teamapi.SendRequest{Actor: team.Actor{Team: "alpha", Member: teambus.Lead, Session: "L-alpha"}, To: "tm1", Body: "work for tm1 " + round}); err != nil {
		w.t.Fatal(err)
	}
	if !readTM2 {
		return
	}
	if _, err := w.svc.Inbox(ctx, team.Actor{Team: "alpha", Member: "tm2", Session: "s-tm2"}, mailbox.InboxOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// attacker is alpha/tm1's raw connection and what it received.
type attacker struct {
	w      *isoWorld
	nc     *nats.Conn
	prefix string
	mu     sync.Mutex
	got    []received
	errs   []string
}

type received struct {
	sub, subject string
	data         []byte
}

func (w *isoWorld) attacker(opts ...nats.Option) *attacker {
	w.t.Helper()
	a := &attacker{w: w, prefix: w.creds.InboxPrefix}
	opts = append([]nats.Option{
		nats.UserInfo(w.creds.User, w.creds.Password),
		nats.CustomInboxPrefix(w.creds.InboxPrefix),
		nats.Name("attacker"),
		nats.MaxReconnects(-1),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			a.mu.Lock()
			a.errs = append(a.errs, err.Error())
			a.mu.Unlock()
		}),
	}, opts...)
	nc, err := nats.Connect(w.node.URL(), opts...)
	if err != nil {
		w.t.Fatalf("attacker connect: %v", err)
	}
	w.t.Cleanup(nc.Close)
	a.nc = nc
	a.subscribe(a.prefix + ".>")
	return a
}

// subscribe records everything delivered on subject.
func (a *attacker) subscribe(subject string) {
	_, _ = a.nc.Subscribe(subject, func(m *nats.Msg) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.got = append(a.got, received{sub: subject, subject: m.Subject, data: append([]byte(nil), m.Data...)})
	})
}

func (a *attacker) pub(subject, reply string, hdr nats.Header, data []byte) {
	m := &nats.Msg{Subject: subject, Reply: reply, Data: data, Header: hdr}
	_ = a.nc.PublishMsg(m)
}

// leaks returns what the attacker received that is another team's or
// member's: anything outside its own inbox prefix, and anything carrying
// the secret traffic.
func (a *attacker) leaks() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, r := range a.got {
		switch {
		case bytes.Contains(r.data, []byte(secretMark)):
			out = append(out, fmt.Sprintf("received secret traffic on %s (subscribed %s): %.160s", r.subject, r.sub, r.data))
		case r.sub != a.prefix+".>" && !strings.HasPrefix(r.subject, a.prefix+".") && !ownMail(r.subject):
			out = append(out, fmt.Sprintf("received %s outside its inbox (subscribed %s): %.120s", r.subject, r.sub, r.data))
		}
	}
	return out
}

// ownMail reports whether subject is mail alpha/tm1 may read (JetStream
// delivers it to the reader's inbox under its stored subject).
func ownMail(subject string) bool {
	for _, p := range []string{"tb.alpha.mbx.tm1.", "tb.alpha.mbx.all.", "tb.alpha.ctl.tm1."} {
		if strings.HasPrefix(subject, p) {
			return true
		}
	}
	return false
}

// --- snapshots -------------------------------------------------------

type storedMsg struct {
	subject string
	data    []byte
}

type consumerPos struct{ delivered, ackFloor uint64 }

type streamSnap struct {
	state     jetstream.StreamState
	msgs      map[uint64]storedMsg
	consumers map[string]consumerPos
}

type worldSnap map[string]*streamSnap

// snapshot reads every stream of the node with the operator's connection:
// its state, every message, and the positions of its durable consumers.
func (w *isoWorld) snapshot(ctx context.Context) worldSnap {
	w.t.Helper()
	out := worldSnap{}
	names := w.op.JS.StreamNames(ctx)
	for name := range names.Name() {
		st, err := w.op.JS.Stream(ctx, name)
		if err != nil {
			w.t.Fatalf("snapshot stream %s: %v", name, err)
		}
		info := st.CachedInfo()
		s := &streamSnap{state: info.State, msgs: map[uint64]storedMsg{}, consumers: map[string]consumerPos{}}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
			m, err := st.GetMsg(ctx, seq)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				continue
			}
			if err != nil {
				w.t.Fatalf("snapshot %s seq %d: %v", name, seq, err)
			}
			s.msgs[seq] = storedMsg{subject: m.Subject, data: m.Data}
		}
		cl := st.ListConsumers(ctx)
		for ci := range cl.Info() {
			if ci.Config.Durable == "" {
				continue
			}
			s.consumers[ci.Name] = consumerPos{delivered: ci.Delivered.Stream, ackFloor: ci.AckFloor.Stream}
		}
		if err := cl.Err(); err != nil {
			w.t.Fatalf("snapshot consumers of %s: %v", name, err)
		}
		out[name] = s
	}
	if err := names.Err(); err != nil {
		w.t.Fatalf("snapshot stream names: %v", err)
	}
	return out
}

func (s worldSnap) equal(o worldSnap) bool {
	if len(s) != len(o) {
		return false
	}
	for name, a := range s {
		b, ok := o[name]
		if !ok || a.state.LastSeq != b.state.LastSeq || a.state.FirstSeq != b.state.FirstSeq || a.state.Msgs != b.state.Msgs || len(a.consumers) != len(b.consumers) {
			return false
		}
		for c, p := range a.consumers {
			if b.consumers[c] != p {
				return false
			}
		}
	}
	return true
}

// settle flushes the attacker and polls snapshots until three in a row
// agree: the server acts on an injected reply after the publish returned.
// It bounds the wait by the team's heartbeat interval.
func (w *isoWorld) settle(ctx context.Context, a *attacker) worldSnap {
	w.t.Helper()
	_ = a.nc.FlushTimeout(w.pol.Heartbeat)
	prev := w.snapshot(ctx)
	same := 0
	deadline := time.Now().Add(w.pol.Heartbeat * 5)
	for same < 3 && time.Now().Before(deadline) {
		time.Sleep(w.pol.Heartbeat / 20) // a poll interval, not a condition
		cur := w.snapshot(ctx)
		if cur.equal(prev) {
			same++
		} else {
			same = 0
		}
		prev = cur
	}
	return prev
}

// judge returns every change from before to after that is not alpha/tm1's
// own legitimate write.
func judge(before, after worldSnap, allow func(stream string, m storedMsg) bool) []string {
	var out []string
	names := make([]string, 0, len(before))
	for n := range before {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		b := before[name]
		a, ok := after[name]
		if !ok {
			out = append(out, fmt.Sprintf("stream %s was deleted", name))
			continue
		}
		seqs := make([]uint64, 0, len(b.msgs))
		for seq := range b.msgs {
			seqs = append(seqs, seq)
		}
		sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
		for _, seq := range seqs {
			m := b.msgs[seq]
			am, ok := a.msgs[seq]
			switch {
			case !ok && ownKey(name, m.subject) && newerOnSubject(a, m.subject, seq):
				// an older revision of tm1's own key, replaced
			case !ok:
				out = append(out, fmt.Sprintf("stream %s: message %d (%s) was removed", name, seq, m.subject))
			case am.subject != m.subject || !bytes.Equal(am.data, m.data):
				out = append(out, fmt.Sprintf("stream %s: message %d (%s) was replaced", name, seq, m.subject))
			}
		}
		var added []uint64
		for seq := range a.msgs {
			if _, ok := b.msgs[seq]; !ok {
				added = append(added, seq)
			}
		}
		sort.Slice(added, func(i, j int) bool { return added[i] < added[j] })
		for _, seq := range added {
			m := a.msgs[seq]
			if why := forged(name, m, before); why != "" && (allow == nil || !allow(name, m)) {
				out = append(out, fmt.Sprintf("stream %s: seq %d on %s: %s: %.120s", name, seq, m.subject, why, m.data))
			}
		}
		for c, p := range b.consumers {
			q, ok := a.consumers[c]
			switch {
			case !ok:
				out = append(out, fmt.Sprintf("stream %s: consumer %s was deleted", name, c))
			case q != p && !(name == mailbox.MailboxPrefix+"alpha" && strings.HasSuffix(c, "_tm1")):
				out = append(out, fmt.Sprintf("stream %s: consumer %s of another member moved (delivered %d→%d, ack floor %d→%d)", name, c, p.delivered, q.delivered, p.ackFloor, q.ackFloor))
			}
		}
		for c := range a.consumers {
			if _, ok := b.consumers[c]; !ok {
				out = append(out, fmt.Sprintf("stream %s: durable consumer %s was created", name, c))
			}
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			out = append(out, fmt.Sprintf("stream %s was created", name))
		}
	}
	return out
}

func newerOnSubject(s *streamSnap, subject string, seq uint64) bool {
	for n, m := range s.msgs {
		if n > seq && m.subject == subject {
			return true
		}
	}
	return false
}

// ownKey reports whether subject is one of alpha/tm1's own state keys.
func ownKey(stream, subject string) bool {
	switch stream {
	case "KV_" + "TBS_alpha":
		return subject == "$KV.TBS_alpha.activity.tm1" || subject == "$KV.TBS_alpha.member.tm1"
	case "KV_" + "TBH_alpha":
		return subject == "$KV.TBH_alpha.member.tm1"
	}
	return false
}

// forged says why a message new in stream is not alpha/tm1's own
// legitimate write, or "" when it is.
func forged(stream string, m storedMsg, before worldSnap) string {
	marked := bytes.Contains(m.data, []byte(attackMark))
	switch stream {
	case mailbox.MailboxPrefix + "alpha":
		t := strings.Split(m.subject, ".")
		if len(t) == 4 && t[2] == "inc" {
			if t[3] == "tm1" {
				return ""
			}
			return "an incarnation marker of " + t[3]
		}
		if len(t) != 6 {
			return "a message on a subject no sender uses"
		}
		from, to, typ := t[5], t[3], t[4]
		if t[2] == "held" {
			from, to, typ = t[3], t[4], t[5]
		}
		switch {
		case from != "tm1" && bytes.Contains(m.data, []byte(legitMark)) && !marked:
			return ""
		case from != "tm1":
			return "mail as " + from
		case typ == string(teambus.MsgShutdownRequest):
			return "shutdown_request from tm1 to " + to
		case typ == string(teambus.MsgShutdownResponse) && to != teambus.Lead:
			return typ + " from tm1 to " + to
		}
		var msg teambus.Message
		if err := json.Unmarshal(m.data, &msg); err != nil || msg.ID == "" {
			return "a message that is not one (a server response stored as mail)"
		}
		return ""
	case "KV_TBS_alpha":
		key := strings.TrimPrefix(m.subject, "$KV.TBS_alpha.")
		if marked {
			return "the attacker's payload written to " + key
		}
		switch {
		case key == "activity.tm1":
			var at time.Time
			if json.Unmarshal(m.data, &at) != nil {
				return "not a time"
			}
			return ""
		case key == "member.tm1":
			var rec teambus.Member
			if json.Unmarshal(m.data, &rec) != nil || rec.ID != "tm1" {
				return "not tm1's member record"
			}
			return ""
		case strings.HasPrefix(key, "task."):
			var tk teambus.Task
			if json.Unmarshal(m.data, &tk) != nil || "task."+tk.ID != key {
				return "not a task record"
			}
			if tk.AssignedTo == "tm1" || heldBy(before[stream], m.subject, "tm1") {
				return ""
			}
			return "a task tm1 does not hold (assigned to " + tk.AssignedTo + ")"
		}
		return "a write of " + key
	case "KV_TBH_alpha":
		if m.subject == "$KV.TBH_alpha.member.tm1" && !marked {
			return ""
		}
		return "a heartbeat of " + strings.TrimPrefix(m.subject, "$KV.TBH_alpha.")
	case eventlog.EventsPrefix + "alpha":
		var ev struct {
			Type string `json:"type"`
		}
		if marked || json.Unmarshal(m.data, &ev) != nil || ev.Type == "" {
			return "not an event of the team service"
		}
		return ""
	}
	return "a write into " + stream
}

// heldBy reports whether the last task record on subject before was
// assigned to member.
func heldBy(s *streamSnap, subject, member string) bool {
	if s == nil {
		return false
	}
	var last uint64
	for seq, m := range s.msgs {
		if m.subject == subject && seq > last {
			last = seq
		}
	}
	var tk teambus.Task
	return last > 0 && json.Unmarshal(s.msgs[last].data, &tk) == nil && tk.AssignedTo == member
}

// --- the attacks --------------------------------------------------------

// verbs are the team service's verbs (issue 10), all of them, so a new
// verb is attacked too: the member publishes tb.<verb>, the service sees
// tbsvc.<team>.<verb>.
var verbs = teamapi.VerbNames()

// names is what the attacker can name: every stream and durable consumer
// (the operator lists them first), and fixed subjects.
type names struct {
	streams   []string
	consumers map[string][]string
}

func (w *isoWorld) names(s worldSnap) names {
	n := names{consumers: map[string][]string{}}
	for name, st := range s {
		n.streams = append(n.streams, name)
		for c := range st.consumers {
			n.consumers[name] = append(n.consumers[name], c)
		}
		sort.Strings(n.consumers[name])
	}
	sort.Strings(n.streams)
	return n
}

// target is a subject the attacker publishes to with the payload that
// would do harm there.
type target struct {
	subject string
	data    []byte
}

func forgedMember(id string) []byte {
	b, _ := json.Marshal(teambus.Member{ID: id, Name: attackMark, Status: teambus.MemberShutdown, Epoch: 999, Session: "evil"})
	return b
}

func forgedTask(id string) []byte {
	b, _ := json.Marshal(teambus.Task{ID: id, Description: attackMark, Status: teambus.TaskComplete, AssignedTo: "tm1"})
	return b
}

func forgedMail(from, to string, typ teambus.MessageType) []byte {
	b, _ := json.Marshal(teambus.Message{ID: "atk-" + from + "-" + to, From: from, To: to, Type: typ, Body: attackMark})
	return b
}

// verbPayload asks verb to act as another member, on another member's
// task, or to send what only the lead may.
func verbPayload(verb string) []byte {
	b, _ := json.Marshal(map[string]any{
		"member": "tm2", "session": "s-tm2", "team": "beta",
		"to": "tm2", "type": "shutdown_request", "id": "tm2/" + attackMark, "body": attackMark,
		"op": "complete", "task": "a1", "id_task": "a1", "commit": "deadbeef",
		"mode": "ack", "max": 100, "tokens": []string{"x"}, "seqs": []int{1, 2, 3, 4, 5, 6, 7, 8},
		"last_action": attackMark, "status": "shutdown", "reason": attackMark,
		"force": true, "as_lead": true, "touch": true, "held": true, "condition": attackMark, "description": attackMark,
		"messages": []map[string]any{
			{"to": "tm2", "type": "shutdown_request", "id": "tm2/" + attackMark + "-b", "body": attackMark},
			{"to": "tm1", "body": attackMark},
		},
	})
	return b
}

// targets lists every subject the attacker can name with a harmful
// payload: mail, held mail and markers of every sender in both teams,
// events, every state and heartbeat key, the credentials bucket, the
// team service (member and data side, $SRV), JetStream's API for every
// stream and consumer, acks of other members' consumers, and $SYS.
func (n names) targets() []target {
	var out []target
	add := func(s string, d []byte) { out = append(out, target{s, d}) }
	for _, tm := range []string{"alpha", "beta"} {
		for _, from := range []string{"tm1", "tm2", teambus.Lead} {
			for _, to := range []string{"tm1", "tm2", teambus.Lead, teambus.All} {
				if from == to {
					continue
				}
				add("tb."+tm+".mbx."+to+".info."+from, forgedMail(from, to, teambus.MsgInfo))
				add("tb."+tm+".ctl."+to+".shutdown_request."+from, forgedMail(from, to, teambus.MsgShutdownRequest))
				add("tb."+tm+".held."+from+"."+to+".info", forgedMail(from, to, teambus.MsgInfo))
			}
			add("tb."+tm+".inc."+from, []byte(attackMark))
		}
		add("tb."+tm+".evt.atk.task_completed", []byte(`{"v":1,"type":"task.completed","agent":"tm2","data":"`+attackMark+`"}`))
		for _, key := range []string{"team", "member.tm1", "member.tm2", "activity.tm1", "activity.tm2", "task.a1", "task.a2", "task.b1"} {
			d := forgedTask(strings.TrimPrefix(key, "task."))
			if strings.HasPrefix(key, "member.") || key == "team" {
				d = forgedMember(strings.TrimPrefix(key, "member."))
			}
			add("$KV.TBS_"+tm+"."+key, d)
		}
		for _, key := range []string{"member.tm1", "member.tm2", "lead"} {
			add("$KV.TBH_"+tm+"."+key, []byte(attackMark))
		}
		add("$KV."+credstore.AuthBucket+"."+tm+".tm2", []byte(`{"sha256":"`+attackMark+`"}`))
		for _, v := range verbs {
			add("tbsvc."+tm+"."+v, verbPayload(v))
		}
	}
	for _, v := range verbs {
		add("tb."+v, verbPayload(v))
	}
	for _, s := range []string{"$SRV.PING", "$SRV.INFO", "$SRV.STATS", "$SRV.PING.teambus", "$SYS.REQ.SERVER.PING", "$SYS.REQ.USER.INFO", "$SYS.REQ.ACCOUNT.PING.CONNZ", "$JS.API.INFO", "$JS.API.STREAM.NAMES", "$JS.API.STREAM.LIST"} {
		add(s, []byte(`{}`))
	}
	for _, s := range n.streams {
		add("$JS.API.STREAM.INFO."+s, []byte(`{}`))
		add("$JS.API.STREAM.PURGE."+s, []byte(`{}`))
		add("$JS.API.STREAM.DELETE."+s, []byte(`{}`))
		add("$JS.API.STREAM.MSG.DELETE."+s, []byte(`{"seq":1,"no_erase":true}`))
		add("$JS.API.STREAM.MSG.GET."+s, []byte(`{"seq":1}`))
		add("$JS.API.DIRECT.GET."+s, []byte(`{"seq":1,"batch":1000}`))
		add("$JS.API.STREAM.UPDATE."+s, []byte(`{"name":"`+s+`","subjects":["atk.>"]}`))
		add("$JS.API.CONSUMER.CREATE."+s, []byte(`{"stream_name":"`+s+`","config":{"deliver_subject":"_TB_INBOX.alpha.tm1.steal","ack_policy":"none"}}`))
		for _, c := range n.consumers[s] {
			add("$JS.API.CONSUMER.MSG.NEXT."+s+"."+c, []byte(`{"batch":100,"no_wait":true}`))
			add("$JS.API.CONSUMER.DELETE."+s+"."+c, []byte(`{}`))
			add("$JS.ACK."+s+"."+c+".1.1.1.0.0", []byte("+ACK"))
		}
	}
	return out
}

// legitTargets are what alpha/tm1 may do itself, on either design: mail
// as itself, its own activity and heartbeat, reads of its team's state
// and its own consumer, and the team service's verbs as itself. The
// attacks that ride on a legitimate publish (a reply subject, a header,
// a forged CONNECT) use these, so that what they change is theirs.
func (n names) legitTargets() []target {
	now, _ := json.Marshal(time.Now().UTC())
	mail, _ := json.Marshal(teambus.Message{ID: "own-1", From: "tm1", To: teambus.Lead, Type: teambus.MsgInfo, Body: "tm1's own mail"})
	send, _ := json.Marshal(map[string]any{"to": teambus.Lead, "body": "tm1's own mail via the service"})
	return []target{
		{"tb.alpha.mbx.lead.info.tm1", mail},
		{"$KV.TBS_alpha.activity.tm1", now},
		{"$KV.TBH_alpha.member.tm1", now},
		{"$JS.API.INFO", []byte(`{}`)},
		{"$JS.API.STREAM.INFO.KV_TBS_alpha", []byte(`{}`)},
		{"$JS.API.DIRECT.GET.KV_TBS_alpha", []byte(`{"last_by_subj":"$KV.TBS_alpha.team"}`)},
		{"$JS.API.DIRECT.GET.KV_TBS_alpha", []byte(`{"seq":1}`)},
		{"$JS.API.DIRECT.GET.KV_TBS_alpha", []byte(`{"seq":1,"batch":1000}`)},
		{"$JS.API.DIRECT.GET.KV_TBH_alpha", []byte(`{"seq":1,"batch":1000}`)},
		{"$JS.API.DIRECT.GET.KV_TBS_alpha.$KV.TBS_alpha.team", nil},
		{"$JS.API.DIRECT.GET.TBE_alpha", []byte(`{"seq":1}`)},
		{"$JS.API.CONSUMER.INFO.TBM_alpha.in_tm1", []byte(`{}`)},
		{"tb.send", send},
		{"tb.show", []byte(`{}`)},
		{"tb.brief", []byte(`{}`)},
		{"tb.inbox", []byte(`{"mode":"peek"}`)},
		{"tb.heartbeat", []byte(`{}`)},
	}
}

// injections are the reply subjects a publish may carry so that the
// server's own answer is published there with the server's rights.
func (n names) injections(kind string) []string {
	var out []string
	switch kind {
	case "stream delete":
		for _, s := range n.streams {
			out = append(out, "$JS.API.STREAM.DELETE."+s)
		}
	case "stream purge":
		for _, s := range n.streams {
			out = append(out, "$JS.API.STREAM.PURGE."+s)
		}
	case "message delete":
		for _, s := range n.streams {
			out = append(out, "$JS.API.STREAM.MSG.DELETE."+s)
		}
	case "consumer delete":
		for _, s := range n.streams {
			for _, c := range n.consumers[s] {
				out = append(out, "$JS.API.CONSUMER.DELETE."+s+"."+c)
			}
		}
	case "other teams' and members' mail":
		for _, tm := range []string{"alpha", "beta"} {
			for _, from := range []string{"tm2", teambus.Lead, "tm1"} {
				out = append(out, "tb."+tm+".mbx.tm1.info."+from, "tb."+tm+".ctl.tm2.shutdown_request."+from, "tb."+tm+".mbx.lead.info."+from)
			}
		}
	case "other members' state keys":
		for _, tm := range []string{"alpha", "beta"} {
			for _, k := range []string{"team", "member.tm2", "member.tm1", "activity.tm2", "task.a1", "task.b1"} {
				out = append(out, "$KV.TBS_"+tm+"."+k)
			}
			out = append(out, "$KV.TBH_"+tm+".member.tm2", "tb."+tm+".evt.atk.x")
		}
	case "the team service's own subjects":
		for _, v := range verbs {
			out = append(out, "tb."+v, "tbsvc.alpha."+v, "tbsvc.beta."+v)
		}
		out = append(out, "$SRV.PING", "$SRV.INFO")
	}
	return out
}

type isoAttack struct {
	name string
	// subs are extra subscriptions made before the secret traffic.
	subs func(w *isoWorld) []string
	run  func(ctx context.Context, w *isoWorld, a *attacker, n names) []string
	// allow accepts changes the row itself made legitimately (the
	// operator acting as tm2).
	allow func(stream string, m storedMsg) bool
}

func injectionRow(kind string) isoAttack {
	return isoAttack{name: "reply injection: " + kind, run: func(ctx context.Context, w *isoWorld, a *attacker, n names) []string {
		for _, reply := range n.injections(kind) {
			for _, tg := range n.legitTargets() {
				a.pub(tg.subject, reply, nil, tg.data)
			}
		}
		return nil
	}}
}

func isolationAttacks() []isoAttack {
	return []isoAttack{
		{name: "plain publish to every nameable subject", run: func(ctx context.Context, w *isoWorld, a *attacker, n names) []string {
			for _, tg := range n.targets() {
				a.pub(tg.subject, "", nil, tg.data)
				a.pub(tg.subject, a.nc.NewInbox(), nil, tg.data)
			}
			return nil
		}},
		injectionRow("stream delete"),
		injectionRow("stream purge"),
		injectionRow("message delete"),
		injectionRow("consumer delete"),
		injectionRow("other teams' and members' mail"),
		injectionRow("other members' state keys"),
		injectionRow("the team service's own subjects"),
		{name: "Nats-Rollup all and sub on state and mail subjects", run: func(ctx context.Context, w *isoWorld, a *attacker, n names) []string {
			for _, roll := range []string{"all", "sub"} {
				h := nats.Header{"Nats-Rollup": []string{roll}}
				for _, tg := range n.legitTargets() {
					a.pub(tg.subject, a.nc.NewInbox(), h, tg.data)
				}
			}
			return nil
		}},
		{name: "dedupe hijack of tm2's next message id", run: func(ctx context.Context, w *isoWorld, a *attacker, n names) []string {
			for _, id := range []string{"next-of-tm2", "tm2/next-of-tm2", "held/tm2/next-of-tm2"} {
				h := nats.Header{"Nats-Msg-Id": []string{id}}
				for _, tg := range n.legitTargets() {
					a.pub(tg.subject, a.nc.NewInbox(), h, tg.data)
				}
				for _, v := range []string{"tb.send", "tbsvc.alpha.send"} {
					b, _ := json.Marshal(map[string]any{"id": id, "to": teambus.Lead, "body": attackMark})
					a.pub(v, a.nc.NewInbox(), h, b)
				}
			}
			_ = a.nc.FlushTimeout(w.pol.Heartbeat)
			tm2 := team.Actor{Team: "alpha", Member: "tm2", Session: "s-tm2"}
			res, err := w.svc.Send(ctx, teamapi.SendRequest{Actor: tm2, To: teambus.Lead, ID: "next-of-tm2", Body: legitMark + " tm2's own message"})
			switch {
			case err != nil:
				return []string{fmt.Sprintf("tm2's send with its own id failed: %v", err)}
			case res.Duplicate:
				return []string{fmt.Sprintf("tm2's message %q was dropped as a duplicate of the attacker's (seq %d)", "next-of-tm2", res.Seq)}
			}
			return nil
		}, allow: func(stream string, m storedMsg) bool {
			// tm2's own send records its activity.
			var at time.Time
			return stream == "KV_TBS_alpha" && m.subject == "$KV.TBS_alpha.activity.tm2" && json.Unmarshal(m.data, &at) == nil
		}},
		{name: "Nats-Request-Info forged as alpha/tm2, beta/lead and the operator", run: func(ctx context.Context, w *isoWorld, a *attacker, n names) []string {
			for _, who := range []string{
				`{"acc":"TBM_alpha","user":"alpha.tm2"}`,
				`{"acc":"TBM_beta","user":"beta.lead"}`,
				`{"acc":"$G","user":"` + node.AdminUser + `"}`,
			} {
				for _, key := range []string{"Nats-Request-Info", "nats-request-info"} {
					h := nats.Header{}
					h[key] = []string{who}
					for _, tg := range n.legitTargets() {
						a.pub(tg.subject, a.nc.NewInbox(), h, tg.data)
					}
				}
			}
			return nil
		}},
		{name: "shutdown_request and records of other members through every path", run: func(ctx context.Context, w *isoWorld, a *attacker, n names) []string {
			for _, v := range []string{"send", "send_batch", "task", "checkpoint", "heartbeat", "join", "release", "ack"} {
				for _, who := range []string{"tm2", "lead", "tm1"} {
					b, _ := json.Marshal(map[string]any{
						"member": who, "session": "s-" + who, "to": "tm2", "type": "shutdown_request", "body": attackMark,
						"op": "complete", "task": "a1", "status": "shutdown", "last_action": attackMark,
						"messages": []map[string]any{{"to": "tm2", "type": "shutdown_request", "body": attackMark}},
					})
					a.pub("tb."+v, a.nc.NewInbox(), nil, b)
				}
			}
			for _, k := range []string{"member.tm2", "member.tm1", "team", "task.a1"} {
				a.pub("$KV.TBS_alpha."+k, a.nc.NewInbox(), nil, forgedMember("tm2"))
			}
			a.pub("tb.alpha.ctl.tm2.shutdown_request.tm1", a.nc.NewInbox(), nil, forgedMail("tm1", "tm2", teambus.MsgShutdownRequest))
			return nil
		}},
		{name: "subscriptions to >, $JS.>, $KV.>, _INBOX.> and other members' inboxes", subs: func(w *isoWorld) []string {
			return []string{">", "$JS.>", "$KV.>", "_INBOX.>", "_TB_INBOX.>", "tb.>", "tbsvc.>", "$SRV.>", "$SYS.>", "$JS.ACK.>",
				bus.MemberInboxPrefix("alpha", "tm2") + ".>", bus.MemberInboxPrefix("alpha", teambus.Lead) + ".>", bus.MemberInboxPrefix("beta", "tm1") + ".>"}
		}, run: func(ctx context.Context, w *isoWorld, a *attacker, n names) []string {
			// More traffic while subscribed: every leak is judged on receipt.
			w.traffic(ctx, "during", false)
			return nil
		}, allow: func(stream string, m storedMsg) bool {
			return bytes.Contains(m.data, []byte(secretMark)) || bytes.Contains(m.data, []byte("work for tm1")) || (strings.HasPrefix(stream, "KV_TBS_") && strings.Contains(m.subject, ".activity.")) || stream == eventlog.EventsPrefix+"beta"
		}},
		{name: "wrong inbox prefixes: the default _INBOX, tm2's, beta/tm1's", run: func(ctx context.Context, w *isoWorld, a *attacker, n names) []string {
			var out []string
			for _, prefix := range []string{"_INBOX", bus.MemberInboxPrefix("alpha", "tm2"), bus.MemberInboxPrefix("beta", "tm1")} {
				b := w.attackerWith(nats.CustomInboxPrefix(prefix))
				if b.nc == nil {
					continue
				}
				for _, tg := range n.legitTargets() {
					b.pub(tg.subject, b.nc.NewInbox(), nil, tg.data)
				}
				_ = b.nc.FlushTimeout(w.pol.Heartbeat)
				for _, l := range b.leaks() {
					out = append(out, "with prefix "+prefix+": "+l)
				}
			}
			return out
		}},
		{name: "CONNECT with nkey, jwt and auth_token of another user", run: func(ctx context.Context, w *isoWorld, a *attacker, n names) []string {
			var out []string
			for _, extra := range []map[string]any{
				{"nkey": "alpha.tm2"},
				{"nkey": "beta.lead"},
				{"jwt": "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5In0.eyJzdWIiOiJhbHBoYS50bTIifQ.x"},
				{"auth_token": "alpha.tm2"},
			} {
				out = append(out, w.rawConnect(n, extra)...)
			}
			return out
		}},
	}
}

// attackerWith is a second attacker connection with other options (its
// leaks are judged against its own prefix: what it gets on another
// member's prefix is a leak).
func (w *isoWorld) attackerWith(opts ...nats.Option) *attacker {
	w.t.Helper()
	a := &attacker{w: w, prefix: w.creds.InboxPrefix}
	all := append([]nats.Option{nats.UserInfo(w.creds.User, w.creds.Password), nats.Name("attacker-2"),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})}, opts...)
	nc, err := nats.Connect(w.node.URL(), all...)
	if err != nil {
		// Refusing the connection is a fine answer.
		return &attacker{w: w, prefix: w.creds.InboxPrefix, nc: nil}
	}
	w.t.Cleanup(nc.Close)
	a.nc = nc
	prefix := nc.Opts.InboxPrefix
	if prefix == "" {
		prefix = "_INBOX"
	}
	a.subscribe(prefix + ".>")
	return a
}

// rawConnect logs in over TCP with tm1's password and extra CONNECT
// fields naming another user, then publishes every target. Refused at
// connect is the right answer; accepted, what it does is judged by the
// snapshots like any other attack.
func (w *isoWorld) rawConnect(n names, extra map[string]any) []string {
	u, err := url.Parse(w.node.URL())
	if err != nil {
		w.t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, w.pol.Heartbeat)
	if err != nil {
		w.t.Fatalf("dial %s: %v", u.Host, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * w.pol.Heartbeat))
	r := bufio.NewReader(conn)
	if _, err := r.ReadString('\n'); err != nil { // INFO
		return nil
	}
	c := map[string]any{"verbose": false, "pedantic": false, "user": w.creds.User, "pass": w.creds.Password, "headers": true, "protocol": 1, "name": "raw-attacker", "lang": "go", "version": "1"}
	for k, v := range extra {
		c[k] = v
	}
	b, _ := json.Marshal(c)
	fmt.Fprintf(conn, "CONNECT %s\r\nPING\r\n", b)
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "PONG") {
		return nil // refused
	}
	inbox := w.creds.InboxPrefix + ".raw"
	fmt.Fprintf(conn, "SUB %s.> 1\r\n", inbox)
	for _, tg := range n.legitTargets() {
		fmt.Fprintf(conn, "PUB %s %s.1 %d\r\n%s\r\n", tg.subject, inbox, len(tg.data), tg.data)
	}
	fmt.Fprintf(conn, "PING\r\n")
	var out []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return append(out, fmt.Sprintf("CONNECT %v: accepted; no PONG after the publishes: %v", extra, err))
		}
		if strings.HasPrefix(line, "PONG") {
			return out
		}
		if strings.HasPrefix(line, "MSG ") || strings.HasPrefix(line, "HMSG ") {
			f := strings.Fields(line)
			var size int
			_, _ = fmt.Sscanf(f[len(f)-1], "%d", &size)
			body := make([]byte, size+2)
			if _, err := io.ReadFull(r, body); err != nil {
				return out
			}
			if bytes.Contains(body, []byte(secretMark)) {
				out = append(out, fmt.Sprintf("CONNECT %v: received secret traffic on %s", extra, f[1]))
			}
		}
	}
}

// TestIsolation_MemberCredentialAttacks plays the attacker with only
// alpha/tm1's credential: every row must leave every other team's and
// member's data as it was and show the attacker nothing of theirs.
func TestIsolation_MemberCredentialAttacks(t *testing.T) {
	for _, atk := range isolationAttacks() {
		t.Run(atk.name, func(t *testing.T) {
			w := newIsoWorld(t)
			ctx := isoCtx(t)
			a := w.attacker()
			if atk.subs != nil {
				for _, s := range atk.subs(w) {
					a.subscribe(s)
				}
				_ = a.nc.FlushTimeout(w.pol.Heartbeat)
			}
			w.traffic(ctx, "before", true)
			before := w.snapshot(ctx)
			n := w.names(before)
			var problems []string
			problems = append(problems, atk.run(ctx, w, a, n)...)
			after := w.settle(ctx, a)
			problems = append(problems, judge(before, after, atk.allow)...)
			problems = append(problems, a.leaks()...)
			if total := len(problems); total > 0 {
				const show = 12
				more := ""
				if len(problems) > show {
					more = fmt.Sprintf("\n  … and %d more", len(problems)-show)
					problems = problems[:show]
				}
				t.Errorf("attack %q got through (%d findings):\n  %s%s", atk.name, total, strings.Join(problems, "\n  "), more)
			}
		})
	}
}
