package eventlog_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/teambus/teambus/eventlog"
)

// readAll reads a log with Reader and returns the (line, sid/seq)
// of its events and its damaged lines.
func readAll(t testing.TB, r io.Reader) ([]string, []eventlog.Damaged, *eventlog.Reader) {
	t.Helper()
	er := eventlog.NewReader(r)
	var damaged []eventlog.Damaged
	er.OnDamaged = func(d eventlog.Damaged) { damaged = append(damaged, d) }
	var got []string
	for er.Next() {
		e := er.Event()
		got = append(got, e.SID+"/"+itoa(e.Seq))
		if _, err := eventlog.Parse(er.Raw()); err != nil {
			t.Fatalf("line %d: Raw does not parse: %v", er.Line(), err)
		}
	}
	if err := er.Err(); err != nil {
		t.Fatalf("read: %v", err)
	}
	return got, damaged, er
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestEventReader_Damaged(t *testing.T) {
	t.Parallel()
	line := func(seq int) string {
		return `{"v":1,"ts":"2026-02-14T10:00:00.000Z","sid":"s","seq":` + itoa(int64(seq)) + `,"type":"x","feature":null,"agent":null,"pane_id":null,"data":null}`
	}
	in := "\ufeff" + line(0) + "\r\n" + // BOM, CRLF
		"\n" + // blank
		"   \t\n" + // blank
		"not json\n" + // junk
		line(1)[:30] + line(2) + "\n" + // a write cut short, the next one appended to it
		`{"sid":"s"}` + "\n" + // JSON, not an event
		line(3) + "\n" +
		line(4)[:40] // truncated last line, no newline
	got, damaged, er := readAll(t, strings.NewReader(in))
	if strings.Join(got, " ") != "s/0 s/3" {
		t.Errorf("events = %v, want s/0 s/3", got)
	}
	want := []struct {
		line int64
		in   string
	}{{4, "malformed JSON: invalid character 'o'"}, {5, "malformed JSON"}, {6, "not an event: missing seq"}, {8, "truncated last line (no newline at the end)"}}
	if len(damaged) != len(want) {
		t.Fatalf("damaged = %+v", damaged)
	}
	for i, w := range want {
		if damaged[i].Line != w.line || !strings.Contains(damaged[i].Reason, w.in) {
			t.Errorf("damaged[%d] = %+v, want line %d containing %q", i, damaged[i], w.line, w.in)
		}
	}
	if er.Lines != 8 || er.Blank != 2 {
		t.Errorf("lines %d blank %d, want 8 and 2", er.Lines, er.Blank)
	}
}

// A read error stops the reader and is reported; the content never does.
func TestEventReader_ReadError(t *testing.T) {
	t.Parallel()
	boom := errors.New("disk on fire")
	er := eventlog.NewReader(io.MultiReader(strings.NewReader(`{"ts":"2026-02-14T10:00:00Z","sid":"s","seq":0,"type":"x"}`+"\n"), iotest.ErrReader(boom)))
	n := 0
	for er.Next() {
		n++
	}
	if n != 1 || !errors.Is(er.Err(), boom) {
		t.Errorf("read %d events, err %v; want 1 and %v", n, er.Err(), boom)
	}
}

// Lines longer than the reader's buffer are read whole; lines longer than
// MaxLine are skipped as damaged.
func TestEventReader_LongLines(t *testing.T) {
	t.Parallel()
	big := `{"ts":"2026-02-14T10:00:00Z","sid":"s","seq":0,"type":"x","data":"` + strings.Repeat("x", 3<<20) + `"}`
	huge := `{"ts":"2026-02-14T10:00:00Z","sid":"s","seq":1,"type":"x","data":"` + strings.Repeat("x", eventlog.MaxLine) + `"}`
	last := `{"ts":"2026-02-14T10:00:00Z","sid":"s","seq":2,"type":"x"}`
	got, damaged, _ := readAll(t, strings.NewReader(big+"\n"+huge+"\n"+last+"\n"))
	if strings.Join(got, " ") != "s/0 s/2" || len(damaged) != 1 || damaged[0].Line != 2 || !strings.Contains(damaged[0].Reason, "longer than") {
		t.Errorf("events %v, damaged %+v", got, damaged)
	}
}

// refEvent decodes line with encoding/json alone, the same rules written
// out plainly: the oracle for the hand-written scanner.
func refEvent(line []byte) (eventlog.Event, bool) {
	var e eventlog.Event
	var m map[string]json.RawMessage
	if !json.Valid(line) || json.Unmarshal(line, &m) != nil || m == nil {
		return e, false
	}
	str := func(k string) (string, bool) {
		raw, ok := m[k]
		if !ok || string(raw) == "null" {
			return "", true
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return s, true
	}
	var ok bool
	if raw, has := m["v"]; has && string(raw) != "null" {
		var v int64
		if json.Unmarshal(raw, &v) != nil || v > 1<<31-1 || v < -1<<31 {
			return e, false
		}
		e.V = int(v)
	}
	raw, has := m["seq"]
	if !has || string(raw) == "null" || json.Unmarshal(raw, &e.Seq) != nil || e.Seq < 0 {
		return e, false
	}
	var ts string
	for _, f := range []struct {
		k string
		p *string
	}{{"sid", &e.SID}, {"type", &e.Type}, {"feature", &e.Feature}, {"agent", &e.Agent}, {"pane_id", &e.PaneID}, {"ts", &ts}} {
		if *f.p, ok = str(f.k); !ok {
			return e, false
		}
	}
	if e.SID == "" || e.Type == "" || ts == "" {
		return e, false
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return e, false
	}
	e.TS = t
	if d, has := m["data"]; has && string(d) != "null" {
		e.Data = d
	}
	return e, true
}

func sameEvent(a, b eventlog.Event) bool {
	return a.V == b.V && a.TS.Equal(b.TS) && a.SID == b.SID && a.Seq == b.Seq && a.Type == b.Type &&
		a.Feature == b.Feature && a.Agent == b.Agent && a.PaneID == b.PaneID && bytes.Equal(a.Data, b.Data)
}

// FuzzParseEvent holds the envelope decoder to encoding/json: it accepts
// exactly the lines encoding/json decodes under the same rules, with the
// same values, and never panics. Its canonical encoding decodes back to
// the same event.
func FuzzParseEvent(f *testing.F) {
	for _, s := range []string{
		`{"v":1,"ts":"2026-02-14T10:00:00.000Z","sid":"f4e3d2c1","seq":0,"type":"session.start","feature":"auth-system","agent":null,"pane_id":null,"data":{"command":"implement"}}`,
		`{"ts":"2026-02-14T10:00:00Z","sid":"\u00e9\n","seq":1e2,"type":"x"}`,
		`{"ts":"2026-02-14T10:00:00Z","sid":"s","seq":0,"type":"x","data":[1,-0.5e+3,true,false,null,"\ud83d\ude00"]}`,
		`{"ts":"2026-02-14T10:00:00Z","sid":"s","seq":0,"seq":3,"type":"x","SID":"t"}`,
		`{"ts":"2026-02-14T10:00:00Z","sid":"s\xff","seq":0,"type":"x"}`,
		`{"v":1,"ts":"2026-02-14T10:00`,
		`{"ts":"2024-02-29T23:59:59.999999999Z","sid":"s","seq":0,"type":"x"}`,
		`{"ts":"2026-02-29T10:00:00.1Z","sid":"s","seq":0,"type":"x"}`,
		`{"ts":"2026-12-31T24:00:00.0000000001Z","sid":"s","seq":0,"type":"x"}`,
		`{"ts":"2026-02-14T10:00:00.000+05:30","sid":"s","seq":0,"type":"x"}`,
		`[]`, `null`, ``, `{}`, `{"a":01}`, `{"a":"\x01"}`, `{"a":1.}`, `{"a":tru}`, ` {"a" : [ ] } `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		got, err := eventlog.Parse(line)
		want, ok := refEvent(line)
		if (err == nil) != ok {
			t.Fatalf("Parse(%q) = %v; encoding/json says ok=%t", line, err, ok)
		}
		if err != nil {
			var ee *eventlog.ParseError
			if !errors.As(err, &ee) {
				t.Fatalf("Parse(%q) error %v is not an ParseError", line, err)
			}
			if ee.Malformed == json.Valid(line) {
				t.Fatalf("Parse(%q): malformed=%t but json.Valid=%t", line, ee.Malformed, json.Valid(line))
			}
			return
		}
		if !sameEvent(got, want) {
			t.Fatalf("Parse(%q) = %+v, encoding/json gives %+v", line, got, want)
		}
		canon := got.AppendJSON(nil)
		if bytes.ContainsAny(canon, "\n\r") || !json.Valid(canon) {
			t.Fatalf("canonical form of %q is not one valid line: %q", line, canon)
		}
		back, err := eventlog.Parse(canon)
		if err != nil {
			t.Fatalf("canonical form %q does not parse: %v", canon, err)
		}
		// Invalid UTF-8 in strings becomes U+FFFD on decoding already, so
		// the strings round-trip; data is kept as written, compacted.
		got.Data = compact(got.Data)
		if !sameEvent(back, got) {
			t.Fatalf("canonical round trip of %q: %+v, want %+v", line, back, got)
		}
	})
}

func compact(b []byte) []byte {
	if b == nil {
		return nil
	}
	if !bytes.ContainsAny(b, "\r\n\t") {
		return b
	}
	var buf bytes.Buffer
	_ = json.Compact(&buf, b)
	return buf.Bytes()
}

// FuzzEventReader: whatever the input, the reader classifies every line
// (event, blank or damaged), never stops on content and never panics, and
// the events it returns are exactly the lines that parse.
func FuzzEventReader(f *testing.F) {
	// Short seeds: the fuzzer minimizes every new input it finds, which
	// takes long on whole logs.
	for _, name := range []string{"seed-resumed.jsonl", "damaged-junk.jsonl", "damaged-truncated.jsonl", "duplicate.jsonl"} {
		lines := eventLines(f, name)
		f.Add([]byte(strings.Join(lines[len(lines)-3:], "\n")))
	}
	f.Add([]byte("\n\n\r\n{}\n[\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		er := eventlog.NewReader(bytes.NewReader(in))
		var damaged int64
		er.OnDamaged = func(eventlog.Damaged) { damaged++ }
		var events int64
		for er.Next() {
			events++
			if _, err := eventlog.Parse(er.Raw()); err != nil {
				t.Fatalf("line %d returned as an event does not parse: %v", er.Line(), err)
			}
		}
		if err := er.Err(); err != nil {
			t.Fatalf("content stopped the reader: %v", err)
		}
		if events+damaged+er.Blank != er.Lines {
			t.Fatalf("%d events + %d damaged + %d blank != %d lines", events, damaged, er.Blank, er.Lines)
		}
		lines := int64(bytes.Count(in, []byte("\n")))
		if len(in) > 0 && in[len(in)-1] != '\n' {
			lines++
		}
		if er.Lines != lines {
			t.Fatalf("read %d lines, the input has %d", er.Lines, lines)
		}
		// The analysis of any input never fails either.
		if _, err := eventlog.AnalyzeJSONL(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(in)), nil }, eventlog.AnalyzeOptions{}); err != nil {
			t.Fatalf("analyze: %v", err)
		}
	})
}
