package eventlog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// jscan is a small validating JSON reader over one line. It exists for
// speed: the event log analysis reads a million lines in about a second
// and a half, which encoding/json (validate, then decode, then allocate
// every string) does not. It accepts exactly what encoding/json accepts
// (json.Valid), including its nesting limit; the fuzz tests hold it to
// that. Strings with escapes or invalid UTF-8 are decoded by encoding/json
// itself, so decoded values match too.
//
// Why not a maintained tokenizer (issue 11): parseEvent and readData were
// written a second time over jsontext.Decoder (ReadValue for every name
// and value, strings sliced from the raw value unless escaped,
// AllowDuplicateNames and AllowInvalidUTF8 so it accepts what this one
// accepts; one decoder reused per line through Reset), once with
// github.com/go-json-experiment/json/jsontext v0.0.0-20260213210345 and
// once with the toolchain's encoding/json/jsontext (Go 1.26.8,
// GOEXPERIMENT=jsonv2). Both gave the same analysis, byte for byte, with
// the same allocations (1.22 M a run), and both are too slow for the rule
// of the issue (keep at least 90% of the speed). On the 1,000,000-line
// log of BenchmarkAnalyzeJSONL_1M (233 MB), on 2 shared cores (load
// average 4 to 6 during the runs, so compare rows, not absolute times):
//
//	scanner                         benchmark s/op   teambus events analyze --file, 3 runs (median)
//	jscan (this one)                1.62  1.65       wall 2.06 s  user 1.52 s  max RSS 22.8 MiB
//	go-json-experiment jsontext     2.33  2.93       wall 4.53 s  user 2.68 s  max RSS 23.4 MiB
//	encoding/json/jsontext (jsonv2) 2.53  3.03       wall 3.16 s  user 2.20 s  max RSS 23.1 MiB
//
// The best jsontext run keeps 69% of jscan's speed (1.62 / 2.33 s/op), the
// toolchain's 64%; two more sets of interleaved runs of the binaries (user
// time, medians: jscan 1.36 and 1.04 s, go-json-experiment 2.63 and 2.56
// s, jsonv2 2.22 and 2.26 s) keep the same order; the profile puts the
// difference in jsontext's general state machine (ReadValue, PeekKind,
// consumeValue), not in allocation. So jscan stays, with its fuzz tests
// against encoding/json as the guard that it is correct. Measure again
// when jsontext moves.
type jscan struct {
	b     []byte
	i     int
	depth int
}

// maxJSONDepth is encoding/json's nesting limit.
const maxJSONDepth = 10000

// jsonError is a syntax error with its byte offset.
type jsonError struct {
	msg string
	off int
	end bool // the input ended too early
}

func (e *jsonError) Error() string {
	if e.end {
		return "unexpected end of JSON input"
	}
	return fmt.Sprintf("%s at byte %d", e.msg, e.off)
}

func (s *jscan) fail(what string) error {
	if s.i >= len(s.b) {
		return &jsonError{end: true, off: s.i}
	}
	return &jsonError{msg: fmt.Sprintf("invalid character %s %s", quoteChar(s.b[s.i]), what), off: s.i}
}

func quoteChar(c byte) string {
	switch {
	case c == '\'':
		return `'\''`
	case c == '"':
		return `'"'`
	case c < 0x20 || c >= 0x7f:
		return fmt.Sprintf("%q", rune(c))
	}
	return "'" + string(c) + "'"
}

func (s *jscan) ws() {
	if s.i < len(s.b) && s.b[s.i] > ' ' {
		return // compact JSON: the common case
	}
	i := s.i
	for i < len(s.b) {
		switch s.b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			s.i = i
			return
		}
	}
	s.i = i
}

// value validates and skips one JSON value.
func (s *jscan) value() error {
	s.ws()
	if s.i >= len(s.b) {
		return s.fail("")
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(nil)
	case c == '[':
		return s.array()
	case c == '"':
		_, _, err := s.str()
		return err
	case c == '-' || c >= '0' && c <= '9':
		_, err := s.number()
		return err
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	}
	return s.fail("looking for beginning of value")
}

func (s *jscan) lit(word string) error {
	for j := 0; j < len(word); j++ {
		if s.i >= len(s.b) || s.b[s.i] != word[j] {
			return s.fail("in literal " + word)
		}
		s.i++
	}
	return nil
}

func (s *jscan) enter() error {
	s.depth++
	if s.depth > maxJSONDepth {
		return &jsonError{msg: "exceeded max depth", off: s.i}
	}
	return nil
}

// open enters the object or array whose first byte is at s.i, and reads
// its end at once when it is empty.
func (s *jscan) open(end byte) (empty bool, err error) {
	if err := s.enter(); err != nil {
		return false, err
	}
	s.i++ // { or [
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == end {
		s.i++
		s.depth--
		return true, nil
	}
	return false, nil
}

// next reads what follows a member of an object or an element of an
// array: a comma, or the end, which leaves the object or array (done).
func (s *jscan) next(end byte, what string) (done bool, err error) {
	s.ws()
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case ',':
			s.i++
			return false, nil
		case end:
			s.i++
			s.depth--
			return true, nil
		}
	}
	return false, s.fail(what)
}

