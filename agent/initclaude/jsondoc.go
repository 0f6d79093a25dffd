package initclaude

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrNotJSON is returned for a file that is not strict JSON (comments,
// trailing commas, a byte order mark) or whose shape teambus can not edit
// safely. Nothing is written then.
var ErrNotJSON = errors.New("not strict JSON")

// member is one member of a JSON object: its key as written (quotes and
// escapes included), the key decoded, and the value's bytes as written.
type member struct {
	rawKey []byte
	key    string
	value  []byte
}

// newMember builds a member with a generated key.
func newMember(key string, value []byte) member {
	k, _ := marshal(key, 0)
	return member{rawKey: k, key: key, value: value}
}

// isBlank reports whether data holds only JSON whitespace.
func isBlank(data []byte) bool {
	return len(bytes.Trim(data, " \t\r\n")) == 0
}

// parseDocument parses a whole file as a JSON object. A blank file is an
// empty object.
func parseDocument(data []byte) ([]member, error) {
	if isBlank(data) {
		return nil, nil
	}
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		return nil, fmt.Errorf("%w: %w", ErrNotJSON, err)
	}
	ms, err := parseObject(data)
	if err != nil {
		return nil, fmt.Errorf("%w: the top level is not an object", ErrNotJSON)
	}
	return ms, nil
}

// parseObject splits a valid JSON object into its members, in order.
func parseObject(data []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("not an object")
	}
	var ms []member
	for dec.More() {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("object key is not a string")
		}
		raw := bytes.TrimLeft(data[start:dec.InputOffset()], " \t\r\n,")
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		ms = append(ms, member{rawKey: append([]byte(nil), raw...), key: key, value: v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return ms, nil
}

// parseArray splits a valid JSON array into its elements, in order.
func parseArray(data []byte) ([][]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return nil, fmt.Errorf("not an array")
	}
	var out [][]byte
	for dec.More() {
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return out, nil
}

// kind returns the JSON kind of a value by its first byte: '{', '[', '"',
// 'n' (null), or another byte for numbers and booleans.
func kind(v []byte) byte {
	v = bytes.TrimLeft(v, " \t\r\n")
	if len(v) == 0 {
		return 0
	}
	return v[0]
}

// indent is the indentation of depth.
func indent(depth int) string { return strings.Repeat("  ", depth) }

// writeObject writes members as an object at depth, each member on its own
// line, values as they are.
func writeObject(ms []member, depth int) []byte {
	lines := make([][]byte, len(ms))
	for i, m := range ms {
		lines[i] = slices.Concat(m.rawKey, []byte(": "), m.value)
	}
	return writeLines('{', '}', lines, depth)
}

// writeArray writes elements as an array at depth, one per line.
func writeArray(elems [][]byte, depth int) []byte {
	return writeLines('[', ']', elems, depth)
}

// writeLines writes items between the brackets at depth, one per line;
// no items is the two brackets on one line.
func writeLines(opening, closing byte, items [][]byte, depth int) []byte {
	if len(items) == 0 {
		return []byte{opening, closing}
	}
	var b bytes.Buffer
	b.WriteByte(opening)
	b.WriteByte('\n')
	for i, item := range items {
		b.WriteString(indent(depth + 1))
		b.Write(item)
		if i < len(items)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString(indent(depth))
	b.WriteByte(closing)
	return b.Bytes()
}

// marshal encodes v for a position at depth: 2-space indentation, HTML
// characters not escaped (as JSON.stringify writes them).
func marshal(v any, depth int) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent(indent(depth), "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// document renders a top-level object as a file: the object and a newline.
func document(ms []member) []byte {
	return append(writeObject(ms, 0), '\n')
}

// findKey returns the index of the one member named key, -1 if none, and an
// error when the key appears more than once.
func findKey(ms []member, key string) (int, error) {
	at := -1
	for i, m := range ms {
		if m.key == key {
			if at >= 0 {
				return -1, fmt.Errorf("%w: key %q appears twice", ErrNotJSON, key)
			}
			at = i
		}
	}
	return at, nil
}

// sameJSON reports whether a and b hold the same JSON value (object key
// order ignored, numbers compared as written).
func sameJSON(a, b []byte) bool {
	va, ea := decodeAny(a)
	vb, eb := decodeAny(b)
	if ea != nil || eb != nil {
		return false
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}

// decodeAny decodes data with numbers kept as written; blank is {}.
func decodeAny(data []byte) (any, error) {
	if isBlank(data) {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}
