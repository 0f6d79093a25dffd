package teambus_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/teambus/teambus"
)

// idOracle is the id rule written out without a regular expression.
func idOracle(id string) bool {
	if len(id) < 1 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '_' && c != '-') {
			return false
		}
	}
	return true
}

// subjectUnsafe reports whether s holds anything that must never reach a
// NATS subject token or KV key: the separators and wildcards, white space,
// control characters, slashes and non-ASCII bytes.
func subjectUnsafe(s string) bool {
	for _, r := range s {
		if r == '.' || r == '*' || r == '>' || r == '/' || r == '\\' || r == ':' || unicode.IsSpace(r) || unicode.IsControl(r) || r >= utf8.RuneSelf {
			return true
		}
	}
	return !utf8.ValidString(s)
}

func FuzzValidateID(f *testing.F) {
	for _, s := range []string{"a", "team-1", "a.b", "*", ">", "a b", "", strings.Repeat("x", 64), strings.Repeat("x", 65), "lead", "all", "é", "_a", "a\x00", "a\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		err := teambus.ValidateID("team", id)
		if ok := err == nil; ok != idOracle(id) {
			t.Fatalf("ValidateID(%q) = %v, oracle says ok=%t", id, err, idOracle(id))
		}
		if err != nil {
			if !errors.Is(err, teambus.ErrInvalid) {
				t.Fatalf("ValidateID(%q) error %v is not ErrInvalid", id, err)
			}
			return
		}
		if subjectUnsafe(id) {
			t.Fatalf("ValidateID accepted %q, which is not safe in a subject", id)
		}
		merr := teambus.ValidateMemberID(id)
		if reserved := id == teambus.Lead || id == teambus.All; (merr != nil) != reserved {
			t.Fatalf("ValidateMemberID(%q) = %v, reserved=%t", id, merr, reserved)
		}
	})
}

func FuzzValidateSession(f *testing.F) {
	for _, s := range []string{"s1", "my session", "séance-日本", "", "a\tb", "a\nb", "\x1b[0m", "a\xff", strings.Repeat("s", 128), strings.Repeat("s", 129), "a\u200bb", "a\u00a0b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := teambus.ValidateSession(s)
		if err != nil {
			if !errors.Is(err, teambus.ErrInvalid) {
				t.Fatalf("ValidateSession(%q) error %v is not ErrInvalid", s, err)
			}
			return
		}
		if len(s) == 0 || len(s) > teambus.MaxSessionLen || !utf8.ValidString(s) {
			t.Fatalf("ValidateSession accepted %q (%d bytes)", s, len(s))
		}
		for _, r := range s {
			if unicode.IsControl(r) || (unicode.IsSpace(r) && r != ' ') || r == utf8.RuneError {
				t.Fatalf("ValidateSession accepted %q with %U", s, r)
			}
		}
	})
}

func FuzzValidateMessageID(f *testing.F) {
	for _, s := range []string{"report-42", "a.b*c>", "", "a b", "a\r\nX: y", "a\x7f", strings.Repeat("k", 128), strings.Repeat("k", 129), "idé"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		err := teambus.ValidateMessageID(id)
		if err != nil {
			if !errors.Is(err, teambus.ErrInvalid) {
				t.Fatalf("ValidateMessageID(%q) error %v is not ErrInvalid", id, err)
			}
			return
		}
		if len(id) == 0 || len(id) > teambus.MaxMessageID {
			t.Fatalf("ValidateMessageID accepted %d bytes", len(id))
		}
		// The id travels in a header: no byte may end or split it.
		for i := 0; i < len(id); i++ {
			if c := id[i]; c <= ' ' || c == 0x7f {
				t.Fatalf("ValidateMessageID accepted %q with byte %#x", id, c)
			}
		}
	})
}

func FuzzParseMessageType(f *testing.F) {
	for _, mt := range teambus.MessageTypes {
		f.Add(string(mt))
	}
	for _, s := range []string{"", "INFO", "info ", "status.check", "*", ">"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		mt, err := teambus.ParseMessageType(s)
		if err != nil {
			if !errors.Is(err, teambus.ErrInvalid) || mt != "" {
				t.Fatalf("ParseMessageType(%q) = %q, %v", s, mt, err)
			}
			return
		}
		if string(mt) != s {
			t.Fatalf("ParseMessageType(%q) = %q", s, mt)
		}
		// A type is a subject token.
		if subjectUnsafe(s) || s == "" {
			t.Fatalf("message type %q is not a safe subject token", s)
		}
	})
}

func FuzzPolicyUnmarshalJSON(f *testing.F) {
	def, _ := json.Marshal(teambus.DefaultPolicy())
	f.Add(string(def))
	for _, s := range []string{
		`{}`, `null`, `{"ack_wait":"1s","crash_limit":0}`, `{"heartbeat":"-1s"}`, `{"heartbeat":"9999999999h"}`,
		`{"max_attempts":2}`, `{"crash_limit":null}`, `{"heartbeat":1}`, `[`, `{"zombie_max":"1h30m","takeover_after":"2562047h"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var p teambus.Policy
		if err := json.Unmarshal([]byte(in), &p); err != nil {
			return
		}
		if p.Validate() != nil {
			return
		}
		// A valid policy survives the stored form unchanged.
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("marshal %+v: %v", p, err)
		}
		var back teambus.Policy
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("unmarshal own output %s: %v", b, err)
		}
		if back != p {
			t.Fatalf("round trip of %s: %+v, want %+v", b, back, p)
		}
	})
}