// object reads an object. fn, if set, is called with each key (raw, and
// whether it has escapes) positioned before the value, and must read the
// value; without fn values are skipped.
func (s *jscan) object(fn func(key []byte, esc bool) error) error {
	done, err := s.open('}')
	if err != nil {
		return err
	}
	for !done {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return s.fail("looking for beginning of object key string")
		}
		key, esc, err := s.str()
		if err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return s.fail("after object key")
		}
		s.i++
		if fn != nil {
			s.ws()
			err = fn(key, esc)
		} else {
			err = s.value()
		}
		if err != nil {
			return err
		}
		if done, err = s.next('}', "after object key:value pair"); err != nil {
			return err
		}
	}
	return nil
}

func (s *jscan) array() error {
	done, err := s.open(']')
	if err != nil {
		return err
	}
	for !done {
		if err := s.value(); err != nil {
			return err
		}
		if done, err = s.next(']', "after array element"); err != nil {
			return err
		}
	}
	return nil
}

// strStop marks the bytes that end the fast scan of a string: the quote,
// the backslash, control characters, and non-ASCII bytes (which make the
// string need a UTF-8 check).
var strStop = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	for c := 0x80; c < 0x100; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// str reads a string at s.i (which is '"') and returns its raw content,
// without the quotes, and whether decoding needs more than the raw bytes
// (escapes, or bytes that may not be valid UTF-8).
func (s *jscan) str() ([]byte, bool, error) {
	b := s.b
	i := s.i + 1
	start, esc := i, false
	for {
		for i < len(b) && !strStop[b[i]] {
			i++
		}
		if i >= len(b) {
			s.i = i
			return nil, false, s.fail("")
		}
		switch c := b[i]; {
		case c == '"':
			s.i = i + 1
			return b[start:i], esc, nil
		case c >= 0x80:
			esc = true
			i++
		case c == '\\':
			esc = true
			i++
			if i >= len(b) {
				s.i = i
				return nil, false, s.fail("")
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				i++
				for k := 0; k < 4; k++ {
					if i >= len(b) || !isHex(b[i]) {
						s.i = i
						return nil, false, s.fail("in \\u hexadecimal character escape")
					}
					i++
				}
			default:
				s.i = i
				return nil, false, s.fail("in string escape code")
			}
		default: // a control character
			s.i = i
			return nil, false, s.fail("in string literal")
		}
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// number reads a number token.
func (s *jscan) number() ([]byte, error) {
	start := s.i
	if s.b[s.i] == '-' {
		s.i++
	}
	if s.i >= len(s.b) {
		return nil, s.fail("")
	}
	switch c := s.b[s.i]; {
	case c == '0':
		s.i++
	case c >= '1' && c <= '9':
		s.digits()
	default:
		return nil, s.fail("in numeric literal")
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.i >= len(s.b) || s.b[s.i] < '0' || s.b[s.i] > '9' {
			return nil, s.fail("after decimal point in numeric literal")
		}
		s.digits()
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.i >= len(s.b) || s.b[s.i] < '0' || s.b[s.i] > '9' {
			return nil, s.fail("in exponent of numeric literal")
		}
		s.digits()
	}
	return s.b[start:s.i], nil
}

func (s *jscan) digits() {
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
}

// typeError is a well-formed value of the wrong type for a field.
type typeError struct {
	field, want string
}

func (e *typeError) Error() string { return e.field + ": want " + e.want }

// decodeStr returns the decoded text of a string token's raw content;
// esc is str's report that it needs more than the raw bytes.
func decodeStr(raw []byte, esc bool) []byte {
	if !esc || (utf8.Valid(raw) && !bytes.ContainsRune(raw, '\\')) {
		return raw
	}
	quoted := make([]byte, 0, len(raw)+2)
	quoted = append(append(append(quoted, '"'), raw...), '"')
	var out string
	_ = json.Unmarshal(quoted, &out) // validated already; invalid UTF-8 becomes U+FFFD
	return []byte(out)
}

// strOrNull reads a string or null. A null gives nil, ok.
func (s *jscan) strOrNull(field string) ([]byte, error) {
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case 'n':
			return nil, s.lit("null")
		case '"':
			raw, esc, err := s.str()
			if err != nil {
				return nil, err
			}
			return decodeStr(raw, esc), nil
		}
	}
	if err := s.value(); err != nil {
		return nil, err
	}
	return nil, &typeError{field, "a string or null"}
}

// intOrNull reads an integer or null (null reports present false).
func (s *jscan) intOrNull(field string) (int64, bool, error) {
	if s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == 'n':
			return 0, false, s.lit("null")
		case c == '-' || c >= '0' && c <= '9':
			tok, err := s.number()
			if err != nil {
				return 0, false, err
			}
			n, err := strconv.ParseInt(string(tok), 10, 64)
			if err != nil {
				return 0, false, &typeError{field, "an integer"}
			}
			return n, true, nil
		}
	}
	if err := s.value(); err != nil {
		return 0, false, err
	}
	return 0, false, &typeError{field, "an integer"}
}

// raw reads any value and returns its bytes.
func (s *jscan) raw() ([]byte, error) {
	start := s.i
	if err := s.value(); err != nil {
		return nil, err
	}
	return s.b[start:s.i], nil
}

// end checks that only white space follows the top-level value.
func (s *jscan) end() error {
	s.ws()
	if s.i != len(s.b) {
		return s.fail("after top-level value")
	}
	return nil
}
