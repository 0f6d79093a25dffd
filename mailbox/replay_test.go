package mailbox_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/mailbox"
)

func replayAll(t *testing.T, mb *teamMailbox, f mailbox.ReplayFilter) []teambus.Message {
	t.Helper()
	var out []teambus.Message
	err := mb.Replay(mailCtx(t), f, func(m teambus.Message) error {
		out = append(out, m)
		return nil
	})
	if err != nil {
		t.Fatalf("replay %+v: %v", f, err)
	}
	return out
}

func sendHeld(t *testing.T, mb *teamMailbox, from, to, id, body string) mailbox.SendResult {
	t.Helper()
	res, err := mb.Send(mailCtx(t), &teambus.Message{ID: id, From: from, To: to, Type: teambus.MsgInfo, Body: body}, true)
	if err != nil {
		t.Fatalf("send held %q: %v", body, err)
	}
	if !res.Held {
		t.Fatalf("held send = %+v, want Held", res)
	}
	return res
}

func TestMailbox_Replay_Filters(t *testing.T) {
	mb := newMailbox(t, mailbox.MailboxConfig{}, time.Minute, "tm1", "tm2")
	// seq 1..6, then held mail at 7.
	mb.send(t, teambus.Lead, "tm1", teambus.MsgInfo, "1", "lead→tm1 info")
	mb.send(t, "tm1", teambus.Lead, teambus.MsgQuestion, "2", "tm1→lead question")
	mb.send(t, "tm2", teambus.Lead, teambus.MsgReport, "3", "tm2→lead report")
	mb.send(t, teambus.Lead, teambus.All, teambus.MsgInfo, "4", "lead→all info")
	mb.send(t, teambus.Lead, "tm2", teambus.MsgStatusCheck, "5", "lead→tm2 status_check")
	mb.send(t, "tm1", "tm2", teambus.MsgInfo, "6", "tm1→tm2 info")
	sendHeld(t, mb, "tm2", teambus.Lead, "7", "tm2→lead held")

	past := time.Now().Add(-time.Hour)
	future := time.Now().Add(time.Hour)
	tests := []struct {
		name string
		f    mailbox.ReplayFilter
		want []uint64
	}{
		{"everything but held", mailbox.ReplayFilter{}, []uint64{1, 2, 3, 4, 5, 6}},
		{"with held", mailbox.ReplayFilter{IncludeHeld: true}, []uint64{1, 2, 3, 4, 5, 6, 7}},
		{"from", mailbox.ReplayFilter{From: "tm1"}, []uint64{2, 6}},
		{"from with held", mailbox.ReplayFilter{From: "tm2", IncludeHeld: true}, []uint64{3, 7}},
		{"to", mailbox.ReplayFilter{To: teambus.Lead}, []uint64{2, 3}},
		{"to all", mailbox.ReplayFilter{To: teambus.All}, []uint64{4}},
		{"type", mailbox.ReplayFilter{Type: teambus.MsgInfo}, []uint64{1, 4, 6}},
		{"sidecar type", mailbox.ReplayFilter{Type: teambus.MsgStatusCheck}, []uint64{5}},
		{"from and type", mailbox.ReplayFilter{From: teambus.Lead, Type: teambus.MsgInfo}, []uint64{1, 4}},
		{"since seq", mailbox.ReplayFilter{SinceSeq: 4}, []uint64{4, 5, 6}},
		{"until seq", mailbox.ReplayFilter{UntilSeq: 3}, []uint64{1, 2, 3}},
		{"since and until", mailbox.ReplayFilter{SinceSeq: 2, UntilSeq: 4}, []uint64{2, 3, 4}},
		{"limit", mailbox.ReplayFilter{Limit: 2}, []uint64{1, 2}},
		{"since, from and limit", mailbox.ReplayFilter{SinceSeq: 2, From: teambus.Lead, Limit: 2}, []uint64{4, 5}},
		{"since past the end", mailbox.ReplayFilter{SinceSeq: 100}, nil},
		{"no match", mailbox.ReplayFilter{From: "tm9"}, nil},
		{"since a past time", mailbox.ReplayFilter{SinceTime: past}, []uint64{1, 2, 3, 4, 5, 6}},
		{"since a future time", mailbox.ReplayFilter{SinceTime: future}, nil},
		{"until a past time", mailbox.ReplayFilter{UntilTime: past}, nil},
		{"until a future time", mailbox.ReplayFilter{UntilTime: future, Type: teambus.MsgReport}, []uint64{3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := replayAll(t, mb, tt.f)
			want := tt.want
			if want == nil {
				want = []uint64{}
			}
			if !reflect.DeepEqual(seqs(got), want) {
				t.Errorf("replay = %v, want %v", seqs(got), want)
			}
		})
	}

	got := replayAll(t, mb, mailbox.ReplayFilter{SinceSeq: 2, UntilSeq: 2})
	if len(got) != 1 {
		t.Fatalf("replay of seq 2 = %v", seqs(got))
	}
	m := got[0]
	if m.ID != "2" || m.From != "tm1" || m.To != teambus.Lead || m.Type != teambus.MsgQuestion || m.Body != "tm1→lead question" || m.TS.IsZero() {
		t.Errorf("replayed message = %+v", m)
	}
	held := replayAll(t, mb, mailbox.ReplayFilter{SinceSeq: 7, IncludeHeld: true})
	if len(held) != 1 || !held[0].Held {
		t.Errorf("replayed held mail = %+v, want Held set", held)
	}
}

