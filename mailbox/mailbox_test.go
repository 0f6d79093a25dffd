package mailbox_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus/bustest"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node/nodetest"
)

func mailCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// teamMailbox is a declared team mailbox on a fresh node with the lead and
// members as recipients.
type teamMailbox struct {
	*mailbox.Mailbox
	js jetstream.JetStream
}

func newMailbox(t *testing.T, cfg mailbox.MailboxConfig, ackWait time.Duration, members ...string) *teamMailbox {
	t.Helper()
	return newTeamMailbox(t, "alpha", cfg, ackWait, members...)
}

func newTeamMailbox(t *testing.T, team string, cfg mailbox.MailboxConfig, ackWait time.Duration, members ...string) *teamMailbox {
	t.Helper()
	ctx := mailCtx(t)
	n := nodetest.NewBareServer(t)
	c := nodetest.Connect(t, n)
	mb := mailbox.NewMailbox(c.JS, team, cfg)
	if err := mb.Declare(ctx); err != nil {
		t.Fatal(err)
	}
	// The bucket of the recipient records: the team's state bucket.
	if _, err := c.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: mailbox.RecipientBucketPrefix + team}); err != nil {
		t.Fatal(err)
	}
	for _, r := range append([]string{teambus.Lead}, members...) {
		if err := mb.AddRecipient(ctx, r, ackWait); err != nil {
			t.Fatal(err)
		}
	}
	return &teamMailbox{Mailbox: mb, js: c.JS}
}

// send stores a message and fails the test on error.
func (m *teamMailbox) send(t *testing.T, from, to string, typ teambus.MessageType, id, body string) mailbox.SendResult {
	t.Helper()
	res, err := m.Send(mailCtx(t), &teambus.Message{ID: id, From: from, To: to, Type: typ, Body: body}, false)
	if err != nil {
		t.Fatalf("send %s→%s %q: %v", from, to, body, err)
	}
	return res
}

// count is the number of messages in the stream.
func (m *teamMailbox) count(t *testing.T) uint64 {
	t.Helper()
	st, err := m.js.Stream(mailCtx(t), m.Stream())
	if err != nil {
		t.Fatal(err)
	}
	return st.CachedInfo().State.Msgs
}

func (m *teamMailbox) inbox(t *testing.T, member string, opts mailbox.InboxOptions) []teambus.Message {
	t.Helper()
	msgs, err := m.Inbox(mailCtx(t), member, opts)
	if err != nil {
		t.Fatalf("inbox of %s: %v", member, err)
	}
	return msgs
}

func bodies(msgs []teambus.Message) []string {
	out := []string{}
	for _, m := range msgs {
		out = append(out, m.Body)
	}
	return out
}

func seqs(msgs []teambus.Message) []uint64 {
	out := []uint64{}
	for _, m := range msgs {
		out = append(out, m.Seq)
	}
	return out
}

func TestMailbox_Send_DuplicateID(t *testing.T) {
	mb := newMailbox(t, mailbox.MailboxConfig{}, time.Minute, "tm1")
	first := mb.send(t, "tm1", teambus.Lead, teambus.MsgReport, "report-1", "first body")
	if first.Duplicate || first.Seq == 0 || first.ID != "report-1" {
		t.Fatalf("first send = %+v", first)
	}
	second := mb.send(t, "tm1", teambus.Lead, teambus.MsgReport, "report-1", "a different body")
	if !second.Duplicate || second.Seq != first.Seq {
		t.Errorf("second send = %+v, want duplicate of seq %d", second, first.Seq)
	}
	if got := mb.count(t); got != 1 {
		t.Errorf("stream holds %d messages, want 1", got)
	}
	got := mb.inbox(t, teambus.Lead, mailbox.InboxOptions{})
	if want := []string{"first body"}; !reflect.DeepEqual(bodies(got), want) {
		t.Errorf("lead inbox = %v, want %v", bodies(got), want)
	}
}

func TestMailbox_Send_DuplicateIDScopedBySender(t *testing.T) {
	mb := newMailbox(t, mailbox.MailboxConfig{}, time.Minute, "tm1", "tm2")
	a := mb.send(t, "tm1", teambus.Lead, teambus.MsgInfo, "same", "from tm1")
	b := mb.send(t, "tm2", teambus.Lead, teambus.MsgInfo, "same", "from tm2")
	if b.Duplicate || b.Seq == a.Seq {
		t.Errorf("tm2's send with tm1's id = %+v, want a new message", b)
	}
	if got := mb.count(t); got != 2 {
		t.Errorf("stream holds %d messages, want 2", got)
	}
}

