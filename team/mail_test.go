package team_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus/bustest"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

func msgBodies(msgs []teambus.Message) []string {
	out := []string{}
	for _, m := range msgs {
		out = append(out, m.Body)
	}
	return out
}

func TestService_Send_StoredSeqAndInbox(t *testing.T) {
	f := newFixture(t, team.Config{})
	f.create(t, "alpha", "L", testPolicy(), "tm1", "tm2")
	ctx := testCtx(t)
	res, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: actorOf("alpha", "tm1"), Type: teambus.MsgQuestion, Body: "which port?", Data: json.RawMessage(`{"file":"main.go"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Seq == 0 || res.Duplicate || res.ID == "" {
		t.Fatalf("send = %+v, want a stored seq and a generated id", res)
	}
	msgs, err := f.svc.Inbox(ctx, leadOf("alpha", "L"), mailbox.InboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 {
		t.Fatalf("lead inbox = %v", msgBodies(msgs))
	}
	m := msgs[0]
	if m.Seq != res.Seq || m.ID != res.ID || m.From != "tm1" || m.To != teambus.Lead || m.Type != teambus.MsgQuestion ||
		m.Epoch != 1 || string(m.Data) != `{"file":"main.go"}` || m.TS.IsZero() {
		t.Errorf("message = %+v", m)
	}
}

func TestService_Send_DuplicateID(t *testing.T) {
	f := newFixture(t, team.Config{})
	f.create(t, "alpha", "L", testPolicy(), "tm1")
	ctx := testCtx(t)
	tm1 := actorOf("alpha", "tm1")
	first, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: tm1, ID: "report-7", Type: teambus.MsgReport, Body: "done"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: tm1, ID: "report-7", Type: teambus.MsgReport, Body: "done, retried"})
	if err != nil {
		t.Fatal(err)
	}
	if !second.Duplicate || second.Seq != first.Seq {
		t.Errorf("second send = %+v, want duplicate of seq %d", second, first.Seq)
	}
	if got := f.msgCount(t, "alpha"); got != 1 {
		t.Errorf("stream holds %d messages, want 1", got)
	}
}

func TestService_Send_RefusedStoresNothing(t *testing.T) {
	f := newFixture(t, team.Config{Mailbox: mailbox.MailboxConfig{MaxBody: 2048}})
	f.create(t, "alpha", "L", testPolicy(), "tm1", "tm2")
	ctx := testCtx(t)
	tests := []struct {
		name  string
		actor team.Actor
		spec  teamapi.SendRequest
		kind  error
		inErr string
	}{
		{"unknown recipient", actorOf("alpha", "tm1"), teamapi.SendRequest{To: "tm9", Body: "x"}, teambus.ErrNotFound, "nothing sent"},
		{"recipient with a dot", actorOf("alpha", "tm1"), teamapi.SendRequest{To: "tm2.x", Body: "x"}, teambus.ErrInvalid, "recipient id"},
		{"wildcard recipient", actorOf("alpha", "tm1"), teamapi.SendRequest{To: ">", Body: "x"}, teambus.ErrInvalid, "recipient id"},
		{"body over the limit", actorOf("alpha", "tm1"), teamapi.SendRequest{Body: strings.Repeat("b", 2049)}, teambus.ErrInvalid, "2049 bytes, at most 2048"},
		{"unknown type", actorOf("alpha", "tm1"), teamapi.SendRequest{Type: "gossip", Body: "x"}, teambus.ErrInvalid, "message type"},
		{"bad id", actorOf("alpha", "tm1"), teamapi.SendRequest{ID: "a b", Body: "x"}, teambus.ErrInvalid, "message id"},
		{"bad data", actorOf("alpha", "tm1"), teamapi.SendRequest{Data: json.RawMessage(`{`), Body: "x"}, teambus.ErrInvalid, "JSON"},
		{"to itself", actorOf("alpha", "tm1"), teamapi.SendRequest{To: "tm1", Body: "x"}, teambus.ErrInvalid, "itself"},
		{"old session", team.Actor{Team: "alpha", Member: "tm1", Session: "stale"}, teamapi.SendRequest{Body: "x"}, teambus.ErrFenced, "session"},
		{"unknown sender", team.Actor{Team: "alpha", Member: "tm9"}, teamapi.SendRequest{Body: "x"}, teambus.ErrNotFound, "tm9"},
		{"unknown team", team.Actor{Team: "ghost", Member: "tm1"}, teamapi.SendRequest{Body: "x"}, teambus.ErrNotFound, "ghost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := f.msgCount(t, "alpha")
			tt.spec.Actor = tt.actor
			_, err := f.svc.Send(ctx, tt.spec)
			if !errors.Is(err, tt.kind) {
				t.Fatalf("Send = %v, want %v", err, tt.kind)
			}
			if !strings.Contains(err.Error(), tt.inErr) {
				t.Errorf("error %q does not mention %q", err, tt.inErr)
			}
			if got := f.msgCount(t, "alpha"); got != before {
				t.Errorf("stream went from %d to %d messages: a refused send stored something", before, got)
			}
		})
	}
}

func TestService_Broadcast(t *testing.T) {
	f := newFixture(t, team.Config{})
	f.create(t, "alpha", "L", testPolicy(), "tm1", "tm2", "tm3")
	ctx := testCtx(t)
	res, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: leadOf("alpha", "L"), To: teambus.All, Body: "standup"})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.msgCount(t, "alpha"); got != 1 {
		t.Errorf("a broadcast stored %d messages, want 1", got)
	}
	for _, m := range []string{"tm1", "tm2", "tm3"} {
		msgs, err := f.svc.Inbox(ctx, actorOf("alpha", m), mailbox.InboxOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 1 || msgs[0].Seq != res.Seq {
			t.Errorf("inbox of %s = %v, want the broadcast once", m, msgBodies(msgs))
		}
	}
	// The sender does not get its own broadcast.
	msgs, err := f.svc.Inbox(ctx, leadOf("alpha", "L"), mailbox.InboxOptions{})
	if err != nil || len(msgs) != 0 {
		t.Errorf("lead inbox = %v, %v; want its own broadcast skipped", msgBodies(msgs), err)
	}
	// Each member acks on its own.
	if _, err := f.svc.Inbox(ctx, actorOf("alpha", "tm1"), mailbox.InboxOptions{Ack: true}); err != nil {
		t.Fatal(err)
	}
	ack, err := f.svc.Ack(ctx, actorOf("alpha", "tm2"), []uint64{res.Seq})
	if err != nil || !reflect.DeepEqual(ack.Acked, []uint64{res.Seq}) {
		t.Fatalf("tm2 ack = %+v, %v", ack, err)
	}
	for m, want := range map[string]int{"tm1": 0, "tm2": 0, "tm3": 1} {
		msgs, err := f.svc.Inbox(ctx, actorOf("alpha", m), mailbox.InboxOptions{})
		if err != nil || len(msgs) != want {
			t.Errorf("inbox of %s after acks = %v, %v; want %d", m, msgBodies(msgs), err, want)
		}
	}
	// A teammate's broadcast reaches the lead and the others.
	if _, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: actorOf("alpha", "tm3"), To: teambus.All, Body: "from tm3"}); err != nil {
		t.Fatal(err)
	}
	msgs, _ = f.svc.Inbox(ctx, leadOf("alpha", "L"), mailbox.InboxOptions{})
	if !reflect.DeepEqual(msgBodies(msgs), []string{"from tm3"}) {
		t.Errorf("lead inbox = %v, want tm3's broadcast", msgBodies(msgs))
	}
	msgs, _ = f.svc.Inbox(ctx, actorOf("alpha", "tm3"), mailbox.InboxOptions{})
	if !reflect.DeepEqual(msgBodies(msgs), []string{"standup"}) {
		t.Errorf("tm3 inbox = %v, want only the lead's broadcast", msgBodies(msgs))
	}
}

func TestService_Ack(t *testing.T) {
	f := newFixture(t, team.Config{})
	f.create(t, "alpha", "L", testPolicy(), "tm1", "tm2")
	ctx := testCtx(t)
	ld := leadOf("alpha", "L")
	var s1, s2 uint64
	for i, to := range []string{"tm1", "tm2"} {
		res, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: ld, To: to, Body: "hi " + to})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			s1 = res.Seq
		} else {
			s2 = res.Seq
		}
	}
	tm1 := actorOf("alpha", "tm1")
	if _, err := f.svc.Ack(ctx, tm1, nil); !errors.Is(err, teambus.ErrInvalid) {
		t.Errorf("ack of nothing = %v, want ErrInvalid", err)
	}
	if _, err := f.svc.Ack(ctx, tm1, []uint64{s1, s2}); err == nil || teambus.ExitCode(err) != teambus.ExitPermanent {
		t.Fatalf("ack including tm2's mail = %v, want a refusal (exit 2)", err)
	}
	msgs, _ := f.svc.Inbox(ctx, tm1, mailbox.InboxOptions{})
	if len(msgs) != 1 {
		t.Fatalf("tm1 inbox after a refused ack = %v, want its mail still there", msgBodies(msgs))
	}
	res, err := f.svc.Ack(ctx, tm1, []uint64{s1})
	if err != nil || !reflect.DeepEqual(res.Acked, []uint64{s1}) {
		t.Fatalf("ack = %+v, %v", res, err)
	}
	res, err = f.svc.Ack(ctx, tm1, []uint64{s1})
	if err != nil || !reflect.DeepEqual(res.Already, []uint64{s1}) || len(res.Acked) != 0 {
		t.Errorf("second ack = %+v, %v; want already acked", res, err)
	}
	if _, err := f.svc.Ack(ctx, team.Actor{Team: "alpha", Member: "tm2", Session: "old"}, []uint64{s2}); !errors.Is(err, teambus.ErrFenced) {
		t.Errorf("ack from an old session = %v, want ErrFenced", err)
	}
	if msgs, _ := f.svc.Inbox(ctx, actorOf("alpha", "tm2"), mailbox.InboxOptions{}); len(msgs) != 1 {
		t.Errorf("tm2 inbox = %v: a fenced ack acked something", msgBodies(msgs))
	}
}

func TestService_Redelivery_PolicyAckWait(t *testing.T) {
	t.Parallel() // waits on server timers
	f := newFixture(t, team.Config{})
	pol := testPolicy()
	pol.AckWait = time.Second
	f.create(t, "alpha", "L", pol, "tm1")
	ctx := testCtx(t)
	res, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: leadOf("alpha", "L"), To: "tm1", Body: "please confirm"})
	if err != nil {
		t.Fatal(err)
	}
	// A hook that has the agent's inbox pushed to it and never acks.
	cons := f.consumer(t, "alpha", mailbox.InboxConsumer("tm1"))
	got := make(chan jetstream.MsgMetadata, 10)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if md, err := m.Metadata(); err == nil {
			got <- *md
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()
	var first time.Time
	for want := uint64(1); want <= 2; want++ {
		select {
		case md := <-got:
			if md.Sequence.Stream != res.Seq || md.NumDelivered != want {
				t.Fatalf("delivery %d = seq %d #%d, want seq %d", want, md.Sequence.Stream, md.NumDelivered, res.Seq)
			}
			if want == 1 {
				first = time.Now()
			} else if gap := time.Since(first); gap < 900*time.Millisecond {
				t.Errorf("redelivered after %v, before the 1s ack-wait", gap)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no delivery %d: unacked mail must be redelivered after ack-wait", want)
		}
	}
}

func TestService_Send_FullMailbox(t *testing.T) {
	// No send quota: one member fills the mailbox.
	f := newFixture(t, team.Config{Mailbox: mailbox.MailboxConfig{MaxBytes: 32 << 10, MaxBody: 4096}, SendQuotaShare: -1})
	f.create(t, "alpha", "L", testPolicy(), "tm1")
	ctx := testCtx(t)
	tm1 := actorOf("alpha", "tm1")
	body := strings.Repeat("m", 2000)
	var stored []uint64
	var err error
	for i := 0; i < 100; i++ {
		var res mailbox.SendResult
		res, err = f.svc.Send(ctx, teamapi.SendRequest{Actor: tm1, ID: fmt.Sprint("m", i), Body: body})
		if err != nil {
			break
		}
		stored = append(stored, res.Seq)
	}
	if err == nil || len(stored) < 5 {
		t.Fatalf("after %d sends: %v; want some mail stored, then a full mailbox", len(stored), err)
	}
	if !errors.Is(err, teambus.ErrFull) || teambus.ExitCode(err) != teambus.ExitPermanent || !strings.Contains(err.Error(), "full") || !strings.Contains(err.Error(), "nothing was sent") {
		t.Errorf("send to a full mailbox = %v, want ErrFull (exit 2) saying it is full and nothing was sent", err)
	}
	if got := f.msgCount(t, "alpha"); got != uint64(len(stored)) {
		t.Errorf("stream holds %d messages, want the %d stored", got, len(stored))
	}
	msgs, err := f.svc.Inbox(ctx, leadOf("alpha", "L"), mailbox.InboxOptions{Max: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != len(stored) || msgs[0].Seq != stored[0] {
		t.Errorf("lead inbox holds %d messages from seq %d, want all %d from %d: old mail must stay", len(msgs), msgs[0].Seq, len(stored), stored[0])
	}
}

func TestService_Zombie_HeldMailReleased(t *testing.T) {
	f, tm1, _ := zombieTM1(t)
	ctx := testCtx(t)
	if m := f.member(t, "alpha", "tm1"); m.Status != teambus.MemberZombie || m.ZombieSince == nil {
		t.Fatalf("member = %+v, want zombie", m)
	}
	for _, body := range []string{"z1", "z2"} {
		res, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: tm1, Body: body})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Held || res.Seq != 0 {
			t.Fatalf("send from a zombie = %+v, want held with no seq yet", res)
		}
	}
	ld := leadOf("alpha", "L")
	if msgs, _ := f.svc.Inbox(ctx, ld, mailbox.InboxOptions{}); len(msgs) != 0 {
		t.Fatalf("lead inbox = %v: held mail was delivered", msgBodies(msgs))
	}
	rel, err := f.svc.Mailbox("alpha").ReleaseHeld(ctx, "tm1")
	if err != nil || !reflect.DeepEqual(msgBodies(rel), []string{"z1", "z2"}) {
		t.Fatalf("release = %v, %v", msgBodies(rel), err)
	}
	msgs, _ := f.svc.Inbox(ctx, ld, mailbox.InboxOptions{})
	if !reflect.DeepEqual(msgBodies(msgs), []string{"z1", "z2"}) || msgs[0].Seq != rel[0].Seq || msgs[0].HeldSince == nil {
		t.Errorf("lead inbox after release = %v", msgs)
	}
	if rel, err := f.svc.Mailbox("alpha").ReleaseHeld(ctx, "tm1"); err != nil || len(rel) != 0 {
		t.Errorf("second release = %v, %v; want nothing", msgBodies(rel), err)
	}
}

func TestService_Inbox_SidecarTrafficSeparate(t *testing.T) {
	f := newFixture(t, team.Config{})
	f.create(t, "alpha", "L", testPolicy(), "tm1")
	ctx := testCtx(t)
	if _, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: leadOf("alpha", "L"), To: "tm1", Type: teambus.MsgStatusCheck, Body: "alive?"}); err != nil {
		t.Fatal(err)
	}
	tm1 := actorOf("alpha", "tm1")
	if msgs, _ := f.svc.Inbox(ctx, tm1, mailbox.InboxOptions{}); len(msgs) != 0 {
		t.Errorf("agent inbox = %v, want no status_check", msgBodies(msgs))
	}
	msgs, err := f.svc.Inbox(ctx, tm1, mailbox.InboxOptions{Sidecar: true})
	if err != nil || len(msgs) != 1 || msgs[0].Type != teambus.MsgStatusCheck {
		t.Errorf("sidecar inbox = %v, %v", msgs, err)
	}
}

func TestService_Inbox_Wait(t *testing.T) {
	f := newFixture(t, team.Config{})
	f.create(t, "alpha", "L", testPolicy(), "tm1")
	ctx := testCtx(t)
	done := make(chan []teambus.Message, 1)
	go func() {
		msgs, err := f.svc.Inbox(ctx, actorOf("alpha", "tm1"), mailbox.InboxOptions{Wait: 10 * time.Second, Ack: true})
		if err != nil {
			t.Error(err)
		}
		done <- msgs
	}()
	cons := f.consumer(t, "alpha", mailbox.InboxConsumer("tm1"))
	bustest.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		info, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumWaiting == 0 {
			return fmt.Errorf("inbox --wait is not waiting")
		}
		return nil
	})
	if _, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: leadOf("alpha", "L"), To: "tm1", Body: "wake up"}); err != nil {
		t.Fatal(err)
	}
	select {
	case msgs := <-done:
		if !reflect.DeepEqual(msgBodies(msgs), []string{"wake up"}) {
			t.Errorf("inbox --wait = %v", msgBodies(msgs))
		}
	case <-time.After(15 * time.Second):
		t.Fatal("inbox --wait did not return when mail arrived")
	}
}

// TestService_Held_ReleasedBeforeNewMail: mail sent after leaving zombie
// mode never overtakes held mail, and the seq a sender is told is the seq
// the recipient and replay see (issue 12 item 2).
func TestService_Held_ReleasedBeforeNewMail(t *testing.T) {
	f, tm1, epoch := zombieTM1(t)
	ctx := testCtx(t)
	for _, body := range []string{"z1", "z2"} {
		if res, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: tm1, Body: body}); err != nil || !res.Held || res.Seq != 0 {
			t.Fatalf("send %s from a zombie = %+v, %v: want held, no seq yet", body, res, err)
		}
	}
	if m := f.member(t, "alpha", "tm1"); m.HeldSince == nil {
		t.Fatalf("member = %+v, want the held mark", m)
	}
	// Zombie mode is left; nobody released the held mail yet (the
	// sidecar is between the two steps, or gone).
	if err := f.svc.SetMemberStatus(ctx, "alpha", "tm1", epoch, teambus.MemberIdle); err != nil {
		t.Fatal(err)
	}
	res, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: tm1, Body: "n1"})
	if err != nil || res.Held {
		t.Fatalf("send after zombie mode = %+v, %v", res, err)
	}
	msgs, err := f.svc.Inbox(ctx, leadOf("alpha", "L"), mailbox.InboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := msgBodies(msgs); !reflect.DeepEqual(got, []string{"z1", "z2", "n1"}) {
		t.Fatalf("lead inbox = %v, want z1, z2, n1: held mail first", got)
	}
	if msgs[2].Seq != res.Seq {
		t.Errorf("sender was told seq %d, the lead sees n1 at seq %d", res.Seq, msgs[2].Seq)
	}
	if msgs[0].HeldSince == nil || msgs[2].HeldSince != nil {
		t.Errorf("held_since marks = %v, %v, want on released mail only", msgs[0].HeldSince, msgs[2].HeldSince)
	}
	var replayed []uint64
	if err := f.svc.Mailbox("alpha").Replay(ctx, mailbox.ReplayFilter{From: "tm1"}, func(m teambus.Message) error {
		replayed = append(replayed, m.Seq)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []uint64{msgs[0].Seq, msgs[1].Seq, msgs[2].Seq}; !reflect.DeepEqual(replayed, want) {
		t.Errorf("replay seqs = %v, inbox seqs %v", replayed, want)
	}
	if m := f.member(t, "alpha", "tm1"); m.HeldSince != nil {
		t.Errorf("held mark still set after release: %v", m.HeldSince)
	}
	// The same id sent again after the release is stored once.
	if _, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: tm1, ID: msgs[0].ID, Body: "z1"}); err != nil {
		t.Fatal(err)
	}
	if n := f.msgCount(t, "alpha"); n != 5 {
		t.Errorf("stream holds %d messages, want 5 (2 held, 2 released, n1; no second z1)", n)
	}
}

// Issue 15 item 6: a created team holds no consumer (its recipients are
// registered by records written in one batch), a member's consumer is
// made by its first read, and a member added later reads only what was
// sent after it joined the mailbox.
func TestService_CreateTeam_NoIdleConsumers(t *testing.T) {
	f := newFixture(t, team.Config{})
	ctx := testCtx(t)
	if _, err := f.svc.CreateTeam(ctx, "alpha", "L", []team.MemberSpec{{ID: "tm1"}, {ID: "tm2"}}, testPolicy()); err != nil {
		t.Fatal(err)
	}
	consumers := func() []string {
		t.Helper()
		st, err := f.conn.JS.Stream(ctx, mailbox.MailboxPrefix+"alpha")
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		names := st.ConsumerNames(ctx)
		for n := range names.Name() {
			out = append(out, n)
		}
		if err := names.Err(); err != nil {
			t.Fatal(err)
		}
		sort.Strings(out)
		return out
	}
	if got := consumers(); len(got) != 0 {
		t.Fatalf("consumers of a new team = %v, want none", got)
	}
	if mailbox.RecipientBucketPrefix != kv.StatePrefix {
		t.Fatalf("recipient records in bucket %s…, the state bucket is %s…", mailbox.RecipientBucketPrefix, kv.StatePrefix)
	}
	state, err := f.conn.JS.KeyValue(ctx, mailbox.RecipientBucketPrefix+"alpha")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := state.ListKeysFiltered(ctx, "recipient.>")
	if err != nil {
		t.Fatal(err)
	}
	var recs []string
	for k := range keys.Keys() {
		recs = append(recs, k)
	}
	sort.Strings(recs)
	if want := []string{"recipient.lead", "recipient.tm1", "recipient.tm2"}; !reflect.DeepEqual(recs, want) {
		t.Errorf("recipient records = %v, want %v", recs, want)
	}
	if _, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: leadOf("alpha", "L"), To: teambus.All, Body: "before tm3"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.AddMember(ctx, "alpha", team.MemberSpec{ID: "tm3"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: leadOf("alpha", "L"), To: teambus.All, Body: "after tm3"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		member string
		want   []string
	}{{"tm1", []string{"before tm3", "after tm3"}}, {"tm3", []string{"after tm3"}}} {
		if _, err := f.svc.Join(ctx, "alpha", c.member, "s-"+c.member); err != nil {
			t.Fatal(err)
		}
		msgs, err := f.svc.Inbox(ctx, actorOf("alpha", c.member), mailbox.InboxOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := msgBodies(msgs); !reflect.DeepEqual(got, c.want) {
			t.Errorf("inbox of %s = %v, want %v", c.member, got, c.want)
		}
	}
	if got, want := consumers(), []string{mailbox.InboxConsumer("tm1"), mailbox.InboxConsumer("tm3")}; !reflect.DeepEqual(got, want) {
		t.Errorf("consumers after tm1 and tm3 read = %v, want %v", got, want)
	}
	if _, err := f.svc.Inbox(ctx, actorOf("alpha", "tm9"), mailbox.InboxOptions{}); !errors.Is(err, teambus.ErrNotFound) {
		t.Errorf("inbox of a non-member = %v, want ErrNotFound", err)
	}
}

// Issue 15 item 6: a sidecar's consumer removed idle and made again by
// the next sidecar delivers the control mail the last one did not ack,
// and none it acked (out of order), before any new mail.
func TestSidecarAPI_ConsumeSidecar_AfterIdleRemoval(t *testing.T) {
	t.Parallel() // waits on server timers
	f := newFixture(t, team.Config{Mailbox: mailbox.MailboxConfig{ConsumerIdle: time.Second}})
	f.create(t, "alpha", "L", testPolicy(), "tm1")
	ctx := testCtx(t)
	send := func(id string) uint64 {
		t.Helper()
		res, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: leadOf("alpha", "L"), To: "tm1", Type: teambus.MsgStatusCheck, ID: id, Body: "status?"})
		if err != nil {
			t.Fatal(err)
		}
		return res.Seq
	}
	a, b, c := send("p1"), send("p2"), send("p3")
	api := f.svc.SidecarAPI()
	next := func(ch <-chan teambus.Delivery) teambus.Delivery {
		t.Helper()
		select {
		case d := <-ch:
			return d
		case <-ctx.Done():
			t.Fatal("no delivery")
		}
		return teambus.Delivery{}
	}
	ch, stop, err := api.ConsumeSidecar(ctx, "alpha", "tm1")
	if err != nil {
		t.Fatal(err)
	}
	var back []teambus.Delivery
	for range 3 {
		d := next(ch)
		if d.Msg.Seq == b {
			back = append(back, d)
			continue
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	stop(back...)
	bustest.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		_, err := f.conn.JS.Consumer(ctx, mailbox.MailboxPrefix+"alpha", mailbox.SidecarConsumer("tm1"))
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			return nil
		}
		return fmt.Errorf("sidecar consumer still there (%v)", err)
	})
	d := send("p4")
	ch, stop, err = api.ConsumeSidecar(ctx, "alpha", "tm1")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var got []uint64
	for range 2 {
		m := next(ch)
		got = append(got, m.Msg.Seq)
		if err := m.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if want := []uint64{b, d}; !reflect.DeepEqual(got, want) {
		t.Errorf("deliveries after the consumer was made again = %v, want %v (acked before: %d, %d)", got, want, a, c)
	}
}
