package team_test

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/team"
)

func TestParseMemberSpec(t *testing.T) {
	tests := []struct {
		in   string
		want team.MemberSpec
		ok   bool
	}{
		{"tm1", team.MemberSpec{ID: "tm1"}, true},
		{"tm1:reviewer", team.MemberSpec{ID: "tm1", Role: "reviewer"}, true},
		{"tm1:backend dev:api", team.MemberSpec{ID: "tm1", Role: "backend dev", Quantum: "api"}, true},
		{"tm1::api", team.MemberSpec{ID: "tm1", Quantum: "api"}, true},
		{"tm1:role:", team.MemberSpec{ID: "tm1", Role: "role"}, true},
		{"", team.MemberSpec{}, false},
		{":role", team.MemberSpec{}, false},
		{"lead:boss", team.MemberSpec{}, false},
		{"all", team.MemberSpec{}, false},
		{"tm.1:role", team.MemberSpec{}, false},
		{"tm1:" + strings.Repeat("r", 65), team.MemberSpec{}, false},
		{"tm1:two\nlines", team.MemberSpec{}, false},
		{"tm1:role:a.b", team.MemberSpec{}, false},
		{"tm1:role:api:extra", team.MemberSpec{}, false},
	}
	for _, tt := range tests {
		got, err := team.ParseMemberSpec(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("ParseMemberSpec(%q) = %+v, %v; want ok=%t", tt.in, got, err, tt.ok)
			continue
		}
		if err != nil {
			if !errors.Is(err, teambus.ErrInvalid) {
				t.Errorf("ParseMemberSpec(%q) error %v is not ErrInvalid", tt.in, err)
			}
			continue
		}
		if got != tt.want {
			t.Errorf("ParseMemberSpec(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func FuzzParseMemberSpec(f *testing.F) {
	for _, s := range []string{"tm1", "tm1:dev", "tm1:dev:api", "tm1::", ":", "lead", "a.b:c", "tm1:\x1b[31mred", "tm1:r:a b", "tm1:r:api:x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		spec, err := team.ParseMemberSpec(s)
		if err != nil {
			if !errors.Is(err, teambus.ErrInvalid) {
				t.Fatalf("ParseMemberSpec(%q) error %v is not ErrInvalid", s, err)
			}
			return
		}
		if err := teambus.ValidateMemberID(spec.ID); err != nil {
			t.Fatalf("ParseMemberSpec(%q) accepted member id %q: %v", s, spec.ID, err)
		}
		if spec.Quantum != "" {
			if err := teambus.ValidateID("quantum", spec.Quantum); err != nil {
				t.Fatalf("ParseMemberSpec(%q) accepted quantum %q: %v", s, spec.Quantum, err)
			}
		}
		// The role is shown in `team show` and in the respawn brief: one
		// short line of text, nothing a terminal would interpret.
		if len(spec.Role) > 64 || !utf8.ValidString(spec.Role) {
			t.Fatalf("ParseMemberSpec(%q) accepted role %q", s, spec.Role)
		}
		for _, r := range spec.Role {
			if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
				t.Fatalf("ParseMemberSpec(%q) accepted role %q with %U", s, spec.Role, r)
			}
		}
		if !strings.HasPrefix(s, spec.ID) {
			t.Fatalf("ParseMemberSpec(%q) id %q is not the first field", s, spec.ID)
		}
	})
}

// FuzzParseImport: any input is either tasks with ids, each from a line of
// it, or an ErrInvalid; never a panic.
func FuzzParseImport(f *testing.F) {
	for _, s := range []string{
		`{"id":"a","desc":"x","deps":["b"],"priority":1,"quantum":"api"}`,
		"{\"id\":\"a\"}\n\n{\"id\":\"b\",\"deps\":[\"a\"],\"role\":\"db\"}\n",
		`{"id":"a"} {"id":"b"}`, `{"id":""}`, `[]`, `{"id":"a","x":1}`, "\x00\xff", `{"id":"a","description":"\u001b[31m"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tasks, err := team.ParseImport(strings.NewReader(s))
		if err != nil {
			if !errors.Is(err, teambus.ErrInvalid) {
				t.Fatalf("ParseImport(%q) error %v is not ErrInvalid", s, err)
			}
			return
		}
		lines := strings.Count(s, "\n") + 1
		for _, tk := range tasks {
			if tk.ID == "" || tk.Line < 1 || tk.Line > lines {
				t.Fatalf("ParseImport(%q) gave task %+v", s, tk)
			}
		}
	})
}
