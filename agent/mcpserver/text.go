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
	var w strings.Builder
	w.Grow(len(s) + len(indent)*(1+strings.Count(s, "\n")))
	writeBody(&w, s, indent)
	return w.String()
}

// writeBody writes cleanBody(s, indent) to w.
func writeBody(w *strings.Builder, s, indent string) {
	if !plain(s) {
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
	}
	s = strings.TrimRight(s, "\n")
	w.WriteString(indent)
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			w.WriteString(s)
			return
		}
		w.WriteString(s[:i+1])
		w.WriteString(indent)
		s = s[i+1:]
	}
}

// plain reports whether s is printable ASCII, newlines and tabs only:
// cleaning leaves it as it is.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\n' && c != '\t') || c >= 0x7f {
			return false
		}
	}
	return true
}
