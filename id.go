package teambus

import (
	"fmt"
	"regexp"
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

var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// IDRule describes the id rule for error messages.
const IDRule = "1-64 characters of A-Z a-z 0-9 _ -, starting with a letter or digit"

// ValidateID checks a team, member or task id against the id rule. kind
// names the id in the error ("team", "member", "task").
func ValidateID(kind, id string) error {
	if !idRE.MatchString(id) {
		return Invalidf("invalid %s id %q: must be %s", kind, clip(id), IDRule)
	}
	return nil
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