func TestMailbox_Send_DuplicateWindow(t *testing.T) {
	t.Parallel() // waits on server timers
	mb := newMailbox(t, mailbox.MailboxConfig{Duplicates: time.Second}, time.Minute, "tm1")
	first := mb.send(t, "tm1", teambus.Lead, teambus.MsgInfo, "k", "one")
	// Outside the window the same id is a new message.
	bustest.CheckFor(t, 5*time.Second, 100*time.Millisecond, func() error {
		res := mb.send(t, "tm1", teambus.Lead, teambus.MsgInfo, "k", "again")
		if res.Duplicate {
			return fmt.Errorf("still a duplicate of seq %d", res.Seq)
		}
		if res.Seq == first.Seq {
			return fmt.Errorf("same seq %d", res.Seq)
		}
		return nil
	})
}

func TestMailbox_SeqMonotonicInboxOldestFirst(t *testing.T) {
	mb := newMailbox(t, mailbox.MailboxConfig{}, time.Minute, "tm1", "tm2")
	var last uint64
	var want []string
	for i := 0; i < 20; i++ {
		from := []string{"tm2", teambus.Lead}[i%2]
		body := fmt.Sprintf("m%02d", i)
		res := mb.send(t, from, "tm1", teambus.MsgInfo, fmt.Sprintf("id-%d", i), body)
		if res.Seq <= last {
			t.Fatalf("send %d: seq %d after %d", i, res.Seq, last)
		}
		last = res.Seq
		want = append(want, body)
	}
	got := mb.inbox(t, "tm1", mailbox.InboxOptions{})
	if !reflect.DeepEqual(bodies(got), want) {
		t.Errorf("inbox = %v, want %v", bodies(got), want)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Seq <= got[i-1].Seq {
			t.Errorf("inbox not in seq order: %v", seqs(got))
			break
		}
	}
	m := got[0]
	if m.From != "tm2" || m.To != "tm1" || m.Type != teambus.MsgInfo || m.ID != "id-0" || m.TS.IsZero() || m.Held {
		t.Errorf("first message = %+v", m)
	}
	// Max limits the batch, oldest first.
	if got := mb.inbox(t, "tm1", mailbox.InboxOptions{Max: 3}); !reflect.DeepEqual(bodies(got), want[:3]) {
		t.Errorf("inbox max 3 = %v, want %v", bodies(got), want[:3])
	}
}

func TestMailbox_Inbox_RepeatsUntilAcked(t *testing.T) {
	mb := newMailbox(t, mailbox.MailboxConfig{}, time.Minute, "tm1")
	mb.send(t, teambus.Lead, "tm1", teambus.MsgQuestion, "q1", "one")
	mb.send(t, teambus.Lead, "tm1", teambus.MsgQuestion, "q2", "two")
	want := []string{"one", "two"}
	for i := 0; i < 3; i++ {
		if got := mb.inbox(t, "tm1", mailbox.InboxOptions{}); !reflect.DeepEqual(bodies(got), want) {
			t.Fatalf("read %d: inbox = %v, want %v (reading is not acking)", i, bodies(got), want)
		}
	}
	if got := mb.inbox(t, "tm1", mailbox.InboxOptions{Ack: true}); !reflect.DeepEqual(bodies(got), want) {
		t.Fatalf("inbox --ack = %v, want %v", bodies(got), want)
	}
	if got := mb.inbox(t, "tm1", mailbox.InboxOptions{}); len(got) != 0 {
		t.Errorf("inbox after --ack = %v, want empty", bodies(got))
	}
	mb.send(t, teambus.Lead, "tm1", teambus.MsgInfo, "i3", "three")
	if got := mb.inbox(t, "tm1", mailbox.InboxOptions{}); !reflect.DeepEqual(bodies(got), []string{"three"}) {
		t.Errorf("inbox = %v, want only the new mail", bodies(got))
	}
}

