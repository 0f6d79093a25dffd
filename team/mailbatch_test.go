package team_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// batchSpecs are n messages from line 1 on, to tm2, the lead and all in
// turn, with ids b0000...
func batchSpecs(n int) []teamapi.BatchMessage {
	to := []string{"tm2", "", teambus.All}
	out := make([]teamapi.BatchMessage, n)
	for i := range out {
		out[i] = teamapi.BatchMessage{To: to[i%3], ID: fmt.Sprintf("b%04d", i), Body: fmt.Sprintf("body %d", i), Line: i + 1}
	}
	return out
}

// TestService_SendBatch_OrderSeqsRerun sends 700 messages (two atomic
// batches): they are stored in order with consecutive sequences, and the
// same batch sent again (a re-run after a crash) stores nothing: every
// message comes back duplicate with its original seq.
func TestService_SendBatch_OrderSeqsRerun(t *testing.T) {
	f := newFixture(t, team.Config{})
	f.create(t, "alpha", "L", testPolicy(), "tm1", "tm2")
	ctx := testCtx(t)
	tm1 := actorOf("alpha", "tm1")
	specs := batchSpecs(700)
	res, err := f.svc.SendBatch(ctx, tm1, specs)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(specs) {
		t.Fatalf("%d results, want %d", len(res), len(specs))
	}
	for i, r := range res {
		if r.ID != specs[i].ID || r.Duplicate || r.Held || r.Seq != res[0].Seq+uint64(i) {
			t.Fatalf("result %d = %+v, want id %s at seq %d", i, r, specs[i].ID, res[0].Seq+uint64(i))
		}
	}
	var got []string
	if err := f.svc.Mailbox("alpha").Replay(ctx, mailbox.ReplayFilter{From: "tm1"}, func(m teambus.Message) error {
		want := specs[len(got)]
		if m.Epoch != 1 || m.Type != teambus.MsgInfo || (want.To != "" && m.To != want.To) || (want.To == "" && m.To != teambus.Lead) {
			t.Errorf("stored %+v for line %d", m, want.Line)
		}
		got = append(got, m.ID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(specs) || got[0] != "b0000" || got[699] != "b0699" {
		t.Fatalf("replay holds %d messages (%v...), want 700 in order", len(got), got[:min(3, len(got))])
	}
	if at, err := f.svc.Store().Activity(ctx, "alpha", "tm1"); err != nil || at.IsZero() {
		t.Errorf("activity = %v, %v: the batch is activity", at, err)
	}
	again, err := f.svc.SendBatch(ctx, tm1, specs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range again {
		if !r.Duplicate || r.Seq != res[i].Seq {
			t.Fatalf("re-run result %d = %+v, want duplicate of seq %d", i, r, res[i].Seq)
		}
	}
	if n := f.msgCount(t, "alpha"); n != 700 {
		t.Errorf("stream holds %d messages, want 700 (each once)", n)
	}
	// The lead sends too (not fenced on a marker); lead is its default
	// recipient only for members, so it names them.
	lres, err := f.svc.SendBatch(ctx, leadOf("alpha", "L"), []teamapi.BatchMessage{{To: "tm1", Body: "a"}, {To: teambus.All, Body: "b"}})
	if err != nil || len(lres) != 2 || lres[1].Seq != lres[0].Seq+1 {
		t.Fatalf("lead batch = %+v, %v", lres, err)
	}
}

// TestService_SendBatch_RefusedStoresNothing: one bad message refuses the
// whole batch, the error names its line, and nothing is stored.
func TestService_SendBatch_RefusedStoresNothing(t *testing.T) {
	f := newFixture(t, team.Config{Mailbox: mailbox.MailboxConfig{MaxBody: 2048}})
	f.create(t, "alpha", "L", testPolicy(), "tm1", "tm2")
	ctx := testCtx(t)
	with := func(i int, edit func(*teamapi.BatchMessage)) []teamapi.BatchMessage {
		s := batchSpecs(5)
		edit(&s[i])
		return s
	}
	tests := []struct {
		name  string
		actor team.Actor
		specs []teamapi.BatchMessage
		kind  error
		inErr string
	}{
		{"unknown recipient", actorOf("alpha", "tm1"), with(4, func(s *teamapi.BatchMessage) { s.To = "tm9" }), teambus.ErrNotFound, "line 5"},
		{"recipient with a dot", actorOf("alpha", "tm1"), with(2, func(s *teamapi.BatchMessage) { s.To = "tm2.x" }), teambus.ErrInvalid, "line 3: invalid recipient"},
		{"to itself", actorOf("alpha", "tm1"), with(1, func(s *teamapi.BatchMessage) { s.To = "tm1" }), teambus.ErrInvalid, "line 2: tm1 can not send mail to itself"},
		{"body over the limit", actorOf("alpha", "tm1"), with(3, func(s *teamapi.BatchMessage) { s.Body = strings.Repeat("b", 2049) }), teambus.ErrInvalid, "line 4: message body is 2049 bytes"},
		{"unknown type", actorOf("alpha", "tm1"), with(0, func(s *teamapi.BatchMessage) { s.Type = "gossip" }), teambus.ErrInvalid, "line 1"},
		{"bad id", actorOf("alpha", "tm1"), with(0, func(s *teamapi.BatchMessage) { s.ID = "a b" }), teambus.ErrInvalid, "line 1: invalid message id"},
		{"same id twice", actorOf("alpha", "tm1"), with(3, func(s *teamapi.BatchMessage) { s.ID = "b0001" }), teambus.ErrInvalid, "line 4: id \"b0001\" is also the id of line 2"},
		{"bad data", actorOf("alpha", "tm1"), with(2, func(s *teamapi.BatchMessage) { s.Data = []byte("{") }), teambus.ErrInvalid, "line 3"},
		{"old session", team.Actor{Team: "alpha", Member: "tm1", Session: "stale"}, batchSpecs(5), teambus.ErrFenced, "session"},
		{"old lead session", leadOf("alpha", "old"), []teamapi.BatchMessage{{To: "tm1", Body: "x"}}, teambus.ErrFenced, "lead session"},
		{"unknown sender", team.Actor{Team: "alpha", Member: "tm9"}, batchSpecs(5), teambus.ErrNotFound, "tm9"},
		{"empty", actorOf("alpha", "tm1"), nil, teambus.ErrInvalid, "no messages"},
		{"too many", actorOf("alpha", "tm1"), make([]teamapi.BatchMessage, team.MaxSendBatch+1), teambus.ErrInvalid, "at most 1000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := f.msgCount(t, "alpha")
			if err := f.svc.CheckBatch(ctx, tt.actor, tt.specs); !errors.Is(err, tt.kind) {
				t.Fatalf("CheckBatch = %v, want %v", err, tt.kind)
			}
			res, err := f.svc.SendBatch(ctx, tt.actor, tt.specs)
			if !errors.Is(err, tt.kind) || len(res) != 0 {
				t.Fatalf("SendBatch = %+v, %v; want %v", res, err, tt.kind)
			}
			if !strings.Contains(err.Error(), tt.inErr) {
				t.Errorf("error %q does not mention %q", err, tt.inErr)
			}
			if got := f.msgCount(t, "alpha"); got != before {
				t.Errorf("stream went from %d to %d messages: a refused batch stored something", before, got)
			}
		})
	}
	if err := f.svc.CheckBatch(ctx, actorOf("alpha", "tm1"), batchSpecs(5)); err != nil {
		t.Errorf("CheckBatch of a good batch = %v", err)
	}
	if n := f.msgCount(t, "alpha"); n != 0 {
		t.Errorf("CheckBatch stored %d messages", n)
	}
}

// TestService_SendBatch_FencedIncarnation: once the member registered
// again (a respawn in a new session), the old incarnation's batch is
// refused and nothing of it is stored.
func TestService_SendBatch_FencedIncarnation(t *testing.T) {
	f := newFixture(t, team.Config{})
	f.create(t, "alpha", "L", testPolicy(), "tm1", "tm2")
	ctx := testCtx(t)
	if _, err := f.svc.Join(ctx, "alpha", "tm1", "s-new"); err != nil {
		t.Fatal(err)
	}
	_, err := f.svc.SendBatch(ctx, actorOf("alpha", "tm1"), batchSpecs(3))
	if !errors.Is(err, teambus.ErrFenced) || teambus.ExitCode(err) != teambus.ExitConflict {
		t.Fatalf("batch of the old incarnation = %v, want fenced (exit 3)", err)
	}
	if n := f.msgCount(t, "alpha"); n != 0 {
		t.Fatalf("stream holds %d messages, want 0", n)
	}
	res, err := f.svc.SendBatch(ctx, team.Actor{Team: "alpha", Member: "tm1", Session: "s-new"}, batchSpecs(3))
	if err != nil || len(res) != 3 {
		t.Fatalf("batch of the new incarnation = %+v, %v", res, err)
	}
}

// TestService_SendBatch_Zombie: a zombie's batch is held like its single
// sends (no seq yet) and released in order before its later mail.
func TestService_SendBatch_Zombie(t *testing.T) {
	f, tm1, epoch := zombieTM1(t)
	ctx := testCtx(t)
	res, err := f.svc.SendBatch(ctx, tm1, []teamapi.BatchMessage{{Body: "z1"}, {Body: "z2"}, {Body: "z3"}})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if !r.Held || r.Seq != 0 {
			t.Fatalf("result %d from a zombie = %+v, want held with no seq yet", i, r)
		}
	}
	if m := f.member(t, "alpha", "tm1"); m.HeldSince == nil {
		t.Fatalf("member = %+v, want the held mark", m)
	}
	ld := leadOf("alpha", "L")
	if msgs, _ := f.svc.Inbox(ctx, ld, mailbox.InboxOptions{}); len(msgs) != 0 {
		t.Fatalf("lead inbox = %v: held mail was delivered", msgBodies(msgs))
	}
	if err := f.svc.SetMemberStatus(ctx, "alpha", "tm1", epoch, teambus.MemberIdle); err != nil {
		t.Fatal(err)
	}
	res, err = f.svc.SendBatch(ctx, tm1, []teamapi.BatchMessage{{Body: "n1"}, {Body: "n2"}})
	if err != nil || res[0].Held || res[1].Seq != res[0].Seq+1 {
		t.Fatalf("batch after zombie mode = %+v, %v", res, err)
	}
	msgs, err := f.svc.Inbox(ctx, ld, mailbox.InboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := msgBodies(msgs); !reflect.DeepEqual(got, []string{"z1", "z2", "z3", "n1", "n2"}) {
		t.Fatalf("lead inbox = %v, want the held mail first, in order", got)
	}
}

func TestParseSendBatch(t *testing.T) {
	in := "{\"to\":\"tm2\",\"body\":\"one\",\"type\":\"question\",\"id\":\"k1\",\"data\":{\"n\":1}}\n\n  {\"body\":\"two\"}  \r\n{\"to\":\"all\",\"body\":\"three\",\"data\":null}\n"
	got, err := team.ParseSendBatch(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []teamapi.BatchMessage{
		{To: "tm2", Type: teambus.MsgQuestion, ID: "k1", Body: "one", Data: []byte(`{"n":1}`), Line: 1},
		{To: teambus.Lead, Type: teambus.MsgInfo, ID: team.FileMessageID(3, []byte(`{"body":"two"}`)), Body: "two", Line: 3},
		{To: teambus.All, Type: teambus.MsgInfo, ID: team.FileMessageID(4, []byte(`{"to":"all","body":"three","data":null}`)), Body: "three", Line: 4},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseSendBatch =\n%+v\nwant\n%+v", got, want)
	}
	if err := teambus.ValidateMessageID(got[1].ID); err != nil || !strings.HasPrefix(got[1].ID, "f3-") {
		t.Errorf("derived id %q: %v", got[1].ID, err)
	}
	// The same file gives the same ids; the same text on another line
	// another id.
	again, _ := team.ParseSendBatch(strings.NewReader(in))
	if !reflect.DeepEqual(again, got) {
		t.Errorf("second parse differs: %+v", again)
	}
	moved, _ := team.ParseSendBatch(strings.NewReader("\n" + in))
	if moved[1].ID == got[1].ID {
		t.Errorf("a line moved down kept its id %q", got[1].ID)
	}
	bad := []struct{ in, inErr string }{
		{`{"body":"x"}` + "\n" + `{"body":"y",`, "line 2: not a message"},
		{`{"body":"x","from":"tm3"}`, `line 1: not a message (fields to, body, type, id, data): json: unknown field "from"`},
		{`{"body":"x","type":"gossip"}`, "line 1: invalid message type"},
		{`{"body":"x","id":"a b"}`, "line 1: invalid message id"},
		{`{"body":"x","to":"tm.2"}`, "line 1: invalid recipient"},
		{`{"body":"x","to":">"}`, "line 1: invalid recipient"},
		{`{"to":"tm2"}`, "line 1: no body"},
		{`{"body":"x"} {"body":"y"}`, "line 1: more than one JSON value"},
		{`{"body":"x","id":"k"}` + "\n" + `{"body":"y","id":"k"}`, `line 2: id "k" is also the id of line 1`},
		{`{"body":"x","data":{]}`, "line 1: not a message"},
		{`[]`, "line 1: not a message"},
		{"\n  \n", "no messages"},
	}
	for _, tt := range bad {
		_, err := team.ParseSendBatch(strings.NewReader(tt.in))
		if !errors.Is(err, teambus.ErrInvalid) || !strings.Contains(err.Error(), tt.inErr) {
			t.Errorf("ParseSendBatch(%q) = %v, want invalid mentioning %q", tt.in, err, tt.inErr)
		}
	}
}

func FuzzParseSendBatch(f *testing.F) {
	for _, s := range []string{
		`{"to":"tm2","body":"x","type":"report","id":"k","data":{"a":[1]}}`,
		"{\"body\":\"a\"}\n\n{\"body\":\"a\"}\n",
		`{"body":"x"} {"body":"y"}`, `{"body":null}`, `{"to":"a.b","body":"x"}`, `[]`, "\x00\xff",
		`{"body":"\u001b[31mred","id":"\u0000"}`, `{"body":"x","to":"all","type":"shutdown_request"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		specs, err := team.ParseSendBatch(strings.NewReader(s))
		if err != nil {
			if !errors.Is(err, teambus.ErrInvalid) {
				t.Fatalf("ParseSendBatch(%q) error %v is not ErrInvalid", s, err)
			}
			if strings.ContainsAny(err.Error(), "\n\r\x1b") {
				t.Fatalf("ParseSendBatch(%q) error %q is not one clean line", s, err)
			}
			return
		}
		lines := strings.Count(s, "\n") + 1
		ids := map[string]bool{}
		last := 0
		for _, sp := range specs {
			if sp.Line <= last || sp.Line > lines || ids[sp.ID] {
				t.Fatalf("ParseSendBatch(%q) gave %+v after line %d", s, sp, last)
			}
			last, ids[sp.ID] = sp.Line, true
			if err := teambus.ValidateMessageID(sp.ID); err != nil {
				t.Fatalf("ParseSendBatch(%q) gave id %q: %v", s, sp.ID, err)
			}
			if _, err := teambus.ParseMessageType(string(sp.Type)); err != nil {
				t.Fatalf("ParseSendBatch(%q) gave type %q", s, sp.Type)
			}
			if sp.To != teambus.Lead && sp.To != teambus.All {
				if err := teambus.ValidateID("recipient", sp.To); err != nil {
					t.Fatalf("ParseSendBatch(%q) gave recipient %q", s, sp.To)
				}
			}
		}
		again, err := team.ParseSendBatch(strings.NewReader(s))
		if err != nil || !reflect.DeepEqual(again, specs) {
			t.Fatalf("ParseSendBatch(%q) is not deterministic", s)
		}
	})
}
