package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func TestPrintJSON(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := printJSON(&b, map[string]any{"body": "<a & b>", "n": 1}); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "{\n  \"body\": \"<a & b>\",\n  \"n\": 1\n}\n"; got != want {
		t.Errorf("printJSON: got %q, want %q", got, want)
	}
}

func TestJSONLines(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	j := newJSONLines(&b)
	for i := range 3 {
		if err := j.Write(map[string]any{"seq": i, "body": "a\nb"}); err != nil {
			t.Fatal(err)
		}
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 3 || lines[1] != `{"body":"a\nb","seq":1}` {
		t.Errorf("JSON Lines: got %q", b.String())
	}
}

func TestTimeFormats(t *testing.T) {
	t.Parallel()
	loc := time.FixedZone("X", 2*3600)
	ts := time.Date(2026, 1, 2, 5, 4, 5, 123000000, loc)
	if got, want := formatTime(ts), "2026-01-02T03:04:05Z"; got != want {
		t.Errorf("formatTime = %q, want %q", got, want)
	}
	if got := formatTime(time.Time{}); got != "-" {
		t.Errorf("formatTime(zero) = %q, want -", got)
	}
	if got := jsonTime(ts); got == nil || *got != "2026-01-02T03:04:05.123Z" {
		t.Errorf("jsonTime = %v, want 2026-01-02T03:04:05.123Z", got)
	}
	if got := jsonTime(time.Time{}); got != nil {
		t.Errorf("jsonTime(zero) = %q, want nil", *got)
	}
	if got := jsonTimePtr(nil); got != nil {
		t.Errorf("jsonTimePtr(nil) = %q, want nil", *got)
	}
}

func TestFormatDuration(t *testing.T) {
	t.Parallel()
	for in, want := range map[time.Duration]string{
		30 * time.Second: "30s", 10 * time.Minute: "10m", time.Hour: "1h", 90 * time.Minute: "1h30m",
		1500 * time.Millisecond: "1.5s", 61 * time.Second: "1m1s", 0: "0s",
	} {
		if got := formatDuration(in); got != want {
			t.Errorf("formatDuration(%s) = %q, want %q", in, got, want)
		}
	}
}
