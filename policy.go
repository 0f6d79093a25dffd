package teambus

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Policy holds the timings and limits of a team. It is stored with the team
// so that every sidecar agrees on them. Nothing may assume the defaults.
type Policy struct {
	Heartbeat       time.Duration `json:"heartbeat"`
	MemberTimeout   time.Duration `json:"member_timeout"`
	ProbeTimeout    time.Duration `json:"probe_timeout"`
	LeadTimeout     time.Duration `json:"lead_timeout"`
	ZombieMax       time.Duration `json:"zombie_max"`
	TakeoverAfter   time.Duration `json:"takeover_after"`
	BlockedTimeout  time.Duration `json:"blocked_timeout"`
	StuckTimeout    time.Duration `json:"stuck_timeout"`
	CheckpointEvery time.Duration `json:"checkpoint_every"`
	AckWait         time.Duration `json:"ack_wait"`
	CrashLimit      int           `json:"crash_limit"`
	MaxAttempts     int           `json:"max_attempts"`
	// Respawn says who restarts a crashed member: "" is RespawnLead.
	Respawn RespawnPolicy `json:"respawn,omitempty"`
}

// RespawnPolicy says what happens after a member's crash with crash budget
// left.
type RespawnPolicy string

// The respawn policies. A Policy stores RespawnLead, the default, as "".
const (
	// RespawnAuto: a teambus host restarts the member within seconds.
	RespawnAuto RespawnPolicy = "auto"
	// RespawnLead: the lead is told and decides (teambus spawn).
	RespawnLead RespawnPolicy = "lead"
	// RespawnOff: nobody is prompted to restart it.
	RespawnOff RespawnPolicy = "off"
)

// ParseRespawn reads a respawn policy as given on the command line.
func ParseRespawn(s string) (RespawnPolicy, error) {
	switch r := RespawnPolicy(strings.TrimSpace(s)); r {
	case RespawnAuto, RespawnOff:
		return r, nil
	case RespawnLead, "":
		return "", nil
	}
	return "", Invalidf("invalid policy respawn=%q: auto, lead or off", clip(s))
}

// RespawnMode is the policy's respawn mode, RespawnLead when unset.
func (p Policy) RespawnMode() RespawnPolicy {
	if p.Respawn == "" {
		return RespawnLead
	}
	return p.Respawn
}

// DefaultPolicy returns the defaults of the seed documents.
func DefaultPolicy() Policy {
	return Policy{
		Heartbeat:       30 * time.Second,
		MemberTimeout:   10 * time.Minute,
		ProbeTimeout:    2 * time.Minute,
		LeadTimeout:     5 * time.Minute,
		ZombieMax:       30 * time.Minute,
		TakeoverAfter:   30 * time.Minute,
		BlockedTimeout:  10 * time.Minute,
		StuckTimeout:    20 * time.Minute,
		CheckpointEvery: 30 * time.Second,
		AckWait:         5 * time.Minute,
		CrashLimit:      1,
		MaxAttempts:     3,
	}
}

// PolicyDuration names one duration field of Policy: the flag name and a
// pointer into a Policy. The command line builds its flags from this list.
type PolicyDuration struct {
	Name  string
	Usage string
	Get   func(*Policy) *time.Duration
}

