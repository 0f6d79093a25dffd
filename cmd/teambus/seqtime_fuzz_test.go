package main

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/teambus/teambus"
)

func TestParseSeqOrTime(t *testing.T) {
	ts := time.Date(2026, 11, 22, 10, 0, 0, 500, time.UTC)
	tests := []struct {
		in   string
		seq  uint64
		at   time.Time
		fail bool
	}{
		{"", 0, time.Time{}, false},
		{"42", 42, time.Time{}, false},
		{"18446744073709551615", 1<<64 - 1, time.Time{}, false},
		{"2026-11-22T10:00:00.0000005Z", 0, ts, false},
		{"2026-11-22T11:00:00.0000005+01:00", 0, ts, false},
		{"-1", 0, time.Time{}, true},
		{"18446744073709551616", 0, time.Time{}, true},
		{"2026-11-22", 0, time.Time{}, true},
		{"yesterday", 0, time.Time{}, true},
		{" 42", 0, time.Time{}, true},
	}
	for _, tt := range tests {
		seq, at, err := parseSeqOrTime("--since", tt.in)
		if tt.fail {
			if !errors.Is(err, teambus.ErrInvalid) {
				t.Errorf("parseSeqOrTime(%q) = %d, %v, %v; want ErrInvalid", tt.in, seq, at, err)
			}
			continue
		}
		if err != nil || seq != tt.seq || !at.Equal(tt.at) {
			t.Errorf("parseSeqOrTime(%q) = %d, %v, %v; want %d, %v", tt.in, seq, at, err, tt.seq, tt.at)
		}
	}
}

func FuzzParseSeqOrTime(f *testing.F) {
	for _, s := range []string{"", "0", "7", "-1", "+5", "2026-11-22T10:00:00Z", "2026-11-22T10:00:00.123456789-07:00", "9999-12-31T23:59:59Z", "1e3", "0x10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		seq, at, err := parseSeqOrTime("--since", v)
		if err != nil {
			if !errors.Is(err, teambus.ErrInvalid) {
				t.Fatalf("parseSeqOrTime(%q) error %v is not ErrInvalid", v, err)
			}
			return
		}
		if seq != 0 && !at.IsZero() {
			t.Fatalf("parseSeqOrTime(%q) gave both seq %d and time %v", v, seq, at)
		}
		if !at.IsZero() {
			back, err := time.Parse(time.RFC3339Nano, at.Format(time.RFC3339Nano))
			if err != nil || !back.Equal(at) {
				t.Fatalf("time %v from %q does not round trip: %v, %v", at, v, back, err)
			}
			return
		}
		if v != "" {
			if n, err := strconv.ParseUint(v, 10, 64); err != nil || n != seq {
				t.Fatalf("parseSeqOrTime(%q) = seq %d", v, seq)
			}
		}
	})
}
