package eventlog_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/eventlog"
)

// eventLines reads a test log's lines.
func eventLines(t testing.TB, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "events", name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n")
}

// The seed's lines are in the canonical form: decoding and encoding them
// gives the same bytes.
func TestEvent_CanonicalSeedLines(t *testing.T) {
	t.Parallel()
	for _, line := range eventLines(t, "seed-resumed.jsonl") {
		e, err := eventlog.Parse([]byte(line))
		if err != nil {
			t.Fatalf("parse %s: %v", line, err)
		}
		if got := string(e.AppendJSON(nil)); got != line {
			t.Errorf("canonical form differs:\n got %s\nwant %s", got, line)
		}
		b, err := json.Marshal(e)
		if err != nil || string(b) != line {
			t.Errorf("json.Marshal = %s, %v", b, err)
		}
		var back eventlog.Event
		if err := json.Unmarshal([]byte(line), &back); err != nil || !back.TS.Equal(e.TS) || back.SID != e.SID || !bytes.Equal(back.Data, e.Data) {
			t.Errorf("json.Unmarshal = %+v, %v", back, err)
		}
	}
}

func TestParseEvent(t *testing.T) {
	t.Parallel()
	ok := `{"v":1,"ts":"2026-02-14T10:00:00.000Z","sid":"s","seq":3,"type":"checkpoint","feature":"f","agent":null,"pane_id":"%1","data":{"label":"x"}}`
	e, err := eventlog.Parse([]byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	want := eventlog.Event{V: 1, TS: time.Date(2026, 2, 14, 10, 0, 0, 0, time.UTC), SID: "s", Seq: 3, Type: "checkpoint", Feature: "f", PaneID: "%1", Data: json.RawMessage(`{"label":"x"}`)}
	if !e.TS.Equal(want.TS) || e.V != want.V || e.SID != want.SID || e.Seq != want.Seq || e.Type != want.Type || e.Feature != want.Feature || e.Agent != "" || e.PaneID != want.PaneID || string(e.Data) != string(want.Data) {
		t.Errorf("Parse = %+v, want %+v", e, want)
	}
	tests := []struct {
		name, line string
		malformed  bool
		truncated  bool
		in         string
	}{
		{"empty", ``, true, true, ""},
		{"junk", `garbage`, true, false, "invalid character"},
		{"truncated", `{"v":1,"ts":"2026-02-14T10:00:00.000Z","si`, true, true, "unexpected end"},
		{"trailing junk", `{"v":1} x`, true, false, "after top-level value"},
		{"array", `[1,2]`, false, false, "not a JSON object"},
		{"no sid", `{"ts":"2026-02-14T10:00:00Z","seq":0,"type":"x"}`, false, false, "missing sid"},
		{"no seq", `{"ts":"2026-02-14T10:00:00Z","sid":"s","type":"x"}`, false, false, "missing seq"},
		{"null seq", `{"ts":"2026-02-14T10:00:00Z","sid":"s","seq":null,"type":"x"}`, false, false, "missing seq"},
		{"negative seq", `{"ts":"2026-02-14T10:00:00Z","sid":"s","seq":-1,"type":"x"}`, false, false, "negative seq"},
		{"float seq", `{"ts":"2026-02-14T10:00:00Z","sid":"s","seq":1.5,"type":"x"}`, false, false, "seq: want an integer"},
		{"string seq", `{"ts":"2026-02-14T10:00:00Z","sid":"s","seq":"1","type":"x"}`, false, false, "seq: want an integer"},
		{"no type", `{"ts":"2026-02-14T10:00:00Z","sid":"s","seq":0}`, false, false, "missing type"},
		{"no ts", `{"sid":"s","seq":0,"type":"x"}`, false, false, "missing ts"},
		{"bad ts", `{"ts":"yesterday","sid":"s","seq":0,"type":"x"}`, false, false, "RFC 3339"},
		{"numeric agent", `{"ts":"2026-02-14T10:00:00Z","sid":"s","seq":0,"type":"x","agent":7}`, false, false, "agent: want a string or null"},
		{"deep", `{"ts":"2026-02-14T10:00:00Z","sid":"s","seq":0,"type":"x","data":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`, true, false, "exceeded max depth"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := eventlog.Parse([]byte(tt.line))
			var ee *eventlog.ParseError
			if !errors.As(err, &ee) || !errors.Is(err, teambus.ErrInvalid) {
				t.Fatalf("Parse(%.60q) = %v, want an ParseError", tt.line, err)
			}
			if ee.Malformed != tt.malformed || ee.Truncated != tt.truncated || !strings.Contains(err.Error(), tt.in) {
				t.Errorf("Parse(%.60q) = %v (malformed %t, truncated %t), want malformed %t, truncated %t, containing %q", tt.line, err, ee.Malformed, ee.Truncated, tt.malformed, tt.truncated, tt.in)
			}
		})
	}
	// Escaped keys and values decode; the last of duplicate keys wins;
	// unknown fields are ignored.
	e, err = eventlog.Parse([]byte(`{"\u0073id":"a\u00e9","seq":1,"seq":2,"type":"t","ts":"2026-02-14T10:00:00+01:00","extra":[1,{"a":null}],"data":null}`))
	if err != nil || e.SID != "aé" || e.Seq != 2 || e.Data != nil || !e.TS.Equal(time.Date(2026, 2, 14, 9, 0, 0, 0, time.UTC)) {
		t.Errorf("Parse with escapes = %+v, %v", e, err)
	}
}