func TestMailbox_Inbox_Wait(t *testing.T) {
	mb := newMailbox(t, mailbox.MailboxConfig{}, time.Minute, "tm1")
	ctx := mailCtx(t)
	type result struct {
		msgs []teambus.Message
		err  error
	}
	done := make(chan result, 1)
	go func() {
		msgs, err := mb.Inbox(ctx, "tm1", mailbox.InboxOptions{Wait: 10 * time.Second})
		done <- result{msgs, err}
	}()
	// Send only once the reader waits on the server (on the consumer its
	// read created).
	bustest.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		cons, err := mb.js.Consumer(ctx, mb.Stream(), mailbox.InboxConsumer("tm1"))
		if err != nil {
			return err
		}
		info, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumWaiting == 0 {
			return fmt.Errorf("no pull request waiting")
		}
		return nil
	})
	start := time.Now()
	mb.send(t, teambus.Lead, "tm1", teambus.MsgInfo, "w1", "arrived")
	select {
	case r := <-done:
		if r.err != nil || !reflect.DeepEqual(bodies(r.msgs), []string{"arrived"}) {
			t.Fatalf("inbox --wait = %v, %v", bodies(r.msgs), r.err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("inbox --wait returned after %v: should return when mail arrives", d)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("inbox --wait did not return")
	}
	msgs, err := mb.Inbox(ctx, "tm1", mailbox.InboxOptions{Wait: 300 * time.Millisecond, Ack: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 {
		t.Fatalf("unacked mail = %v", bodies(msgs))
	}
	// With nothing there it waits about as long as asked and returns empty.
	start = time.Now()
	msgs, err = mb.Inbox(ctx, "tm1", mailbox.InboxOptions{Wait: 300 * time.Millisecond})
	if err != nil || len(msgs) != 0 {
		t.Fatalf("empty inbox --wait = %v, %v", bodies(msgs), err)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 5*time.Second {
		t.Errorf("empty inbox --wait 300ms took %v", d)
	}
}

func TestMailbox_Ack(t *testing.T) {
	mb := newMailbox(t, mailbox.MailboxConfig{}, time.Minute, "tm1", "tm2")
	ctx := mailCtx(t)
	a := mb.send(t, teambus.Lead, "tm1", teambus.MsgInfo, "a", "a").Seq
	b := mb.send(t, teambus.Lead, "tm1", teambus.MsgInfo, "b", "b").Seq
	other := mb.send(t, teambus.Lead, "tm2", teambus.MsgInfo, "o", "for tm2").Seq
	ctl := mb.send(t, teambus.Lead, "tm1", teambus.MsgStatusCheck, "s", "probe").Seq

	res, err := mb.Ack(ctx, "tm1", []uint64{a})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.Acked, []uint64{a}) || len(res.Already) != 0 {
		t.Errorf("ack %d = %+v", a, res)
	}
	res, err = mb.Ack(ctx, "tm1", []uint64{a})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Acked) != 0 || !reflect.DeepEqual(res.Already, []uint64{a}) {
		t.Errorf("second ack %d = %+v, want already acked", a, res)
	}
	if got := mb.inbox(t, "tm1", mailbox.InboxOptions{}); !reflect.DeepEqual(seqs(got), []uint64{b}) {
		t.Errorf("inbox after ack = %v, want [%d]", seqs(got), b)
	}

	// Someone else's mail, sidecar traffic, seq 0 and a missing seq are
	// refused, and nothing in the request is acked.
	for _, tt := range []struct {
		seqs []uint64
		kind error
	}{
		{[]uint64{b, other}, teambus.ErrNotFound},
		{[]uint64{b, ctl}, teambus.ErrNotFound},
		{[]uint64{b, 0}, teambus.ErrInvalid},
		{[]uint64{b, 9999}, teambus.ErrNotFound},
	} {
		res, err := mb.Ack(ctx, "tm1", tt.seqs)
		if !errors.Is(err, tt.kind) {
			t.Errorf("Ack(%v) = %+v, %v; want %v", tt.seqs, res, err, tt.kind)
		}
		if len(res.Acked) != 0 {
			t.Errorf("Ack(%v) acked %v", tt.seqs, res.Acked)
		}
	}
	if got := mb.inbox(t, "tm1", mailbox.InboxOptions{}); !reflect.DeepEqual(seqs(got), []uint64{b}) {
		t.Errorf("inbox of tm1 = %v, want [%d]: a refused ack acked something", seqs(got), b)
	}
	if got := mb.inbox(t, "tm2", mailbox.InboxOptions{}); !reflect.DeepEqual(seqs(got), []uint64{other}) {
		t.Errorf("inbox of tm2 = %v, want [%d]", seqs(got), other)
	}
	// Unknown member: no inbox.
	if _, err := mb.Ack(ctx, "tm9", []uint64{b}); err == nil {
		t.Errorf("ack as a non-member succeeded")
	}
}

func TestMailbox_Broadcast(t *testing.T) {
	mb := newMailbox(t, mailbox.MailboxConfig{}, time.Minute, "tm1", "tm2", "tm3")
	res := mb.send(t, "tm1", teambus.All, teambus.MsgInfo, "b1", "hello all")
	if got := mb.count(t); got != 1 {
		t.Errorf("stream holds %d messages, want 1 for a broadcast", got)
	}
	for _, r := range []string{teambus.Lead, "tm2", "tm3"} {
		got := mb.inbox(t, r, mailbox.InboxOptions{Self: r})
		if !reflect.DeepEqual(seqs(got), []uint64{res.Seq}) {
			t.Errorf("inbox of %s = %v, want the broadcast once", r, seqs(got))
		}
	}
	if got := mb.inbox(t, "tm1", mailbox.InboxOptions{Self: "tm1"}); len(got) != 0 {
		t.Errorf("sender's inbox = %v, want its own broadcast skipped", bodies(got))
	}
	// Acks are independent.
	ack, err := mb.Ack(mailCtx(t), "tm2", []uint64{res.Seq})
	if err != nil || !reflect.DeepEqual(ack.Acked, []uint64{res.Seq}) {
		t.Fatalf("tm2 ack = %+v, %v", ack, err)
	}
	if got := mb.inbox(t, "tm2", mailbox.InboxOptions{Self: "tm2"}); len(got) != 0 {
		t.Errorf("tm2 inbox after ack = %v", seqs(got))
	}
	for _, r := range []string{teambus.Lead, "tm3"} {
		if got := mb.inbox(t, r, mailbox.InboxOptions{Self: r}); len(got) != 1 {
			t.Errorf("inbox of %s after tm2's ack = %v, want the broadcast still there", r, seqs(got))
		}
	}
}

func TestMailbox_SidecarMail(t *testing.T) {
	mb := newMailbox(t, mailbox.MailboxConfig{}, time.Minute, "tm1")
	probe := mb.send(t, teambus.Lead, "tm1", teambus.MsgStatusCheck, "p1", "are you there")
	mb.send(t, teambus.Lead, "tm1", teambus.MsgInfo, "i1", "agent mail")
	status := mb.send(t, "tm1", teambus.Lead, teambus.MsgStatus, "st1", "alive")

	if got := mb.inbox(t, "tm1", mailbox.InboxOptions{}); !reflect.DeepEqual(bodies(got), []string{"agent mail"}) {
		t.Errorf("agent inbox of tm1 = %v, want no sidecar traffic", bodies(got))
	}
	if got := mb.inbox(t, "tm1", mailbox.InboxOptions{Sidecar: true}); !reflect.DeepEqual(seqs(got), []uint64{probe.Seq}) {
		t.Errorf("sidecar inbox of tm1 = %v, want [%d]", seqs(got), probe.Seq)
	}
	if got := mb.inbox(t, teambus.Lead, mailbox.InboxOptions{Sidecar: true}); !reflect.DeepEqual(seqs(got), []uint64{status.Seq}) {
		t.Errorf("lead sidecar inbox = %v, want the status reply [%d]", seqs(got), status.Seq)
	}
}

func TestMailbox_Send_RefusedStoresNothing(t *testing.T) {
	mb := newMailbox(t, mailbox.MailboxConfig{MaxBody: 1024}, time.Minute, "tm1")
	mb.send(t, "tm1", teambus.Lead, teambus.MsgInfo, "ok", "fine")
	ok := teambus.Message{ID: "x", From: "tm1", To: teambus.Lead, Type: teambus.MsgInfo, Body: "b"}
	tests := []struct {
		name   string
		change func(*teambus.Message)
		inErr  string
	}{
		{"recipient with a dot", func(m *teambus.Message) { m.To = "tm1.x" }, "recipient id"},
		{"recipient wildcard", func(m *teambus.Message) { m.To = ">" }, "recipient id"},
		{"sender wildcard", func(m *teambus.Message) { m.From = "*" }, "sender id"},
		{"empty recipient", func(m *teambus.Message) { m.To = "" }, "recipient id"},
		{"unknown type", func(m *teambus.Message) { m.Type = "gossip" }, "message type"},
		{"empty id", func(m *teambus.Message) { m.ID = "" }, "message id"},
		{"id with space", func(m *teambus.Message) { m.ID = "a b" }, "message id"},
		{"body over the limit", func(m *teambus.Message) { m.Body = strings.Repeat("x", 1025) }, "1025 bytes, at most 1024"},
		{"data not JSON", func(m *teambus.Message) { m.Data = []byte("{") }, "JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := ok
			tt.change(&m)
			before := mb.count(t)
			_, err := mb.Send(mailCtx(t), &m, false)
			if !errors.Is(err, teambus.ErrInvalid) {
				t.Fatalf("Send = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.inErr) {
				t.Errorf("error %q does not mention %q", err, tt.inErr)
			}
			if got := mb.count(t); got != before {
				t.Errorf("stream went from %d to %d messages: a refused send stored something", before, got)
			}
		})
	}
	// Exactly at the limit is fine.
	mb.send(t, "tm1", teambus.Lead, teambus.MsgInfo, "max", strings.Repeat("x", 1024))
}

func TestMailbox_Send_FullStream(t *testing.T) {
	// 16 KiB of mailbox, 1 KiB bodies.
	mb := newMailbox(t, mailbox.MailboxConfig{MaxBytes: 16 << 10, MaxBody: 1024}, time.Minute, "tm1")
	ctx := mailCtx(t)
	var stored []uint64
	var err error
	for i := 0; i < 100; i++ {
		var res mailbox.SendResult
		res, err = mb.Send(ctx, &teambus.Message{ID: fmt.Sprint("fill-", i), From: "tm1", To: teambus.Lead, Type: teambus.MsgInfo, Body: strings.Repeat("f", 1000)}, false)
		if err != nil {
			break
		}
		stored = append(stored, res.Seq)
	}
	if err == nil {
		t.Fatalf("100 KiB went into a 16 KiB mailbox")
	}
	if len(stored) < 5 {
		t.Fatalf("only %d messages fit before %v", len(stored), err)
	}
	if !errors.Is(err, teambus.ErrFull) || !strings.Contains(err.Error(), "full") || !strings.Contains(err.Error(), "team set") {
		t.Errorf("send to a full mailbox = %v, want ErrFull saying it is full and how to raise it", err)
	}
	if got := teambus.ExitCode(err); got != teambus.ExitPermanent {
		t.Errorf("exit code = %d, want %d: a full mailbox stays full until its limit is raised", got, teambus.ExitPermanent)
	}
	// Nothing old was dropped to make room: discard new, not old.
	if got := mb.count(t); got != uint64(len(stored)) {
		t.Errorf("stream holds %d messages, want the %d stored", got, len(stored))
	}
	got := mb.inbox(t, teambus.Lead, mailbox.InboxOptions{Max: 1000})
	if !reflect.DeepEqual(seqs(got), stored) {
		t.Errorf("lead inbox = %v, want every stored message %v", seqs(got), stored)
	}
	// Still full on retry.
	_, err = mb.Send(ctx, &teambus.Message{ID: "again", From: "tm1", To: teambus.Lead, Type: teambus.MsgInfo, Body: strings.Repeat("f", 1000)}, false)
	if !errors.Is(err, teambus.ErrFull) {
		t.Errorf("second send to a full mailbox = %v", err)
	}
}

func TestMailbox_Redelivery_PushedConsumer(t *testing.T) {
	t.Parallel() // waits on server timers
	const ackWait = time.Second
	mb := newMailbox(t, mailbox.MailboxConfig{}, ackWait, "tm1")
	ctx := mailCtx(t)
	res := mb.send(t, teambus.Lead, "tm1", teambus.MsgStatusCheck, "probe-1", "status?")

	// A live sidecar: a consumer that gets mail pushed and does not ack.
	cons, err := mb.SidecarInbox(ctx, "tm1")
	if err != nil {
		t.Fatal(err)
	}
	type delivery struct {
		seq, n uint64
		at     time.Time
		msg    jetstream.Msg
	}
	got := make(chan delivery, 10)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		md, err := m.Metadata()
		if err != nil {
			return
		}
		got <- delivery{md.Sequence.Stream, md.NumDelivered, time.Now(), m}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()

	next := func() delivery {
		t.Helper()
		select {
		case d := <-got:
			return d
		case <-time.After(10 * time.Second):
			t.Fatal("no delivery")
			return delivery{}
		}
	}
	first := next()
	if first.seq != res.Seq || first.n != 1 {
		t.Fatalf("first delivery = seq %d #%d, want seq %d #1", first.seq, first.n, res.Seq)
	}
	second := next()
	if second.seq != res.Seq || second.n != 2 {
		t.Fatalf("second delivery = seq %d #%d, want seq %d #2", second.seq, second.n, res.Seq)
	}
	if gap := second.at.Sub(first.at); gap < ackWait-100*time.Millisecond {
		t.Errorf("redelivered after %v, before the %v ack-wait", gap, ackWait)
	}
	// Acking ends the redelivery.
	if err := second.msg.DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	bustest.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		info, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumAckPending != 0 || info.AckFloor.Stream != res.Seq {
			return fmt.Errorf("ack pending %d, ack floor %d", info.NumAckPending, info.AckFloor.Stream)
		}
		return nil
	})
}

