package teambus_test

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/teambus/teambus"
)

func TestValidateID(t *testing.T) {
	tests := []struct {
		name string
		id   string
		ok   bool
	}{
		{"letter", "a", true},
		{"digit", "7", true},
		{"upper", "Alpha", true},
		{"dash and underscore", "team_1-b", true},
		{"64 chars", strings.Repeat("a", 64), true},
		{"lead is a valid team id", "lead", true},
		{"empty", "", false},
		{"65 chars", strings.Repeat("a", 65), false},
		{"dot", "a.b", false},
		{"only dot", ".", false},
		{"star", "a*", false},
		{"only star", "*", false},
		{"gt", "a>", false},
		{"only gt", ">", false},
		{"space inside", "a b", false},
		{"leading space", " a", false},
		{"trailing space", "a ", false},
		{"tab", "a\tb", false},
		{"newline", "a\n", false},
		{"nul", "a\x00", false},
		{"slash", "a/b", false},
		{"backslash", `a\b`, false},
		{"leading dash", "-a", false},
		{"leading underscore", "_a", false},
		{"colon", "a:b", false},
		{"dollar", "$JS", false},
		{"accented letter", "é", false},
		{"cjk", "日本", false},
		{"fullwidth digit", "１", false},
		{"invalid utf-8", "a\xff", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := teambus.ValidateID("team", tt.id)
			if got := err == nil; got != tt.ok {
				t.Fatalf("ValidateID(%q) = %v, want ok=%t", tt.id, err, tt.ok)
			}
			if tt.ok {
				return
			}
			if !errors.Is(err, teambus.ErrInvalid) {
				t.Errorf("error %v is not ErrInvalid", err)
			}
			if got, want := teambus.ExitCode(err), teambus.ExitPermanent; got != want {
				t.Errorf("exit code = %d, want %d", got, want)
			}
			msg := err.Error()
			if !strings.Contains(msg, teambus.IDRule) || !strings.Contains(msg, "team id") {
				t.Errorf("error %q does not name the kind and the rule %q", msg, teambus.IDRule)
			}
			if strings.ContainsAny(msg, "\n\r") && !strings.Contains(tt.id, "\n") {
				t.Errorf("error %q is not one line", msg)
			}
		})
	}
}

func TestValidateID_LongInputClipped(t *testing.T) {
	err := teambus.ValidateID("member", strings.Repeat("x", 10000)+".")
	if err == nil {
		t.Fatal("want an error")
	}
	if got := len(err.Error()); got > 400 {
		t.Errorf("error is %d bytes long: long input should be clipped", got)
	}
}

func TestValidateMemberID(t *testing.T) {
	tests := []struct {
		id       string
		ok       bool
		reserved bool
	}{
		{"tm1", true, false},
		{"Lead", true, false},
		{"leader", true, false},
		{"allx", true, false},
		{"lead", false, true},
		{"all", false, true},
		{"", false, false},
		{"tm.1", false, false},
		{"tm*", false, false},
		{strings.Repeat("m", 65), false, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.id), func(t *testing.T) {
			err := teambus.ValidateMemberID(tt.id)
			if got := err == nil; got != tt.ok {
				t.Fatalf("ValidateMemberID(%q) = %v, want ok=%t", tt.id, err, tt.ok)
			}
			if err != nil && !errors.Is(err, teambus.ErrInvalid) {
				t.Errorf("error %v is not ErrInvalid", err)
			}
			if tt.reserved && !strings.Contains(err.Error(), "reserved") {
				t.Errorf("error %q does not say the id is reserved", err)
			}
		})
	}
}

func TestValidateSession(t *testing.T) {
	tests := []struct {
		name    string
		session string
		ok      bool
	}{
		{"uuid", "2f1e0c3a-9d3b-4a52-8f0e-3f3c8c9d0a11", true},
		{"printable punctuation", "sess.1/*>:@", true},
		{"space", "my session", true},
		{"unicode", "séance-日本", true},
		{"128 bytes", strings.Repeat("s", 128), true},
		{"128 bytes of 2-byte runes", strings.Repeat("é", 64), true},
		{"empty", "", false},
		{"129 bytes", strings.Repeat("s", 129), false},
		{"129 bytes of 3-byte runes", strings.Repeat("日", 43), false},
		{"tab", "a\tb", false},
		{"newline", "a\nb", false},
		{"carriage return", "a\r", false},
		{"nul", "a\x00", false},
		{"escape", "\x1b[31m", false},
		{"del", "a\x7f", false},
		{"invalid utf-8", "a\xff", false},
		{"zero width space", "a\u200bb", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := teambus.ValidateSession(tt.session)
			if got := err == nil; got != tt.ok {
				t.Fatalf("ValidateSession(%q) = %v, want ok=%t", tt.session, err, tt.ok)
			}
			if err != nil && !errors.Is(err, teambus.ErrInvalid) {
				t.Errorf("error %v is not ErrInvalid", err)
			}
		})
	}
}