func TestEvent_AppendJSON(t *testing.T) {
	t.Parallel()
	e := eventlog.Event{V: 1, TS: time.Date(2026, 2, 14, 10, 0, 0, 123456000, time.FixedZone("x", 3600)), SID: "s \"1\"\n", Seq: 4, Type: "task.started",
		Agent: "tm1", Data: json.RawMessage("{\n  \"a\": [1, 2]\n}")}
	got := string(e.AppendJSON(nil))
	want := `{"v":1,"ts":"2026-02-14T09:00:00.123456Z","sid":"s \"1\"\n","seq":4,"type":"task.started","feature":null,"agent":"tm1","pane_id":null,"data":{"a":[1,2]}}`
	if got != want {
		t.Errorf("AppendJSON =\n%s\nwant\n%s", got, want)
	}
	back, err := eventlog.Parse([]byte(got))
	if err != nil || back.SID != e.SID || !back.TS.Equal(e.TS) || string(back.Data) != `{"a":[1,2]}` {
		t.Errorf("round trip = %+v, %v", back, err)
	}
	for _, tt := range []struct {
		ts   time.Time
		want string
	}{
		{time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), "2026-01-02T03:04:05.000Z"},
		{time.Date(2026, 1, 2, 3, 4, 5, 7e6, time.UTC), "2026-01-02T03:04:05.007Z"},
		{time.Date(2026, 1, 2, 3, 4, 5, 7, time.UTC), "2026-01-02T03:04:05.000000007Z"},
	} {
		if got := string(eventlog.AppendTime(nil, tt.ts)); got != tt.want {
			t.Errorf("AppendTime(%v) = %s, want %s", tt.ts, got, tt.want)
		}
	}
}

func TestEvent_Validate(t *testing.T) {
	t.Parallel()
	good := eventlog.Event{V: 1, SID: "s", Seq: eventlog.AutoSeq, Type: "task.started"}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid event: %v", err)
	}
	for _, tt := range []struct {
		name string
		mod  func(*eventlog.Event)
	}{
		{"uppercase type", func(e *eventlog.Event) { e.Type = "Task.started" }},
		{"wildcard type", func(e *eventlog.Event) { e.Type = "task.*" }},
		{"empty segment", func(e *eventlog.Event) { e.Type = "task..started" }},
		{"long type", func(e *eventlog.Event) { e.Type = strings.Repeat("a", 65) }},
		{"empty sid", func(e *eventlog.Event) { e.SID = "" }},
		{"control in sid", func(e *eventlog.Event) { e.SID = "a\x00" }},
		{"long agent", func(e *eventlog.Event) { e.Agent = strings.Repeat("a", 129) }},
		{"newline in pane", func(e *eventlog.Event) { e.PaneID = "a\nb" }},
		{"bad data", func(e *eventlog.Event) { e.Data = json.RawMessage("{") }},
		{"seq below auto", func(e *eventlog.Event) { e.Seq = -2 }},
		{"negative v", func(e *eventlog.Event) { e.V = -1 }},
	} {
		e := good
		tt.mod(&e)
		if err := e.Validate(); !errors.Is(err, teambus.ErrInvalid) {
			t.Errorf("%s: Validate = %v, want ErrInvalid", tt.name, err)
		}
	}
}

// The fast path for the usual ts agrees with time.Parse.
func TestParseEvent_Times(t *testing.T) {
	t.Parallel()
	for _, ts := range []string{
		"2026-02-14T10:00:00Z", "2026-02-14T10:00:00.000Z", "2026-02-14T10:00:00.1Z", "2024-02-29T23:59:59.999999999Z",
		"2026-02-29T10:00:00Z", "2026-04-31T10:00:00Z", "2026-13-01T10:00:00Z", "2026-02-14T24:00:00Z", "2026-02-14T10:60:00Z",
		"2026-02-14T10:00:60Z", "2026-02-14T10:00:00.Z", "2026-02-14T10:00:00.1234567891Z", "2026-02-14t10:00:00Z",
		"2026-02-14T10:00:00+01:00", "0000-01-01T00:00:00Z", "2026-2-14T10:00:00Z",
	} {
		e, err := eventlog.Parse([]byte(`{"ts":"` + ts + `","sid":"s","seq":0,"type":"x"}`))
		want, werr := time.Parse(time.RFC3339Nano, ts)
		if (err == nil) != (werr == nil) || (err == nil && !e.TS.Equal(want)) {
			t.Errorf("ts %s: Parse gives %v, %v; time.Parse %v, %v", ts, e.TS, err, want, werr)
		}
	}
}
