package mailbox

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus"
)

func FuzzDecode(f *testing.F) {
	ok, _ := json.Marshal(teambus.Message{ID: "k1", From: "tm1", To: teambus.Lead, Type: teambus.MsgInfo, Body: "hi", Data: json.RawMessage(`{"a":1}`), Epoch: 2, TS: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	f.Add(ok, uint64(7), "tb.alpha.mbx.lead.info.tm1")
	f.Add(ok, uint64(8), "tb.alpha.held.tm1.lead.info")
	for _, s := range []string{``, `{`, `null`, `[]`, `"x"`, `{"seq":99,"held":true}`, `{"data":{"a":[1,2]}}`, `{"ts":"yesterday"}`, `{"epoch":1e99}`, `{"body":"\ud800"}`} {
		f.Add([]byte(s), uint64(1), "tb.alpha.mbx.tm1.info.lead")
	}
	f.Fuzz(func(t *testing.T, data []byte, seq uint64, subject string) {
		m, err := decode(data, seq, subject)
		if err != nil {
			if !strings.Contains(err.Error(), "decode message seq") {
				t.Fatalf("error %q does not say what failed", err)
			}
			return
		}
		// The stream, not the payload, says where a message sits.
		if m.Seq != seq {
			t.Fatalf("decoded seq %d, want the stream's %d", m.Seq, seq)
		}
		// Held mail is the held kind of subject, tb.<team>.held.…, whatever
		// the team and member ids are.
		tokens := strings.Split(subject, ".")
		if want := len(tokens) > 2 && tokens[2] == "held"; m.Held != want {
			t.Fatalf("held = %t for subject %q", m.Held, subject)
		}
		// What was decoded encodes again.
		if _, err := json.Marshal(m); err != nil {
			t.Fatalf("re-encode %+v: %v", m, err)
		}
	})
}

func TestDecode_RoundTrip(t *testing.T) {
	in := teambus.Message{Seq: 99, ID: "k1", From: "tm1", To: teambus.All, Type: teambus.MsgReport, Body: "done", Data: json.RawMessage(`{"files":["a.go"]}`), Epoch: 3, TS: time.Date(2026, 1, 1, 0, 0, 0, 5, time.UTC), Held: true}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decode(b, 12, "tb.alpha.mbx.all.report.tm1")
	if err != nil {
		t.Fatal(err)
	}
	want := in
	want.Seq, want.Held = 12, false
	if string(got.Data) != string(want.Data) || got.Seq != want.Seq || got.Held || got.ID != want.ID || got.From != want.From ||
		got.To != want.To || got.Type != want.Type || got.Body != want.Body || got.Epoch != want.Epoch || !got.TS.Equal(want.TS) {
		t.Errorf("decode = %+v, want %+v", got, want)
	}
}
