package mcpserver

import (
	"strings"
	"unicode"
)

// Text from a member is data, never structure: control characters are
// stripped and bodies are indented in the text views.

// cleanLine returns s on one line without control characters.
func cleanLine(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			return ' '
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029':
			return -1
		}
		return r
	}, s)
}

// cleanBody returns s without control characters other than newlines and
// tabs, every line indented by indent.
func cleanBody(s, indent string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return r
		case r == '\u2028' || r == '\u2029':
			return '\n'
		case unicode.IsControl(r):
			return -1
		}
		return r
	}, s)
	return indent + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+indent)
}
