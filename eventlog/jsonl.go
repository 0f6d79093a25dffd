package eventlog

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// MaxLine is the longest line Reader reads; a longer line is
// skipped as damaged.
const MaxLine = 16 << 20

// Damaged is a line of an event log that is not an event: malformed or
// truncated JSON, or JSON that is not an event envelope. Line is the line
// number in a file (from 1), or the stream sequence in a team's event
// stream.
type Damaged struct {
	Line   int64  `json:"line"`
	Reason string `json:"reason"`
}

// Reader reads an event log in JSON Lines, one event per line, as
// seed 004 says to: it never gives up on the content. Blank lines are
// skipped silently; a line that is not JSON (junk, a write cut short by a
// crash, typically the last line) or not an event envelope is reported to
// OnDamaged with its line number and skipped. Only a read error of the
// underlying reader stops it.
//
// Like bufio.Scanner, Next advances and Event, Raw and Line describe the
// current event. Event().Data and Raw alias the reader's buffer until the
// next call to Next. Duplicates and sequence gaps are the business of the
// caller (Analyzer): the reader sees one line at a time.
type Reader struct {
	r    *bufio.Reader
	line int64
	long []byte
	raw  []byte
	ev   Event
	in   interner
	err  error
	// OnDamaged, if set, is called for every damaged line.
	OnDamaged func(Damaged)
	// Blank counts the blank lines skipped.
	Blank int64
	// Lines counts the lines read.
	Lines int64
}

// NewReader returns a reader of the JSON Lines in r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10), in: interner{}}
}

// Next reads up to the next event and reports whether there is one.
func (er *Reader) Next() bool {
	for er.err == nil {
		line, complete, err := er.readLine()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				er.err = err
			}
			if line == nil {
				er.err = errOr(er.err)
				return false
			}
		}
		er.line++
		er.Lines++
		if er.line == 1 {
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf")) // a byte order mark
		}
		line = trimJSONSpace(line)
		if len(line) == 0 {
			er.Blank++
			continue
		}
		if len(line) > MaxLine {
			er.damaged(fmt.Sprintf("line longer than %d bytes, skipped", MaxLine))
			continue
		}
		if perr := parseEvent(line, &er.ev, er.in); perr != nil {
			reason := perr.Error()
			var ee *ParseError
			if errors.As(perr, &ee) && ee.Truncated {
				if complete {
					reason = "truncated: " + reason
				} else {
					reason = "truncated last line (no newline at the end): " + reason
				}
			}
			er.damaged(reason)
			continue
		}
		er.raw = line
		return true
	}
	return false
}

// trimJSONSpace trims the white space JSON allows around a value.
func trimJSONSpace(b []byte) []byte {
	return bytes.Trim(b, " \t\r\n")
}

// errOr keeps a real error and turns "no more input" into nil.
func errOr(err error) error {
	if err == nil {
		return io.EOF
	}
	return err
}

func (er *Reader) damaged(reason string) {
	if er.OnDamaged != nil {
		er.OnDamaged(Damaged{Line: er.line, Reason: reason})
	}
}

// readLine returns the next line without its newline, and whether it
// ended with one. A line longer than MaxLine is returned truncated to
// MaxLine+1 bytes, its rest discarded.
func (er *Reader) readLine() ([]byte, bool, error) {
	b, err := er.r.ReadSlice('\n')
	if err == nil {
		return b[:len(b)-1], true, nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		if len(b) == 0 {
			return nil, false, err
		}
		return b, false, err
	}
	er.long = append(er.long[:0], b...)
	for {
		b, err = er.r.ReadSlice('\n')
		if len(er.long) <= MaxLine {
			er.long = append(er.long, b...)
		}
		switch {
		case err == nil:
			return bytes.TrimSuffix(er.long, []byte("\n")), true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return er.long, false, err
		}
	}
}

// Event returns the current event. Its Data aliases the reader's buffer.
func (er *Reader) Event() *Event { return &er.ev }

// Raw returns the current line, trimmed of surrounding white space.
func (er *Reader) Raw() []byte { return er.raw }

// Line returns the line number of the current event, from 1.
func (er *Reader) Line() int64 { return er.line }

// Err returns the read error that stopped the reader, or nil at the end of
// the input.
func (er *Reader) Err() error {
	if errors.Is(er.err, io.EOF) {
		return nil
	}
	return er.err
}