func TestValidateMessageID(t *testing.T) {
	tests := []struct {
		name string
		id   string
		ok   bool
	}{
		{"simple", "report-42", true},
		{"subject characters are fine in a header", "a.b*c>d", true},
		{"slash and colon", "task/42:done", true},
		{"unicode", "idé", true},
		{"128 bytes", strings.Repeat("k", 128), true},
		{"empty", "", false},
		{"129 bytes", strings.Repeat("k", 129), false},
		{"space", "a b", false},
		{"tab", "a\tb", false},
		{"newline", "a\n", false},
		{"cr lf header injection", "a\r\nNats-Msg-Id: b", false},
		{"nul", "a\x00", false},
		{"del", "a\x7f", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := teambus.ValidateMessageID(tt.id)
			if got := err == nil; got != tt.ok {
				t.Fatalf("ValidateMessageID(%q) = %v, want ok=%t", tt.id, err, tt.ok)
			}
			if err != nil && !errors.Is(err, teambus.ErrInvalid) {
				t.Errorf("error %v is not ErrInvalid", err)
			}
		})
	}
}

func TestParseMessageType(t *testing.T) {
	for _, mt := range teambus.MessageTypes {
		got, err := teambus.ParseMessageType(string(mt))
		if err != nil || got != mt {
			t.Errorf("ParseMessageType(%q) = %q, %v; want %q", mt, got, err, mt)
		}
	}
	if got, want := len(teambus.MessageTypes), 11; got != want {
		t.Errorf("%d message types, the specification lists %d", got, want)
	}
	for _, bad := range []string{"", "INFO", "Info", " info", "info ", "status_check.x", "*", ">", "note"} {
		_, err := teambus.ParseMessageType(bad)
		if !errors.Is(err, teambus.ErrInvalid) {
			t.Errorf("ParseMessageType(%q) = %v, want ErrInvalid", bad, err)
			continue
		}
		if !strings.Contains(err.Error(), "shutdown_response") {
			t.Errorf("error %q does not list the types", err)
		}
	}
}

func TestValidateData(t *testing.T) {
	for _, tt := range []struct {
		data string
		ok   bool
	}{
		{"", true},
		{`{"a":1}`, true},
		{`[1,2]`, true},
		{`"s"`, true},
		{`{`, false},
		{`{"a":}`, false},
		{`nope`, false},
	} {
		err := teambus.ValidateData([]byte(tt.data))
		if got := err == nil; got != tt.ok {
			t.Errorf("ValidateData(%q) = %v, want ok=%t", tt.data, err, tt.ok)
		}
		if err != nil && !errors.Is(err, teambus.ErrInvalid) {
			t.Errorf("ValidateData(%q) error %v is not ErrInvalid", tt.data, err)
		}
	}
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, teambus.ExitOK},
		{"invalid", teambus.Invalidf("bad"), teambus.ExitPermanent},
		{"not found", teambus.NotFoundf("gone"), teambus.ExitPermanent},
		{"state", teambus.Statef("no"), teambus.ExitPermanent},
		{"conflict", teambus.Conflictf("lost"), teambus.ExitConflict},
		{"fenced", teambus.Fencedf("old"), teambus.ExitConflict},
		{"unavailable", teambus.Unavailablef("down"), teambus.ExitTransient},
		{"wrapped conflict", fmt.Errorf("claim task %q: %w", "t1", teambus.Conflictf("lost")), teambus.ExitConflict},
		{"wrapped sentinel", fmt.Errorf("x: %w", teambus.ErrNotFound), teambus.ExitPermanent},
		{"unclassified", errors.New("boom"), teambus.ExitTransient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := teambus.ExitCode(tt.err); got != tt.want {
				t.Errorf("ExitCode(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}

func TestClassifiedError_Message(t *testing.T) {
	err := teambus.Conflictf("task %s is already claimed by %s", "t1", "tm2")
	if got, want := err.Error(), "task t1 is already claimed by tm2"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if errors.Is(err, teambus.ErrFenced) || errors.Is(err, teambus.ErrInvalid) {
		t.Errorf("a conflict matches another sentinel")
	}
}

// FuzzValidID checks the id rule's loop against the regular expression it
// replaced.
func FuzzValidID(f *testing.F) {
	for _, s := range []string{"", "a", "A-b_9", "_a", "-a", "a\n", strings.Repeat("a", 64), strings.Repeat("a", 65), "é", "a.b", "a b"} {
		f.Add(s)
	}
	re := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := teambus.ValidateID("task", s) == nil, re.MatchString(s); got != want {
			t.Fatalf("ValidateID(%q) ok = %v, the rule's regexp says %v", s, got, want)
		}
	})
}
