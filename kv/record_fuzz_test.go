package kv

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/teambus/teambus"
)

// FuzzDecodeRecord feeds the state record decoder any key and value: it
// never panics; a record it accepts is the one its key names and survives
// a round trip; a reason it gives is one short line of plain text (team
// show prints it).
func FuzzDecodeRecord(f *testing.F) {
	seeds := []struct{ key, value string }{
		{"team", `{"id":"alpha","status":"active","policy":{"heartbeat":"30s","member_timeout":"10m"}}`},
		{"team", `{"id":"alpha","status":"active","policy":{"heartbeat":"0s"}}`},
		{"team", `{"id":"beta","status":"active"}`},
		{"member.tm1", `{"id":"tm1","status":"spawned","epoch":1,"session":"s"}`},
		{"member.tm1", `{"id":"tm2","status":"idle"}`},
		{"member.lead", `{"id":"lead","status":"idle"}`},
		{"task.t1", `{"id":"t1","status":"available","dependencies":["t0"],"description":"do \u001b[31mit"}`},
		{"task.t1", `{"id":"t1","status":"available","dependencies":["a.b"]}`},
		{"task.t1", `{"id":"t1","status":"done"}`},
		{"task.t1", `null`},
		{"task.t1", ``},
		{"task.t1", "\xff\xfe"},
		{"activity.tm1", `"2026-11-24T20:00:00Z"`},
		{"activity.tm1", `"yesterday"`},
		{"other.key", `anything`},
	}
	for _, s := range seeds {
		f.Add(s.key, []byte(s.value))
	}
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		r, err := DecodeRecord("alpha", key, value)
		if err != nil {
			why := reason(err)
			if why == "" || len(why) > maxReason+len("…") || !utf8.ValidString(why) {
				t.Fatalf("reason %q for %q=%q", why, key, value)
			}
			for _, c := range why {
				if unicode.IsControl(c) || c == '\u2028' || c == '\u2029' {
					t.Fatalf("reason %q holds %U", why, c)
				}
			}
			return
		}
		set := 0
		var v any
		switch {
		case r.Team != nil:
			set++
			v = r.Team
			if key != keyTeam || r.Team.ID != "alpha" {
				t.Fatalf("%q decoded as team %q", key, r.Team.ID)
			}
		case r.Member != nil:
			set++
			v = r.Member
			if key != preMember+r.Member.ID {
				t.Fatalf("%q decoded as member %q", key, r.Member.ID)
			}
		case r.Task != nil:
			set++
			v = r.Task
			if key != preTask+r.Task.ID {
				t.Fatalf("%q decoded as task %q", key, r.Task.ID)
			}
		case r.Activity != nil:
			set++
			v = r.Activity
			if !strings.HasPrefix(key, preActivity) {
				t.Fatalf("%q decoded as activity", key)
			}
		}
		if set == 0 {
			if key == keyTeam || strings.HasPrefix(key, preMember) || strings.HasPrefix(key, preTask) || strings.HasPrefix(key, preActivity) {
				t.Fatalf("%q=%q decoded to nothing", key, value)
			}
			return
		}
		// What teambus would write back decodes again.
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("encode %q: %v", key, err)
		}
		if _, err := DecodeRecord("alpha", key, b); err != nil {
			t.Fatalf("%q=%q decoded, but its encoding %s does not: %v", key, value, b, err)
		}
	})
}

// FuzzValidID checks the decoder's id check against teambus.ValidateID.
func FuzzValidID(f *testing.F) {
	for _, s := range []string{"t1", "a-b_c", "-a", "_a", "", "a.b", "a b", strings.Repeat("x", 64), strings.Repeat("x", 65), "é", "a\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if got, want := validID(id), teambus.ValidateID("task", id) == nil; got != want {
			t.Fatalf("validID(%q) = %t, ValidateID says %t", id, got, want)
		}
	})
}
