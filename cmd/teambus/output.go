package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/teambus/teambus"
)

// jsonLines writes JSON Lines: one compact object per line, for lists and
// streams (inbox, replay, follow).
type jsonLines struct {
	enc *json.Encoder
}

// newJSONLines returns a JSON Lines writer on w.
func newJSONLines(w io.Writer) *jsonLines {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &jsonLines{enc: enc}
}

// Write writes v as one line.
func (j *jsonLines) Write(v any) error {
	if err := j.enc.Encode(v); err != nil {
		return fmt.Errorf("write json line: %w", err)
	}
	return nil
}

// bodyIndent starts every further line of member text in a text view.
const bodyIndent = "    "

// textBody is member text (a body, a description, a reason) for a text
// view: control characters escaped and every further line indented, so
// no line of it can pass for a line of the view. JSON output prints the
// text unchanged.
func textBody(s string) string { return teambus.IndentBody(s, bodyIndent) }

// formatTime formats t for text output: RFC 3339 UTC to the second, "-"
// for the zero time.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// jsonTime formats t for JSON output: an RFC 3339 UTC string with the
// sub-second digits there are, nil (null) for the zero time.
func jsonTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(time.RFC3339Nano)
	return &s
}

// jsonTimePtr is jsonTime for an optional time.
func jsonTimePtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	return jsonTime(*t)
}

// formatDuration prints d without zero tails: 10m, 1h30m, 30s, 1.5s.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