// PolicyDurations lists the duration policies in the order of the
// specification, section 4.
var PolicyDurations = []PolicyDuration{
	{"heartbeat", "sidecar heartbeat interval", func(p *Policy) *time.Duration { return &p.Heartbeat }},
	{"member-timeout", "teammate heartbeat older than this: offline, crash detection starts", func(p *Policy) *time.Duration { return &p.MemberTimeout }},
	{"probe-timeout", "wait for a status reply before confirming a crash", func(p *Policy) *time.Duration { return &p.ProbeTimeout }},
	{"lead-timeout", "lead heartbeat older than this: teammates enter zombie mode", func(p *Policy) *time.Duration { return &p.LeadTimeout }},
	{"zombie-max", "zombie longer than this: teammate releases its task and shuts down", func(p *Policy) *time.Duration { return &p.ZombieMax }},
	{"takeover-after", "another lead session may take over without --force after this", func(p *Policy) *time.Duration { return &p.TakeoverAfter }},
	{"blocked-timeout", "a blocked task with no lead decision returns to the queue", func(p *Policy) *time.Duration { return &p.BlockedTimeout }},
	{"stuck-timeout", "fresh heartbeat but no activity for this long: probed", func(p *Policy) *time.Duration { return &p.StuckTimeout }},
	{"checkpoint-every", "sidecar auto-checkpoint interval", func(p *Policy) *time.Duration { return &p.CheckpointEvery }},
	{"ack-wait", "unacknowledged pushed mail is redelivered after this", func(p *Policy) *time.Duration { return &p.AckWait }},
}

// Validate checks that every duration is positive and whole enough to be a
// heartbeat TTL, and that the limits are sane.
func (p Policy) Validate() error {
	q := p
	for _, d := range PolicyDurations {
		v := *d.Get(&q)
		if v <= 0 {
			return Invalidf("invalid policy %s=%s: must be a positive duration such as 30s or 5m", d.Name, v)
		}
		if v > 30*24*time.Hour {
			return Invalidf("invalid policy %s=%s: at most 720h", d.Name, v)
		}
	}
	for _, name := range []string{"member-timeout", "lead-timeout"} {
		for _, d := range PolicyDurations {
			if d.Name == name && *d.Get(&q) < time.Second {
				return Invalidf("invalid policy %s=%s: at least 1s (heartbeat expiry has whole-second precision)", name, *d.Get(&q))
			}
		}
	}
	// The timings must fit together, or liveness can not work: a sidecar
	// beats at least twice per timeout, and a probe is answered (or not)
	// before the member times out.
	if p.Heartbeat < 100*time.Millisecond {
		return Invalidf("invalid policy heartbeat=%s: at least 100ms", p.Heartbeat)
	}
	if p.MemberTimeout <= 2*p.Heartbeat {
		return Invalidf("invalid policy member-timeout=%s: must be more than 2 x heartbeat (%s)", p.MemberTimeout, p.Heartbeat)
	}
	if p.LeadTimeout <= 2*p.Heartbeat {
		return Invalidf("invalid policy lead-timeout=%s: must be more than 2 x heartbeat (%s)", p.LeadTimeout, p.Heartbeat)
	}
	if p.ProbeTimeout >= p.MemberTimeout {
		return Invalidf("invalid policy probe-timeout=%s: must be less than member-timeout (%s)", p.ProbeTimeout, p.MemberTimeout)
	}
	if p.CrashLimit < 0 || p.CrashLimit > 100 {
		return Invalidf("invalid policy crash-limit=%d: 0 to 100", p.CrashLimit)
	}
	if p.MaxAttempts < 1 || p.MaxAttempts > 100 {
		return Invalidf("invalid policy max-attempts=%d: 1 to 100", p.MaxAttempts)
	}
	switch p.Respawn {
	case "", RespawnAuto, RespawnLead, RespawnOff:
	default:
		return Invalidf("invalid policy respawn=%q: auto, lead or off", clip(string(p.Respawn)))
	}
	return nil
}

// ParseDuration parses a Go duration for the named setting and wraps a
// failure as ErrInvalid.
func ParseDuration(name, s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, Invalidf("invalid %s %q: use a Go duration such as 30s, 5m or 1h30m", name, clip(s))
	}
	return d, nil
}

