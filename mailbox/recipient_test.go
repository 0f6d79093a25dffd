package mailbox_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus/bustest"
	"github.com/teambus/teambus/mailbox"
)

// consumers lists the consumers of the mailbox stream.
func (m *teamMailbox) consumers(t *testing.T) []string {
	t.Helper()
	st, err := m.js.Stream(mailCtx(t), m.Stream())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	names := st.ConsumerNames(mailCtx(t))
	for n := range names.Name() {
		out = append(out, n)
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitGone waits until the server has removed the consumer name.
func (m *teamMailbox) waitGone(t *testing.T, name string, within time.Duration) {
	t.Helper()
	bustest.CheckFor(t, within, 50*time.Millisecond, func() error {
		_, err := m.js.Consumer(mailCtx(t), m.Stream(), name)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			return nil
		}
		return fmt.Errorf("consumer %s still there (%v)", name, err)
	})
}

// Issue 15 item 6: an idle recipient holds no consumer; one that read is
// removed by the server once idle, and the one created again delivers the
// unacked mail exactly as before and none of the acked mail, acked in or
// out of order, by a read with --ack, a lease, or by sequence.
func TestMailbox_IdleConsumer_RemovedAndRecreated(t *testing.T) {
	t.Parallel() // waits on server timers
	const idle = time.Second
	mb := newMailbox(t, mailbox.MailboxConfig{ConsumerIdle: idle}, time.Minute, "tm1", "tm2")
	ctx := mailCtx(t)
	if got := mb.consumers(t); len(got) != 0 {
		t.Fatalf("consumers of a team nobody read = %v, want none", got)
	}
	var sent []uint64
	for i := 0; i < 6; i++ {
		sent = append(sent, mb.send(t, "tm2", "tm1", teambus.MsgInfo, fmt.Sprint("d", i), fmt.Sprint("direct ", i)).Seq)
	}
	sent = append(sent, mb.send(t, teambus.Lead, teambus.All, teambus.MsgInfo, "b1", "broadcast").Seq)

	// Acks: the first by a read with --ack (max 1), the third and fifth
	// from a lease (out of order; the rest released), the fourth by
	// sequence.
	if got := mb.inbox(t, "tm1", mailbox.InboxOptions{Max: 1, Ack: true}); !reflect.DeepEqual(seqs(got), sent[:1]) {
		t.Fatalf("read with ack = %v, want %v", seqs(got), sent[:1])
	}
	l, err := mb.Lease(ctx, "tm1", mailbox.LeaseOptions{Max: 10, Self: "tm1"})
	if err != nil {
		t.Fatal(err)
	}
	if acked, err := l.Ack(ctx, sent[2], sent[4]); err != nil || len(acked) != 2 {
		t.Fatalf("lease ack = %v, %v", acked, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := mb.Ack(ctx, "tm1", []uint64{sent[3]}); err != nil || !reflect.DeepEqual(res.Acked, []uint64{sent[3]}) {
		t.Fatalf("ack by seq = %+v, %v", res, err)
	}
	want := []uint64{sent[1], sent[5], sent[6]}
	before := mb.inbox(t, "tm1", mailbox.InboxOptions{})
	if !reflect.DeepEqual(seqs(before), want) {
		t.Fatalf("inbox before the consumer is removed = %v, want %v", seqs(before), want)
	}
	if got := mb.consumers(t); !reflect.DeepEqual(got, []string{mailbox.InboxConsumer("tm1")}) {
		t.Fatalf("consumers after tm1 read = %v, want only its inbox", got)
	}

	mb.waitGone(t, mailbox.InboxConsumer("tm1"), 60*time.Second)

	after := mb.inbox(t, "tm1", mailbox.InboxOptions{})
	if !reflect.DeepEqual(after, before) {
		t.Fatalf("inbox after the consumer was removed = %v, want the same mail as before %v", seqs(after), seqs(before))
	}
	// Acks keep working on the new consumer, and it too goes and comes
	// back.
	if res, err := mb.Ack(mailCtx(t), "tm1", []uint64{sent[5]}); err != nil || !reflect.DeepEqual(res.Acked, []uint64{sent[5]}) {
		t.Fatalf("ack by seq on the new consumer = %+v, %v", res, err)
	}
	mb.waitGone(t, mailbox.InboxConsumer("tm1"), 60*time.Second)
	if got := mb.inbox(t, "tm1", mailbox.InboxOptions{Ack: true}); !reflect.DeepEqual(seqs(got), []uint64{sent[1], sent[6]}) {
		t.Fatalf("inbox after a second removal = %v, want %v", seqs(got), []uint64{sent[1], sent[6]})
	}
	if got := mb.inbox(t, "tm1", mailbox.InboxOptions{}); len(got) != 0 {
		t.Errorf("inbox after acking everything = %v, want empty", seqs(got))
	}
	// Acking again what was acked before the removal is harmless.
	if res, err := mb.Ack(mailCtx(t), "tm1", []uint64{sent[0], sent[2]}); err != nil || !reflect.DeepEqual(res.Already, []uint64{sent[0], sent[2]}) {
		t.Errorf("ack again = %+v, %v, want already", res, err)
	}
}

// The sidecar consumer goes and comes back the same way: mail its sidecar
// acked is not delivered to the next sidecar, mail it did not ack is.
func TestMailbox_IdleSidecarConsumer_RemovedAndRecreated(t *testing.T) {
	t.Parallel() // waits on server timers
	// A short ack wait: the server keeps a consumer until the ack wait of
	// a delivery given back (Nak) has passed too.
	mb := newMailbox(t, mailbox.MailboxConfig{ConsumerIdle: time.Second}, 2*time.Second, "tm1")
	ctx := mailCtx(t)
	a := mb.send(t, teambus.Lead, "tm1", teambus.MsgStatusCheck, "p1", "status?").Seq
	b := mb.send(t, teambus.Lead, "tm1", teambus.MsgShutdownRequest, "s1", "stop").Seq
	c := mb.send(t, teambus.Lead, "tm1", teambus.MsgStatusCheck, "p2", "status?").Seq
	cons, err := mb.SidecarInbox(ctx, "tm1")
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(3, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		md, _ := m.Metadata()
		if md.Sequence.Stream == b {
			_ = m.Nak()
			continue
		}
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
		if err := mb.NoteAcked(ctx, "tm1", true, cons, md.Sequence.Stream); err != nil {
			t.Fatal(err)
		}
	}
	mb.waitGone(t, mailbox.SidecarConsumer("tm1"), 60*time.Second)
	got := mb.inbox(t, "tm1", mailbox.InboxOptions{Sidecar: true})
	if !reflect.DeepEqual(seqs(got), []uint64{b}) {
		t.Errorf("sidecar mail after its consumer was removed = %v, want only the unacked %d (acked %d, %d)", seqs(got), b, a, c)
	}
}

func TestMailbox_AddRecipient_Records(t *testing.T) {
	mb := newMailbox(t, mailbox.MailboxConfig{}, time.Minute, "tm1")
	ctx := mailCtx(t)
	old := mb.send(t, teambus.Lead, teambus.All, teambus.MsgInfo, "b0", "before tm2").Seq
	if err := mb.AddRecipients(ctx, []string{"tm2", "tm3"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	// Again, with tm1 registered before: nothing moves.
	if err := mb.AddRecipients(ctx, []string{"tm1", "tm2", "tm4"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	newer := mb.send(t, teambus.Lead, teambus.All, teambus.MsgInfo, "b1", "after").Seq
	for _, r := range []struct {
		member string
		want   []uint64
	}{{"tm1", []uint64{old, newer}}, {"tm2", []uint64{newer}}, {"tm3", []uint64{newer}}, {"tm4", []uint64{newer}}} {
		if got := mb.inbox(t, r.member, mailbox.InboxOptions{}); !reflect.DeepEqual(seqs(got), r.want) {
			t.Errorf("inbox of %s = %v, want %v", r.member, seqs(got), r.want)
		}
	}
	if err := mb.AddRecipient(ctx, "a.b", time.Minute); !errors.Is(err, teambus.ErrInvalid) {
		t.Errorf("AddRecipient(a.b) = %v, want ErrInvalid", err)
	}
}

// The held-mail cursor of a member goes when idle too, and the one made
// again releases only the held mail not released before.
func TestMailbox_IdleHeldCursor_RemovedAndRecreated(t *testing.T) {
	t.Parallel() // waits on server timers
	mb := newMailbox(t, mailbox.MailboxConfig{ConsumerIdle: time.Second}, time.Minute, "tm1")
	ctx := mailCtx(t)
	hold := func(id string) {
		t.Helper()
		if _, err := mb.Send(ctx, &teambus.Message{ID: id, From: "tm1", To: teambus.Lead, Type: teambus.MsgInfo, Body: id}, true); err != nil {
			t.Fatal(err)
		}
	}
	release := func() []string {
		t.Helper()
		rel, err := mb.ReleaseHeld(mailCtx(t), "tm1")
		if err != nil {
			t.Fatal(err)
		}
		return bodies(rel)
	}
	hold("h1")
	hold("h2")
	if got := release(); !reflect.DeepEqual(got, []string{"h1", "h2"}) {
		t.Fatalf("first release = %v", got)
	}
	mb.waitGone(t, mailbox.HeldConsumer("tm1"), 60*time.Second)
	hold("h3")
	if got := release(); !reflect.DeepEqual(got, []string{"h3"}) {
		t.Errorf("release after the cursor was removed = %v, want only the new [h3]", got)
	}
	if n, err := mb.HeldPending(mailCtx(t), "tm1"); err != nil || n != 0 {
		t.Errorf("held pending = %d, %v", n, err)
	}
}
