package bus_test

import (
	"fmt"
	"testing"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/node/nodetest"
)

// TestMailbox_SendBatch stores 1,100 messages in three atomic batches with
// consecutive sequences, then sends an overlapping batch again: the
// repeats are duplicates, stored once, and the new ones are stored.
func TestMailbox_SendBatch(t *testing.T) {
	n := nodetest.NewBareServer(t)
	c := nodetest.Connect(t, n)
	mb := bus.NewMailbox(c.JS, "alpha", bus.MailboxConfig{})
	ctx := t.Context()
	if err := mb.Declare(ctx); err != nil {
		t.Fatal(err)
	}
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
	if err := mb.Replay(ctx, bus.ReplayFilter{}, func(m teambus.Message) error { count++; return nil }); err != nil {
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