// policyJSON is the stored form: durations as Go duration strings.
type policyJSON struct {
	Heartbeat       string `json:"heartbeat"`
	MemberTimeout   string `json:"member_timeout"`
	ProbeTimeout    string `json:"probe_timeout"`
	LeadTimeout     string `json:"lead_timeout"`
	ZombieMax       string `json:"zombie_max"`
	TakeoverAfter   string `json:"takeover_after"`
	BlockedTimeout  string `json:"blocked_timeout"`
	StuckTimeout    string `json:"stuck_timeout"`
	CheckpointEvery string `json:"checkpoint_every"`
	AckWait         string `json:"ack_wait"`
	CrashLimit      int    `json:"crash_limit"`
	MaxAttempts     int    `json:"max_attempts"`
	Respawn         string `json:"respawn,omitempty"`
}

// MarshalJSON writes durations as strings such as "30s".
func (p Policy) MarshalJSON() ([]byte, error) {
	return json.Marshal(policyJSON{
		Heartbeat: p.Heartbeat.String(), MemberTimeout: p.MemberTimeout.String(),
		ProbeTimeout: p.ProbeTimeout.String(), LeadTimeout: p.LeadTimeout.String(),
		ZombieMax: p.ZombieMax.String(), TakeoverAfter: p.TakeoverAfter.String(),
		BlockedTimeout: p.BlockedTimeout.String(), StuckTimeout: p.StuckTimeout.String(),
		CheckpointEvery: p.CheckpointEvery.String(), AckWait: p.AckWait.String(),
		CrashLimit: p.CrashLimit, MaxAttempts: p.MaxAttempts,
		Respawn: string(p.Respawn),
	})
}

// UnmarshalJSON reads the string form written by MarshalJSON. Missing
// fields keep the defaults.
func (p *Policy) UnmarshalJSON(b []byte) error {
	var j policyJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	// The limits are read again as pointers: 0 is a valid crash-limit, so
	// only an absent field keeps its default.
	var lim struct {
		CrashLimit  *int `json:"crash_limit"`
		MaxAttempts *int `json:"max_attempts"`
	}
	if err := json.Unmarshal(b, &lim); err != nil {
		return err
	}
	out := DefaultPolicy()
	pairs := []struct {
		s string
		d *time.Duration
	}{
		{j.Heartbeat, &out.Heartbeat}, {j.MemberTimeout, &out.MemberTimeout},
		{j.ProbeTimeout, &out.ProbeTimeout}, {j.LeadTimeout, &out.LeadTimeout},
		{j.ZombieMax, &out.ZombieMax}, {j.TakeoverAfter, &out.TakeoverAfter},
		{j.BlockedTimeout, &out.BlockedTimeout}, {j.StuckTimeout, &out.StuckTimeout},
		{j.CheckpointEvery, &out.CheckpointEvery}, {j.AckWait, &out.AckWait},
	}
	for _, x := range pairs {
		if x.s == "" {
			continue
		}
		d, err := time.ParseDuration(x.s)
		if err != nil {
			return fmt.Errorf("policy duration %q: %w", x.s, err)
		}
		*x.d = d
	}
	if lim.CrashLimit != nil {
		out.CrashLimit = *lim.CrashLimit
	}
	if lim.MaxAttempts != nil {
		out.MaxAttempts = *lim.MaxAttempts
	}
	// "lead" is stored as "", the default; any other value is kept for
	// Validate to judge.
	if j.Respawn != string(RespawnLead) {
		out.Respawn = RespawnPolicy(j.Respawn)
	}
	*p = out
	return nil
}

// String prints the policy as name=value pairs, sorted by name.
func (p Policy) String() string {
	var parts []string
	q := p
	for _, d := range PolicyDurations {
		parts = append(parts, fmt.Sprintf("%s=%s", d.Name, *d.Get(&q)))
	}
	sort.Strings(parts)
	parts = append(parts, fmt.Sprintf("crash-limit=%d", p.CrashLimit), fmt.Sprintf("max-attempts=%d", p.MaxAttempts), "respawn="+string(p.RespawnMode()))
	return strings.Join(parts, " ")
}
