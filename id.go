package teambus

import (
	"fmt"
	"unicode/utf8"
)

// Reserved mailbox addresses. They can not be member ids.
const (
	// Lead is the mailbox address and member id of the team lead.
	Lead = "lead"
	// All is the broadcast address.
	All = "all"
)

// MaxSessionLen is the longest session id accepted, in bytes.
const MaxSessionLen = 128

// IDRule describes the id rule for error messages.
const IDRule = "1-64 characters of A-Z a-z 0-9 _ -, starting with a letter or digit"

// ValidateID checks a team, member or task id against the id rule. kind
// names the id in the error ("team", "member", "task").
func ValidateID(kind, id string) error {
	if !validID(id) {
		return Invalidf("invalid %s id %q: must be %s", kind, clip(id), IDRule)
	}
	return nil
}

// validID reports whether id follows IDRule: 1-64 bytes of A-Z a-z 0-9 _ -,
// the first a letter or digit. (A loop, not a regexp: compiling one at
// package init cost every one-shot process ~0.3 ms.)
func validID(id string) bool {
	if len(id) == 0 || len(id) > 64 || id[0] == '_' || id[0] == '-' {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ValidateMemberID checks a teammate id: the id rule, and not one of the
// reserved addresses lead and all.
func ValidateMemberID(id string) error {
	if err := ValidateID("member", id); err != nil {
		return err
	}
	if id == Lead || id == All {
		return Invalidf("invalid member id %q: %q and %q are reserved addresses", id, Lead, All)
	}
	return nil
}

// ValidateSession checks a session id: 1 to 128 bytes of printable text.
func ValidateSession(s string) error {
	if s == "" {
		return Invalidf("invalid session id: empty (set --session or TEAMBUS_SESSION)")
	}
	if len(s) > MaxSessionLen {
		return Invalidf("invalid session id: %d bytes, at most %d", len(s), MaxSessionLen)
	}
	if !utf8.ValidString(s) {
		return Invalidf("invalid session id: not valid UTF-8")
	}
	if !Printable(s) {
		return Invalidf("invalid session id %q: only printable characters", clip(s))
	}
	return nil
}

// clip shortens user text for error messages.
func clip(s string) string {
	if len(s) > 80 {
		return fmt.Sprintf("%s…", s[:80])
	}
	return s
}