func TestMailbox_Replay_Invalid(t *testing.T) {
	mb := newMailbox(t, mailbox.MailboxConfig{}, time.Minute, "tm1")
	for _, f := range []mailbox.ReplayFilter{
		{From: "a.b"}, {To: "*"}, {Type: "gossip"}, {Limit: -1},
	} {
		err := mb.Replay(mailCtx(t), f, func(teambus.Message) error { return nil })
		if !errors.Is(err, teambus.ErrInvalid) {
			t.Errorf("Replay(%+v) = %v, want ErrInvalid", f, err)
		}
	}
	ghost := mailbox.NewMailbox(mb.js, "ghost", mailbox.MailboxConfig{})
	if err := ghost.Replay(mailCtx(t), mailbox.ReplayFilter{}, func(teambus.Message) error { return nil }); !errors.Is(err, teambus.ErrNotFound) {
		t.Errorf("replay of a missing team = %v, want ErrNotFound", err)
	}
	// An empty mailbox replays nothing, without waiting.
	start := time.Now()
	if got := replayAll(t, mb, mailbox.ReplayFilter{}); len(got) != 0 {
		t.Errorf("replay of an empty mailbox = %v", seqs(got))
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("empty replay took %v", d)
	}
}

func TestMailbox_Replay_StopsOnCallbackError(t *testing.T) {
	mb := newMailbox(t, mailbox.MailboxConfig{}, time.Minute, "tm1")
	for i := 0; i < 5; i++ {
		mb.send(t, teambus.Lead, "tm1", teambus.MsgInfo, fmt.Sprint(i), fmt.Sprint(i))
	}
	stop := errors.New("enough")
	n := 0
	err := mb.Replay(mailCtx(t), mailbox.ReplayFilter{}, func(teambus.Message) error {
		n++
		if n == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 2 {
		t.Errorf("Replay = %v after %d messages, want the callback's error after 2", err, n)
	}
}

func TestMailbox_Replay_Follow(t *testing.T) {
	mb := newMailbox(t, mailbox.MailboxConfig{}, time.Minute, "tm1")
	mb.send(t, teambus.Lead, "tm1", teambus.MsgInfo, "old", "old")
	ctx, cancel := context.WithTimeout(mailCtx(t), 15*time.Second)
	defer cancel()
	got := make(chan teambus.Message, 10)
	done := make(chan error, 1)
	go func() {
		done <- mb.Replay(ctx, mailbox.ReplayFilter{Follow: true, From: "tm1"}, func(m teambus.Message) error {
			got <- m
			return nil
		})
	}()
	mb.send(t, teambus.Lead, "tm1", teambus.MsgInfo, "skip", "not from tm1")
	want := mb.send(t, "tm1", teambus.Lead, teambus.MsgInfo, "new", "new from tm1")
	select {
	case m := <-got:
		if m.Seq != want.Seq {
			t.Errorf("followed message seq %d, want %d", m.Seq, want.Seq)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("replay --follow did not deliver new mail")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("replay --follow after cancel = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("replay --follow did not stop on cancel")
	}
}

func TestMailbox_Tail(t *testing.T) {
	mb := newMailbox(t, mailbox.MailboxConfig{}, time.Minute, "tm1")
	ctx := mailCtx(t)
	if got, err := mb.Tail(ctx, 10); err != nil || len(got) != 0 {
		t.Fatalf("tail of an empty mailbox = %v, %v", seqs(got), err)
	}
	var want []uint64
	for i := 0; i < 30; i++ {
		if i%3 == 0 {
			sendHeld(t, mb, "tm1", teambus.Lead, fmt.Sprint("h", i), "held")
			continue
		}
		want = append(want, mb.send(t, teambus.Lead, "tm1", teambus.MsgInfo, fmt.Sprint(i), fmt.Sprint(i)).Seq)
	}
	got, err := mb.Tail(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(seqs(got), want[len(want)-10:]) {
		t.Errorf("Tail(10) = %v, want %v (held mail skipped)", seqs(got), want[len(want)-10:])
	}
	got, err = mb.Tail(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(seqs(got), want) {
		t.Errorf("Tail(1000) = %v, want all %v", seqs(got), want)
	}
}

func TestMailbox_ReleaseHeld(t *testing.T) {
	mb := newMailbox(t, mailbox.MailboxConfig{}, time.Minute, "tm1", "tm2")
	ctx := mailCtx(t)
	var heldSeqs []uint64
	for i, body := range []string{"h1", "h2", "h3"} {
		to := teambus.Lead
		if i == 1 {
			to = "tm2"
		}
		heldSeqs = append(heldSeqs, sendHeld(t, mb, "tm1", to, "id-"+body, body).Seq)
	}
	// A duplicate held send stores nothing new.
	if dup := sendHeld(t, mb, "tm1", teambus.Lead, "id-h1", "h1 again"); !dup.Duplicate || dup.Seq != heldSeqs[0] {
		t.Errorf("duplicate held send = %+v", dup)
	}
	other := sendHeld(t, mb, "tm2", teambus.Lead, "id-x", "tm2's held mail")

	// Held mail is stored but not delivered.
	if got := mb.inbox(t, teambus.Lead, mailbox.InboxOptions{}); len(got) != 0 {
		t.Fatalf("lead inbox before release = %v, want empty", bodies(got))
	}
	if got := mb.inbox(t, "tm2", mailbox.InboxOptions{}); len(got) != 0 {
		t.Fatalf("tm2 inbox before release = %v, want empty", bodies(got))
	}

	rel, err := mb.ReleaseHeld(ctx, "tm1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(bodies(rel), []string{"h1", "h2", "h3"}) {
		t.Fatalf("released = %v, want h1 h2 h3 in order", bodies(rel))
	}
	for i, m := range rel {
		if m.Held || m.Seq <= heldSeqs[len(heldSeqs)-1] || i > 0 && m.Seq <= rel[i-1].Seq {
			t.Errorf("released message %d = seq %d held %t: want a new, increasing seq", i, m.Seq, m.Held)
		}
		if m.From != "tm1" || m.ID != "id-"+m.Body {
			t.Errorf("released message %d = %+v: sender and id must be kept", i, m)
		}
	}
	lead := mb.inbox(t, teambus.Lead, mailbox.InboxOptions{})
	if !reflect.DeepEqual(bodies(lead), []string{"h1", "h3"}) {
		t.Errorf("lead inbox after release = %v, want h1 h3", bodies(lead))
	}
	if got := mb.inbox(t, "tm2", mailbox.InboxOptions{}); !reflect.DeepEqual(bodies(got), []string{"h2"}) {
		t.Errorf("tm2 inbox after release = %v, want h2", bodies(got))
	}

	// Exactly once: a second release delivers nothing.
	again, err := mb.ReleaseHeld(ctx, "tm1")
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 0 {
		t.Errorf("second release = %v, want nothing", bodies(again))
	}
	if got := mb.inbox(t, teambus.Lead, mailbox.InboxOptions{}); !reflect.DeepEqual(seqs(got), seqs(lead)) {
		t.Errorf("lead inbox after second release = %v, want %v", seqs(got), seqs(lead))
	}

	// Mail held later is released on its own; tm2's held mail was never touched.
	sendHeld(t, mb, "tm1", teambus.Lead, "id-h4", "h4")
	rel, err = mb.ReleaseHeld(ctx, "tm1")
	if err != nil || !reflect.DeepEqual(bodies(rel), []string{"h4"}) {
		t.Errorf("third release = %v, %v; want h4", bodies(rel), err)
	}
	rel, err = mb.ReleaseHeld(ctx, "tm2")
	if err != nil || len(rel) != 1 || rel[0].Body != "tm2's held mail" || rel[0].Seq <= other.Seq {
		t.Errorf("tm2 release = %v, %v", bodies(rel), err)
	}
}

func TestMailbox_ReleaseHeld_RepeatAfterCrashStoresOnce(t *testing.T) {
	mb := newMailbox(t, mailbox.MailboxConfig{}, time.Minute, "tm1")
	ctx := mailCtx(t)
	sendHeld(t, mb, "tm1", teambus.Lead, "a", "a")
	sendHeld(t, mb, "tm1", teambus.Lead, "b", "b")
	// A release that died after storing the delivery of "a" but before
	// acking its held copy. The delivery carries the idempotency key the
	// release derives from the held message.
	ack, err := mb.js.Publish(ctx, "tb.alpha.mbx.lead.info.tm1",
		[]byte(`{"id":"a","from":"tm1","to":"lead","type":"info","body":"a","epoch":0,"ts":"2026-01-01T00:00:00Z"}`),
		jetstream.WithMsgID("tm1/a"))
	if err != nil {
		t.Fatal(err)
	}
	before := mb.count(t)
	rel, err := mb.ReleaseHeld(ctx, "tm1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(bodies(rel), []string{"a", "b"}) {
		t.Fatalf("released = %v, want a b", bodies(rel))
	}
	if rel[0].Seq != ack.Sequence {
		t.Errorf("repeated delivery of a has seq %d, want the stored one %d", rel[0].Seq, ack.Sequence)
	}
	if got := mb.count(t); got != before+1 {
		t.Errorf("stream went from %d to %d messages, want only b added", before, got)
	}
	if got := mb.inbox(t, teambus.Lead, mailbox.InboxOptions{}); !reflect.DeepEqual(bodies(got), []string{"a", "b"}) {
		t.Errorf("lead inbox = %v, want a and b once each", bodies(got))
	}
}
