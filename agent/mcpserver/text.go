package mcpserver

import (
	"strings"

	"github.com/teambus/teambus"
)

// Text from a member is data, never structure: control characters are
// stripped and bodies are indented in the text views.

// cleanLine returns s on one line without control characters.
func cleanLine(s string) string { return teambus.StripLine(s) }

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
	s = teambus.Strip(s)
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
