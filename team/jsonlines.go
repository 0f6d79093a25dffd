package team

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/teambus/teambus"
)

// jsonLines reads the JSON Lines of a --from file (task imports, message
// batches): one object of type T a line, unknown fields refused, blank
// lines skipped, at most max bytes a line. It calls fn with each line's
// number, its text (spaces trimmed; valid only during the call) and its
// value. A line that is not one such object is an ErrInvalid naming the
// line and the kind of object a line holds, with the fields it may have.
func jsonLines[T any](r io.Reader, max int, kind, fields string, fn func(n int, line []byte, v *T) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), max)
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		var v T
		if err := dec.Decode(&v); err != nil {
			return teambus.Invalidf("line %d: not a %s (fields %s): %s", n, kind, fields, teambus.SanitizeLine(err.Error()))
		}
		if dec.More() {
			return teambus.Invalidf("line %d: more than one JSON value: one %s per line", n, kind)
		}
		if err := fn(n, line, &v); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return teambus.Invalidf("line %d: longer than %d bytes", n+1, max)
		}
		return fmt.Errorf("read the %ss: %w", kind, err)
	}
	return nil
}
