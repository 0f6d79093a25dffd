package mailbox_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/mailbox"
)

// TestMailbox_SendBatch stores 1,100 messages in three atomic batches with
// consecutive sequences, then sends an overlapping batch again: the
// repeats are duplicates, stored once, and the new ones are stored.
func TestMailbox_SendBatch(t *testing.T) {
	mb := newMailbox(t, mailbox.MailboxConfig{}, 0).Mailbox
	ctx := t.Context()
	msgs := func(from, to int) []*teambus.Message {
		var out []*teambus.Message
		for i := from; i < to; i++ {
			out = append(out, &teambus.Message{From: "tm1", To: teambus.Lead, Type: teambus.MsgInfo, ID: fmt.Sprintf("m%04d", i), Body: fmt.Sprintf("body %d", i)})
		}
		return out
	}
	res, err := mb.SendBatch(ctx, msgs(0, 1100), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1100 {
		t.Fatalf("%d results, want 1100", len(res))
	}
	for i, r := range res {
		if r.Seq != uint64(i+1) || r.Duplicate || r.ID != fmt.Sprintf("m%04d", i) {
			t.Fatalf("result %d = %+v, want seq %d", i, r, i+1)
		}
	}
	// A retry after a lost ack overlaps what is stored.
	res, err = mb.SendBatch(ctx, msgs(1090, 1110), false)
	if err != nil {
		t.Fatal(err)
	}
	dups, fresh := 0, 0
	for _, r := range res {
		if r.Duplicate {
			dups++
		} else {
			fresh++
		}
	}
	if dups != 10 || fresh != 10 {
		t.Fatalf("overlapping batch: %d duplicates and %d new, want 10 and 10", dups, fresh)
	}
	count := 0
	if err := mb.Replay(ctx, mailbox.ReplayFilter{}, func(m teambus.Message) error { count++; return nil }); err != nil {
		t.Fatal(err)
	}
	if count != 1110 {
		t.Fatalf("%d messages stored, want 1110 (each once)", count)
	}
	// Bad input refuses the whole call before anything is sent.
	bad := msgs(2000, 2003)
	bad[2].To = "no such"
	if _, err := mb.SendBatch(ctx, bad, false); err == nil || teambus.ExitCode(err) != teambus.ExitPermanent {
		t.Fatalf("batch with a bad recipient: %v, want exit 2", err)
	}
}

// TestMailbox_SendBatchFenced stores a batch while the sender's marker is
// the latest; once a newer incarnation marked itself, the batch is
// refused whole with the latest marker, and nothing of it is stored.
func TestMailbox_SendBatchFenced(t *testing.T) {
	mb := newMailbox(t, mailbox.MailboxConfig{}, 0).Mailbox
	ctx := t.Context()
	marker, err := mb.MarkIncarnation(ctx, "tm1", 1)
	if err != nil {
		t.Fatal(err)
	}
	batch := func(prefix string, n int) []*teambus.Message {
		var out []*teambus.Message
		for i := range n {
			out = append(out, &teambus.Message{From: "tm1", To: teambus.Lead, Type: teambus.MsgInfo, ID: fmt.Sprintf("%s%04d", prefix, i), Body: "x"})
		}
		return out
	}
	res, err := mb.SendBatchFenced(ctx, batch("a", 600), false, marker)
	if err != nil || len(res) != 600 || res[599].Seq != res[0].Seq+599 {
		t.Fatalf("fenced batch = %d results, %v", len(res), err)
	}
	// A retry of an overlapping batch falls back to fenced single sends.
	res, err = mb.SendBatchFenced(ctx, batch("a", 602), false, marker)
	if err != nil || len(res) != 602 || !res[0].Duplicate || res[601].Duplicate {
		t.Fatalf("overlapping fenced batch = %d results, %v", len(res), err)
	}
	newer, err := mb.MarkIncarnation(ctx, "tm1", 2)
	if err != nil {
		t.Fatal(err)
	}
	res, err = mb.SendBatchFenced(ctx, batch("b", 3), false, marker)
	var moved *mailbox.MarkerMovedError
	if !errors.As(err, &moved) || moved.Seq != newer || len(res) != 0 {
		t.Fatalf("batch of the old incarnation = %+v, %v; want MarkerMovedError at seq %d", res, err, newer)
	}
	count := 0
	if err := mb.Replay(ctx, mailbox.ReplayFilter{}, func(m teambus.Message) error { count++; return nil }); err != nil {
		t.Fatal(err)
	}
	if count != 602 {
		t.Fatalf("%d messages stored, want 602", count)
	}
	if _, err := mb.SendBatchFenced(ctx, []*teambus.Message{batch("c", 1)[0], {From: "tm2", To: teambus.Lead, Type: teambus.MsgInfo, ID: "x", Body: "x"}}, false, newer); teambus.ExitCode(err) != teambus.ExitPermanent {
		t.Fatalf("fenced batch of two senders = %v, want exit 2", err)
	}
}
