package teambus_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus"
)

// shortPolicy is a valid policy with every value different from the
// defaults, in seconds as tests use.
func shortPolicy() teambus.Policy {
	return teambus.Policy{
		Heartbeat: time.Second, MemberTimeout: 3 * time.Second, ProbeTimeout: 2 * time.Second,
		LeadTimeout: 4 * time.Second, ZombieMax: 9 * time.Second, TakeoverAfter: 7 * time.Second,
		BlockedTimeout: 5 * time.Second, StuckTimeout: 6 * time.Second, CheckpointEvery: 1500 * time.Millisecond,
		AckWait: 2 * time.Second, CrashLimit: 0, MaxAttempts: 2,
	}
}

func TestDefaultPolicy_Spec(t *testing.T) {
	p := teambus.DefaultPolicy()
	want := teambus.Policy{
		Heartbeat: 30 * time.Second, MemberTimeout: 10 * time.Minute, ProbeTimeout: 2 * time.Minute,
		LeadTimeout: 5 * time.Minute, ZombieMax: 30 * time.Minute, TakeoverAfter: 30 * time.Minute,
		BlockedTimeout: 10 * time.Minute, StuckTimeout: 20 * time.Minute, CheckpointEvery: 30 * time.Second,
		AckWait: 5 * time.Minute, CrashLimit: 1, MaxAttempts: 3,
	}
	if p != want {
		t.Errorf("DefaultPolicy() = %+v, want %+v", p, want)
	}
	if err := p.Validate(); err != nil {
		t.Errorf("default policy invalid: %v", err)
	}
	if got, want := len(teambus.PolicyDurations), 10; got != want {
		t.Errorf("%d duration policies, want %d", got, want)
	}
}

func TestPolicy_Validate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*teambus.Policy)
		inErr  string // empty: valid
	}{
		{"short test values", func(*teambus.Policy) {}, ""},
		{"crash limit 0", func(p *teambus.Policy) { p.CrashLimit = 0 }, ""},
		{"crash limit 100", func(p *teambus.Policy) { p.CrashLimit = 100 }, ""},
		{"720h", func(p *teambus.Policy) { p.ZombieMax = 720 * time.Hour }, ""},
		{"sub-second heartbeat", func(p *teambus.Policy) { p.Heartbeat = 200 * time.Millisecond }, ""},
		{"zero heartbeat", func(p *teambus.Policy) { p.Heartbeat = 0 }, "heartbeat="},
		{"negative ack wait", func(p *teambus.Policy) { p.AckWait = -time.Second }, "ack-wait="},
		{"over 720h", func(p *teambus.Policy) { p.TakeoverAfter = 721 * time.Hour }, "takeover-after="},
		{"member timeout under 1s", func(p *teambus.Policy) { p.MemberTimeout = 500 * time.Millisecond }, "member-timeout="},
		{"lead timeout under 1s", func(p *teambus.Policy) { p.LeadTimeout = 999 * time.Millisecond }, "lead-timeout="},
		{"heartbeat under 100ms", func(p *teambus.Policy) { p.Heartbeat = 99 * time.Millisecond }, "heartbeat=99ms: at least 100ms"},
		{"member timeout 2 x heartbeat", func(p *teambus.Policy) { p.MemberTimeout = 2 * p.Heartbeat }, "member-timeout=2s: must be more than 2 x heartbeat"},
		{"lead timeout under 2 x heartbeat", func(p *teambus.Policy) { p.LeadTimeout = 2 * p.Heartbeat }, "lead-timeout=2s: must be more than 2 x heartbeat"},
		{"probe timeout = member timeout", func(p *teambus.Policy) { p.ProbeTimeout = p.MemberTimeout }, "probe-timeout=3s: must be less than member-timeout"},
		{"negative crash limit", func(p *teambus.Policy) { p.CrashLimit = -1 }, "crash-limit=-1"},
		{"crash limit 101", func(p *teambus.Policy) { p.CrashLimit = 101 }, "crash-limit=101"},
		{"zero max attempts", func(p *teambus.Policy) { p.MaxAttempts = 0 }, "max-attempts=0"},
		{"max attempts 101", func(p *teambus.Policy) { p.MaxAttempts = 101 }, "max-attempts=101"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := shortPolicy()
			tt.change(&p)
			err := p.Validate()
			if tt.inErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, teambus.ErrInvalid) {
				t.Fatalf("Validate() = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.inErr) {
				t.Errorf("error %q does not name %q", err, tt.inErr)
			}
		})
	}
}