func TestMailbox_Declare_Idempotent(t *testing.T) {
	mb := newMailbox(t, mailbox.MailboxConfig{}, time.Minute, "tm1")
	ctx := mailCtx(t)
	before := mb.send(t, teambus.Lead, "tm1", teambus.MsgInfo, "m1", "kept")
	if err := mb.Declare(ctx); err != nil {
		t.Fatalf("second Declare: %v", err)
	}
	if err := mb.AddRecipient(ctx, "tm1", time.Minute); err != nil {
		t.Fatalf("second AddRecipient: %v", err)
	}
	if got := mb.inbox(t, "tm1", mailbox.InboxOptions{}); !reflect.DeepEqual(seqs(got), []uint64{before.Seq}) {
		t.Errorf("inbox after re-declare = %v, want [%d]", seqs(got), before.Seq)
	}
	// A recipient added later starts after the mail already stored.
	if err := mb.AddRecipient(ctx, "tm2", time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := mb.inbox(t, "tm2", mailbox.InboxOptions{}); len(got) != 0 {
		t.Errorf("new recipient's inbox = %v, want empty", seqs(got))
	}
	if _, err := mb.Inbox(ctx, "tm9", mailbox.InboxOptions{}); !errors.Is(err, teambus.ErrNotFound) {
		t.Errorf("inbox of a non-recipient = %v, want ErrNotFound", err)
	}
	if err := mailbox.NewMailbox(mb.js, "a.b", mailbox.MailboxConfig{}).Declare(ctx); !errors.Is(err, teambus.ErrInvalid) {
		t.Errorf("Declare(a.b) = %v, want ErrInvalid", err)
	}
}

func TestMailbox_Send_NoStream(t *testing.T) {
	n := nodetest.NewBareServer(t)
	c := nodetest.Connect(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	mb := mailbox.NewMailbox(c.JS, "ghost", mailbox.MailboxConfig{})
	_, err := mb.Send(ctx, &teambus.Message{ID: "x", From: "tm1", To: teambus.Lead, Type: teambus.MsgInfo}, false)
	if !errors.Is(err, teambus.ErrNotFound) {
		t.Errorf("send to a team without a mailbox = %v, want ErrNotFound", err)
	}
}

func TestMailbox_IDsNamedHeld(t *testing.T) {
	// "held" is a valid team and member id; only the held kind of subject
	// marks held mail.
	for _, team := range []string{"alpha", "held"} {
		t.Run("team "+team, func(t *testing.T) {
			mb := newTeamMailbox(t, team, mailbox.MailboxConfig{}, time.Minute, "held", "tm1")
			mb.send(t, teambus.Lead, "held", teambus.MsgInfo, "1", "to held")
			mb.send(t, "held", "tm1", teambus.MsgInfo, "2", "from held")
			for _, r := range []string{"held", "tm1"} {
				got := mb.inbox(t, r, mailbox.InboxOptions{})
				if len(got) != 1 || got[0].Held {
					t.Errorf("inbox of %s = %+v, want one message, not held", r, got)
				}
			}
			for _, m := range replayAll(t, mb, mailbox.ReplayFilter{}) {
				if m.Held {
					t.Errorf("replayed seq %d marked held", m.Seq)
				}
			}
		})
	}
}
