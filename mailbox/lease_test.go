package mailbox_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/mailbox"
)

func seqsOf(ms []teambus.Message) []uint64 {
	out := []uint64{}
	for _, m := range ms {
		out = append(out, m.Seq)
	}
	return out
}

// TestLease_InFlightAckRelease: leased mail is invisible to other readers;
// acked mail is gone for good; released mail is back at once.
func TestLease_InFlightAckRelease(t *testing.T) {
	ctx := mailCtx(t)
	mb := newMailbox(t, mailbox.MailboxConfig{}, time.Minute, "tm1")
	a := mb.send(t, teambus.Lead, "tm1", teambus.MsgInfo, "a", "one")
	b := mb.send(t, teambus.Lead, "tm1", teambus.MsgInfo, "b", "two")
	c := mb.send(t, teambus.Lead, "tm1", teambus.MsgInfo, "c", "three")

	l, err := mb.Lease(ctx, "tm1", mailbox.LeaseOptions{Max: 2, Self: "tm1"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := seqsOf(l.Messages), []uint64{a.Seq, b.Seq}; !reflect.DeepEqual(got, want) {
		t.Fatalf("leased %v, want %v", got, want)
	}
	// Another reader sees only what is not in flight.
	other, err := mb.Inbox(ctx, "tm1", mailbox.InboxOptions{Self: "tm1"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := seqsOf(other), []uint64{c.Seq}; !reflect.DeepEqual(got, want) {
		t.Fatalf("inbox during lease %v, want %v", got, want)
	}
	acked, err := l.Ack(ctx, a.Seq, 999)
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint64{a.Seq}; !reflect.DeepEqual(acked, want) {
		t.Fatalf("acked %v, want %v", acked, want)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil { // idempotent
		t.Fatal(err)
	}
	after, err := mb.Inbox(ctx, "tm1", mailbox.InboxOptions{Self: "tm1"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := seqsOf(after), []uint64{b.Seq, c.Seq}; !reflect.DeepEqual(got, want) {
		t.Fatalf("inbox after ack+release %v, want %v", got, want)
	}
}

// TestLease_Token: a lease's token acks through the mailbox later; a token
// of another member, another seq or a forged subject is refused.
func TestLease_Token(t *testing.T) {
	ctx := mailCtx(t)
	mb := newMailbox(t, mailbox.MailboxConfig{}, time.Minute, "tm1", "tm2")
	a := mb.send(t, teambus.Lead, "tm1", teambus.MsgInfo, "a", "one")
	b := mb.send(t, teambus.Lead, "tm1", teambus.MsgInfo, "b", "two")
	l, err := mb.Lease(ctx, "tm1", mailbox.LeaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tokA, tokB := l.Token(a.Seq), l.Token(b.Seq)
	if tokA == "" || tokB == "" || l.Token(12345) != "" {
		t.Fatalf("tokens %q %q", tokA, tokB)
	}
	for _, bad := range []struct {
		member, token string
		seq           uint64
	}{
		{"tm2", tokA, a.Seq}, // another member's consumer
		{"tm1", tokA, b.Seq}, // another seq
		{"tm1", "$JS.API.STREAM.DELETE.TBM_alpha", a.Seq},
		{"tm1", "$JS.ACK.TBM_alpha.in_tm1.>", a.Seq},
		{"tm1", "", a.Seq},
	} {
		if err := mb.AckToken(ctx, bad.member, bad.token, bad.seq); !errors.Is(err, teambus.ErrInvalid) {
			t.Errorf("AckToken(%s, %q, %d) = %v, want invalid", bad.member, bad.token, bad.seq, err)
		}
	}
	if err := mb.AckToken(ctx, "tm1", tokA, a.Seq); err != nil {
		t.Fatal(err)
	}
	if err := mb.ReleaseToken(ctx, "tm1", tokB, b.Seq); err != nil {
		t.Fatal(err)
	}
	after, err := mb.Inbox(ctx, "tm1", mailbox.InboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := seqsOf(after), []uint64{b.Seq}; !reflect.DeepEqual(got, want) {
		t.Fatalf("inbox after token ack %v, want %v", got, want)
	}
}