func TestPolicy_JSONRoundTrip(t *testing.T) {
	for name, p := range map[string]teambus.Policy{
		"default": teambus.DefaultPolicy(),
		"short":   shortPolicy(),
		"odd":     {Heartbeat: time.Nanosecond, MemberTimeout: time.Hour + time.Nanosecond, ProbeTimeout: 1, LeadTimeout: time.Second, ZombieMax: 1, TakeoverAfter: 1, BlockedTimeout: 1, StuckTimeout: 1, CheckpointEvery: 1, AckWait: 1, CrashLimit: 7, MaxAttempts: 1},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			var got teambus.Policy
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatalf("unmarshal %s: %v", b, err)
			}
			if got != p {
				t.Errorf("round trip of %s = %+v, want %+v", b, got, p)
			}
		})
	}
}

func TestPolicy_MarshalJSON_DurationStrings(t *testing.T) {
	b, err := json.Marshal(shortPolicy())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]any{
		"heartbeat": "1s", "member_timeout": "3s", "checkpoint_every": "1.5s", "ack_wait": "2s",
		"crash_limit": 0.0, "max_attempts": 2.0,
	} {
		if got := m[key]; got != want {
			t.Errorf("%s = %#v, want %#v (in %s)", key, got, want, b)
		}
	}
}

func TestPolicy_UnmarshalJSON_MissingFieldsKeepDefaults(t *testing.T) {
	def := teambus.DefaultPolicy()
	tests := []struct {
		json string
		want func(*teambus.Policy)
	}{
		{`{}`, func(*teambus.Policy) {}},
		{`{"ack_wait":"2s"}`, func(p *teambus.Policy) { p.AckWait = 2 * time.Second }},
		{`{"crash_limit":4}`, func(p *teambus.Policy) { p.CrashLimit = 4 }},
		{`{"max_attempts":5}`, func(p *teambus.Policy) { p.MaxAttempts = 5 }},
		{`{"crash_limit":0}`, func(p *teambus.Policy) { p.CrashLimit = 0 }},
		{`{"crash_limit":0,"max_attempts":2}`, func(p *teambus.Policy) { p.CrashLimit, p.MaxAttempts = 0, 2 }},
		{`{"heartbeat":"","zombie_max":"1h"}`, func(p *teambus.Policy) { p.ZombieMax = time.Hour }},
	}
	for _, tt := range tests {
		t.Run(tt.json, func(t *testing.T) {
			var got teambus.Policy
			if err := json.Unmarshal([]byte(tt.json), &got); err != nil {
				t.Fatal(err)
			}
			want := def
			tt.want(&want)
			if got != want {
				t.Errorf("unmarshal %s = %+v, want %+v", tt.json, got, want)
			}
		})
	}
}

func TestPolicy_UnmarshalJSON_Bad(t *testing.T) {
	for _, in := range []string{`{"heartbeat":"soon"}`, `{"ack_wait":30}`, `{"crash_limit":"1"}`, `[`, `"x"`} {
		var p teambus.Policy
		if err := json.Unmarshal([]byte(in), &p); err == nil {
			t.Errorf("unmarshal %s = %+v, want an error", in, p)
		}
	}
}

func TestPolicy_String(t *testing.T) {
	s := shortPolicy().String()
	for _, want := range []string{"ack-wait=2s", "heartbeat=1s", "checkpoint-every=1.5s", "crash-limit=0", "max-attempts=2"} {
		if !strings.Contains(s, want) {
			t.Errorf("String() = %q, missing %q", s, want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	d, err := teambus.ParseDuration("--wait", " 1m30s ")
	if err != nil || d != 90*time.Second {
		t.Errorf("ParseDuration(1m30s) = %v, %v", d, err)
	}
	_, err = teambus.ParseDuration("--ack-wait", "5 minutes")
	if !errors.Is(err, teambus.ErrInvalid) || !strings.Contains(err.Error(), "--ack-wait") {
		t.Errorf("ParseDuration(5 minutes) = %v, want ErrInvalid naming --ack-wait", err)
	}
}
