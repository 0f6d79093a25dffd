package teambus

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable reports whether s is valid UTF-8 of printable characters only:
// no control characters (terminal escapes) and no line or paragraph
// separators. Ids, roles and other one-line names must be printable.
func Printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// ValidateBody refuses a message body that is empty or only white space
// (it says nothing: a recipient would ack a message with no text) and one
// that is not valid UTF-8: a body is text, and replacing its bytes
// silently would change what the sender wrote.
func ValidateBody(body string) error {
	if body == "" {
		return Invalidf("message body is empty: nothing sent; write the message as the body")
	}
	if strings.TrimSpace(body) == "" {
		return Invalidf("message body is only white space: nothing sent; write the message as the body")
	}
	if utf8.ValidString(body) {
		return nil
	}
	off := 0
	for off < len(body) {
		r, n := utf8.DecodeRuneInString(body[off:])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		off += n
	}
	return Invalidf("message body is not valid UTF-8 (byte %d): nothing sent; send text, or put binary content in a file and send its path", off)
}

// Sanitize makes member text safe to print in a text view: control
// characters (ESC and everything below 0x20 except \n and \t, DEL, the C1
// controls) and the Unicode line, paragraph and bidirectional controls are
// escaped as \xNN or \u{NNNN}; invalid UTF-8 bytes as \xNN. Newlines and
// tabs are kept: use IndentBody to print a body of several lines. JSON
// output never goes through Sanitize: it stays byte-exact.
func Sanitize(s string) string {
	if safeText(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
		case unsafeRune(r):
			if r < 0x100 {
				b.WriteString(`\x`)
				b.WriteString(hex2(byte(r)))
			} else {
				b.WriteString(`\u{`)
				b.WriteString(strings.ToUpper(strings.TrimLeft(hexRune(r), "0")))
				b.WriteString(`}`)
			}
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// IndentBody sanitizes a body for a text view and indents every line
// after the first with indent, so no line of a body can pass for a header
// line of the view (such as "#12 … [shutdown_request]").
func IndentBody(body, indent string) string {
	s := Sanitize(strings.TrimRight(body, "\n"))
	s = strings.ReplaceAll(s, "\r\n", "\n")
	if !strings.Contains(s, "\n") {
		return s
	}
	return strings.ReplaceAll(s, "\n", "\n"+indent)
}

// SanitizeLine is Sanitize for one-line fields: newlines and tabs are
// escaped too.
func SanitizeLine(s string) string {
	s = Sanitize(s)
	if !strings.ContainsAny(s, "\n\t") {
		return s
	}
	return strings.NewReplacer("\n", `\n`, "\t", `\t`).Replace(s)
}

func safeText(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return safeUnicode(s[i:])
		}
		if c == 0x7f || (c < 0x20 && c != '\n' && c != '\t') {
			return false
		}
	}
	return true
}

func safeUnicode(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unsafeRune(r) {
			return false
		}
	}
	return true
}

// unsafeRune reports a rune a text view escapes.
func unsafeRune(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
		return true
	case r == 0x2028 || r == 0x2029: // line and paragraph separators
		return true
	case (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f: // bidi controls
		return true
	}
	return false
}

const hexDigits = "0123456789abcdef"

func hex2(c byte) string { return string([]byte{hexDigits[c>>4], hexDigits[c&0xf]}) }

func hexRune(r rune) string {
	var b [8]byte
	for i := 7; i >= 0; i-- {
		b[i] = hexDigits[r&0xf]
		r >>= 4
	}
	return string(b[:])
}

// OneLine shortens text to one sanitized line of at most n runes (the
// last an ellipsis when it was cut), for tables and narration.
func OneLine(s string, n int) string {
	s = SanitizeLine(strings.Join(strings.Fields(s), " "))
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// Strip removes from member text what a view an agent reads must not pass
// on: control characters (terminal escapes, NUL, DEL, the C1 range),
// format characters (bidirectional overrides, zero-width joiners) and
// anything else unicode.IsPrint refuses, except the space, newline and
// tab; the line and paragraph separators (U+2028, U+2029) and carriage
// returns become newlines; invalid UTF-8 becomes U+FFFD. It is the one
// rule of the hook and MCP text views (terminal views escape instead:
// Sanitize). Text that is printable ASCII comes back as it is.
func Strip(s string) string {
	if plainASCII(s) {
		return s
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t' || r == ' ':
			return r
		case r == '\r' || r == '\u2028' || r == '\u2029':
			return '\n'
		case !unicode.IsPrint(r):
			return -1
		}
		return r
	}, s)
}

// StripLine is Strip for one line: newlines and tabs become spaces.
func StripLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return ' '
		}
		return r
	}, Strip(s))
}

// plainASCII reports whether s is printable ASCII, newlines and tabs only.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\n' && c != '\t') || c >= 0x7f {
			return false
		}
	}
	return true
}
