package node_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// TestService_SendBatch_MemberCredential sends a batch with a member
// credential through the team service: stored in order, from the
// credential's member; sent again, every message is a duplicate; a check
// stores nothing; a bad message refuses the batch naming its line; the
// payload can not name another sender.
func TestService_SendBatch_MemberCredential(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	mb := e.admin.Mailbox("alpha")
	stored := func() int {
		n := 0
		if err := mb.Replay(ctx, mailbox.ReplayFilter{}, func(teambus.Message) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	msgs := []teamapi.BatchMessage{
		{To: "tm2", ID: "k1", Body: "one", Line: 1},
		{ID: "k2", Type: teambus.MsgQuestion, Body: "two", Data: json.RawMessage(`{"n":2}`), Line: 2},
		{To: teambus.All, ID: "k3", Body: "three", Line: 4},
	}
	if res, err := e.tm1.SendMessages(ctx, msgs, true); err != nil || len(res) != 0 || stored() != 0 {
		t.Fatalf("check = %+v, %v; %d stored, want none", res, err, stored())
	}
	res, err := e.tm1.SendMessages(ctx, msgs, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.ID != msgs[i].ID || r.Duplicate || r.Seq != res[0].Seq+uint64(i) {
			t.Fatalf("result %d = %+v, want %s at seq %d", i, r, msgs[i].ID, res[0].Seq+uint64(i))
		}
	}
	var got []teambus.Message
	if err := mb.Replay(ctx, mailbox.ReplayFilter{}, func(m teambus.Message) error { got = append(got, m); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].From != "tm1" || got[0].To != "tm2" || got[1].To != teambus.Lead || got[1].Type != teambus.MsgQuestion ||
		string(got[1].Data) != `{"n":2}` || got[2].To != teambus.All || got[2].Body != "three" {
		t.Fatalf("stored = %+v", got)
	}
	again, err := e.tm1.SendMessages(ctx, msgs, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range again {
		if !r.Duplicate || r.Seq != res[i].Seq {
			t.Fatalf("re-sent result %d = %+v, want a duplicate of seq %d", i, r, res[i].Seq)
		}
	}
	refused := []struct {
		name  string
		msgs  []teamapi.BatchMessage
		inErr string
	}{
		{"shutdown_request from a member", []teamapi.BatchMessage{{Body: "x", ID: "r1"}, {To: "tm2", Type: teambus.MsgShutdownRequest, Body: "stop", Line: 7}}, "line 7: only the lead"},
		{"unknown recipient", []teamapi.BatchMessage{{Body: "x", ID: "r1"}, {To: "ghost", Body: "x", Line: 3}}, "line 3"},
		{"to itself", []teamapi.BatchMessage{{To: "tm1", Body: "x"}}, "message 1: tm1 can not send mail to itself"},
		{"invalid UTF-8", []teamapi.BatchMessage{{Body: "\xff", Line: 9}}, "line 9"},
		{"too many", batchOf(team.MaxSendBatch + 1), "at most 1000"},
		{"empty body", []teamapi.BatchMessage{{Body: "x", ID: "r1"}, {Body: " ", Line: 4}}, "line 4: message body is only white space"},
	}
	for _, tt := range refused {
		_, err := e.tm1.SendMessages(ctx, tt.msgs, false)
		if !errors.Is(err, teambus.ErrInvalid) && !errors.Is(err, teambus.ErrNotFound) || teambus.ExitCode(err) != teambus.ExitPermanent {
			t.Errorf("%s: %v, want refused (exit 2)", tt.name, err)
			continue
		}
		if !strings.Contains(err.Error(), tt.inErr) {
			t.Errorf("%s: error %q does not mention %q", tt.name, err, tt.inErr)
		}
	}
	if n := stored(); n != 3 {
		t.Fatalf("%d messages stored, want 3: a refused batch stored something", n)
	}
	// Claiming to be tm2 in the payload is refused.
	raw, _ := json.Marshal(teamapi.SendBatchRequest{Actor: teamapi.Actor{Member: "tm2"}, Messages: []teamapi.BatchMessage{{Body: "forged"}}})
	reply, err := e.conn.NC.Request(teamapi.MemberServiceSubject(teamapi.VerbSendBatch), raw, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if reply.Header.Get(teamapi.ErrorCodeHeader) != string(teamapi.CodeRefused) {
		t.Fatalf("forged member: reply %q %s, want an invalid error", reply.Header.Get(teamapi.ErrorCodeHeader), reply.Data)
	}
	if n := stored(); n != 3 {
		t.Fatalf("%d messages stored after a forged batch, want 3", n)
	}
}

// batchOf is n messages to the lead.
func batchOf(n int) []teamapi.BatchMessage {
	msgs := make([]teamapi.BatchMessage, n)
	for i := range msgs {
		msgs[i].Body = "x"
	}
	return msgs
}
