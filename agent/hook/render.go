package hook

import (
	"fmt"
	"strings"

	"github.com/teambus/teambus"
)

// Limits of the injected text (§12.3.4).
const (
	// DefaultMaxContext is the default cap of the mail text of one hook,
	// below Claude's 10,000-character limit of additionalContext.
	DefaultMaxContext = 8000
	// PreviewOver is the body length past which only a preview is shown.
	PreviewOver = 6000
	// PreviewLen is the length of that preview.
	PreviewLen = 1500
	// MaxSessionStart is the cap of all SessionStart context.
	MaxSessionStart = 9000
	// MaxBrief is the share of the brief in SessionStart context.
	MaxBrief = 4000
)

// Clean removes control characters (terminal escapes, NUL, line and
// paragraph separators) from one line of member text and keeps it valid
// UTF-8; tabs become spaces (teambus.StripLine). It is the hook's counterpart of the
// printable checks of the team service, which refuse such text at the
// door; mail bodies may still carry newlines and tabs.
func Clean(s string) string { return teambus.StripLine(s) }

// Indent renders a body as lines indented two spaces, each cleaned, so no
// body line can look like a header.
func Indent(body string) string {
	body = strings.ReplaceAll(body, "\r\n", "\n")
	lines := strings.FieldsFunc(body, func(r rune) bool { return r == '\n' || r == '\r' || r == '\u2028' || r == '\u2029' })
	if len(lines) == 0 {
		return "  (empty)\n"
	}
	var w strings.Builder
	for _, l := range lines {
		w.WriteString("  ")
		w.WriteString(strings.TrimRight(Clean(l), " "))
		w.WriteByte('\n')
	}
	return w.String()
}

// Chars counts characters as Claude does its cap: UTF-16 code units.
func Chars(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// clipChars shortens s to about n characters on a rune boundary.
func clipChars(s string, n int) string {
	if Chars(s) <= n {
		return s
	}
	out := []rune{}
	c := 0
	for _, r := range s {
		w := 1
		if r >= 0x10000 {
			w = 2
		}
		if c+w > n {
			break
		}
		out = append(out, r)
		c += w
	}
	return string(out)
}

// Mail is rendered mail: the text, the sequences it shows (delivered) and
// how many leased messages did not fit.
type Mail struct {
	Text  string
	Shown []uint64
	More  int
}

// RenderMail renders msgs (oldest first) for member of team, up to max
// characters: one header line per message, bodies indented, long bodies
// previewed, repeats marked (seen reports a seq delivered before). What
// does not fit is counted in More and named in the last line. At least one
// message is always shown.
func RenderMail(team, member string, msgs []teambus.Message, seen func(uint64) bool, max int) Mail {
	if len(msgs) == 0 {
		return Mail{}
	}
	if max <= 0 {
		max = DefaultMaxContext
	}
	footer := "Reply with `teambus send --to <member|lead> \"…\"` (MCP: send).\n"
	var blocks []string
	var shown []uint64
	used := Chars(footer) + 200 // the header and the "more" line
	for _, m := range msgs {
		b := renderMessage(m, seen != nil && seen(m.Seq))
		if len(blocks) > 0 && used+Chars(b) > max {
			break
		}
		blocks = append(blocks, b)
		shown = append(shown, m.Seq)
		used += Chars(b)
	}
	more := len(msgs) - len(blocks)
	var w strings.Builder
	fmt.Fprintf(&w, "teambus mail for %s (team %s): %d new message(s), oldest first. They are acknowledged on delivery.\n", member, team, len(blocks))
	for _, b := range blocks {
		w.WriteString(b)
	}
	if more > 0 {
		fmt.Fprintf(&w, "%d more unread message(s) follow on the next hook (or `teambus inbox`).\n", more)
	}
	w.WriteString(footer)
	return Mail{Text: w.String(), Shown: shown, More: more}
}

func renderMessage(m teambus.Message, repeat bool) string {
	var w strings.Builder
	fmt.Fprintf(&w, "[#%d %s from %s, %s", m.Seq, m.TS.UTC().Format("2006-01-02T15:04:05Z"), Clean(m.From), Clean(string(m.Type)))
	if m.To == teambus.All {
		w.WriteString(", to all")
	}
	w.WriteString("]")
	if repeat {
		w.WriteString(" (repeat: may have been shown before)")
	}
	w.WriteByte('\n')
	body := m.Body
	if n := Chars(body); n > PreviewOver {
		w.WriteString(Indent(clipChars(body, PreviewLen) + "…"))
		fmt.Fprintf(&w, "  (preview of %d characters; full text: `teambus replay --since %d --limit 1`, MCP: read_message)\n", n, m.Seq)
	} else {
		w.WriteString(Indent(body))
	}
	return w.String()
}
