package spawn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
)

// Bucket names.
const (
	RecordBucket = "TBSPAWN"
	HostBucket   = "TBHOSTS"
)

// hostMarkerTTL is how long the host bucket keeps the marker of an
// expired host key, so a watcher that reconnects still sees the loss.
const hostMarkerTTL = time.Minute

// Mode is how an agent session runs.
type Mode string

// The modes.
const (
	// Headless runs `claude -p` (or the agent command) detached, its
	// output in a log file (teambus logs).
	Headless Mode = "headless"
	// Tmux runs the session in a window of the tmux session teambus-<team>
	// (teambus attach).
	Tmux Mode = "tmux"
)

// Spec is what to start for a member. It is recorded with the member, so
// that a respawn starts the same thing. It holds no secret: credentials
// reach the agent through the environment of the process that starts it.
type Spec struct {
	Team   string `json:"team"`
	Member string `json:"member"`
	// Cwd is the working directory, absolute.
	Cwd  string `json:"cwd"`
	Mode Mode   `json:"mode"`
	// Prompt is the first prompt of a fresh session; empty, the member's
	// brief.
	Prompt string `json:"prompt,omitempty"`
	// Agent is a command line (run by /bin/sh) started instead of Claude
	// Code; Args are appended to it as "$@".
	Agent string   `json:"agent,omitempty"`
	Args  []string `json:"args,omitempty"`
	// NoSidecar: the agent command binds itself (teambus mcp --join
	// --sidecar), spawn starts no sidecar for it.
	NoSidecar bool `json:"no_sidecar,omitempty"`
}

// Claude reports whether the spec runs Claude Code.
func (s Spec) Claude() bool { return s.Agent == "" }

// Validate checks a spec.
func (s Spec) Validate() error {
	if err := teambus.ValidateID("team", s.Team); err != nil {
		return err
	}
	if err := teambus.ValidateMemberID(s.Member); err != nil {
		return err
	}
	switch s.Mode {
	case Headless, Tmux:
	default:
		return teambus.Invalidf("invalid spawn mode %q: headless or tmux", s.Mode)
	}
	if s.Cwd == "" || !strings.HasPrefix(s.Cwd, "/") {
		return teambus.Invalidf("invalid --cwd %q: an absolute directory", s.Cwd)
	}
	if strings.HasPrefix(s.Prompt, "-") {
		return teambus.Invalidf("invalid --prompt: it can not start with '-' (Claude Code would read it as an option)")
	}
	if len(s.Prompt) > 100_000 {
		return teambus.Invalidf("invalid --prompt: %d bytes, at most 100000", len(s.Prompt))
	}
	if s.Agent != "" && strings.TrimSpace(s.Agent) == "" {
		return teambus.Invalidf("invalid --agent: empty command")
	}
	if s.NoSidecar && s.Agent == "" {
		return teambus.Invalidf("--no-sidecar goes with --agent: a Claude Code session's hooks start its sidecar")
	}
	for _, a := range append([]string{s.Prompt, s.Agent, s.Cwd}, s.Args...) {
		if strings.ContainsRune(a, 0) {
			return teambus.Invalidf("invalid spawn argument: NUL byte")
		}
	}
	return nil
}

// Record is the spawn record of a member.
type Record struct {
	Team   string `json:"team"`
	Member string `json:"member"`
	Spec   Spec   `json:"spec"`
	// Host is the teambus host that ran the latest start; empty when a
	// `teambus spawn` command ran it itself.
	Host string `json:"host,omitempty"`
	// Machine is the host name of the machine it ran on.
	Machine string `json:"machine,omitempty"`
	// Epoch is the member's epoch when the latest start was claimed (0
	// before its first incarnation): one start per epoch.
	Epoch int64 `json:"epoch"`
	// Starts counts starts, Respawns the automatic ones among them.
	Starts   int `json:"starts"`
	Respawns int `json:"respawns"`
	// From says what the latest session started from: "prompt" (a fresh
	// session with the spec's prompt or the brief), "transcript" (Claude
	// Code resumed its conversation) or "brief" (a respawn that found no
	// usable transcript and started fresh from the brief).
	From      string    `json:"from,omitempty"`
	Session   string    `json:"session,omitempty"` // the Claude session resumed, if any
	PID       int       `json:"pid,omitempty"`
	Log       string    `json:"log,omitempty"`
	Window    string    `json:"window,omitempty"`
	StartedAt time.Time `json:"started_at"`
}

// The values of Record.From.
const (
	FromPrompt     = "prompt"
	FromTranscript = "transcript"
	FromBrief      = "brief"
)

// HostInfo is what a running host publishes under its key.
type HostInfo struct {
	Name    string    `json:"name"`
	Machine string    `json:"machine"`
	PID     int       `json:"pid"`
	Max     int       `json:"max"`
	Running int       `json:"running"`
	Teams   []string  `json:"teams,omitempty"` // empty: every team
	Started time.Time `json:"started"`
	TS      time.Time `json:"ts"`
}

// Serves reports whether the host serves team.
func (h HostInfo) Serves(team string) bool {
	if len(h.Teams) == 0 {
		return true
	}
	for _, t := range h.Teams {
		if t == team {
			return true
		}
	}
	return false
}

// ErrNoRecord is returned for a member that was never spawned.
var ErrNoRecord = errors.New("no spawn record")

// Registry reads and writes the spawn records and the host registry.
type Registry struct {
	js    jetstream.JetStream
	recs  jetstream.KeyValue
	hosts jetstream.KeyValue
}

// Open opens (creating them when missing) the two buckets.
func Open(ctx context.Context, js jetstream.JetStream) (*Registry, error) {
	recs, err := js.KeyValue(ctx, RecordBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		recs, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: RecordBucket, Description: "teambus spawn records", History: 1, Storage: jetstream.FileStorage, MaxBytes: 16 << 20})
	}
	if err != nil {
		return nil, teambus.Unavailablef("open the spawn records: %w", err)
	}
	hosts, err := js.KeyValue(ctx, HostBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		hosts, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: HostBucket, Description: "teambus hosts (per-key TTL)", History: 1, Storage: jetstream.FileStorage, MaxBytes: 4 << 20, LimitMarkerTTL: hostMarkerTTL})
	}
	if err != nil {
		return nil, teambus.Unavailablef("open the host registry: %w", err)
	}
	return &Registry{js: js, recs: recs, hosts: hosts}, nil
}

func recordKey(team, member string) string { return team + "." + member }

// Record returns the spawn record of a member and its revision, or
// ErrNoRecord.
func (r *Registry) Record(ctx context.Context, team, member string) (*Record, uint64, error) {
	e, err := r.recs.Get(ctx, recordKey(team, member))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, ErrNoRecord
	}
	if err != nil {
		return nil, 0, teambus.Unavailablef("read the spawn record of %s: %w", member, err)
	}
	var rec Record
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return nil, 0, fmt.Errorf("spawn record of %s of team %s: %w", member, team, err)
	}
	return &rec, e.Revision(), nil
}

// Records returns the spawn records of a team by member.
func (r *Registry) Records(ctx context.Context, team string) (map[string]*Record, error) {
	out := map[string]*Record{}
	lister, err := r.recs.ListKeysFiltered(ctx, team+".*")
	if err != nil {
		return nil, teambus.Unavailablef("list the spawn records of team %s: %w", team, err)
	}
	for k := range lister.Keys() {
		_, member, _ := strings.Cut(k, ".")
		rec, _, err := r.Record(ctx, team, member)
		if err == nil {
			out[member] = rec
		}
	}
	return out, nil
}

// put writes rec if its revision is still rev (0: absent).
func (r *Registry) put(ctx context.Context, rec *Record, rev uint64) (uint64, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return 0, err
	}
	key := recordKey(rec.Team, rec.Member)
	if rev == 0 {
		n, err := r.recs.Create(ctx, key, b)
		return n, conflict(err)
	}
	n, err := r.recs.Update(ctx, key, b, rev)
	return n, conflict(err)
}

// remove deletes the record of member if its revision is still rev.
func (r *Registry) remove(ctx context.Context, team, member string, rev uint64) error {
	return conflict(r.recs.Delete(ctx, recordKey(team, member), jetstream.LastRevision(rev)))
}

// DeleteTeam removes the spawn records of a team.
func (r *Registry) DeleteTeam(ctx context.Context, team string) error {
	recs, err := r.Records(ctx, team)
	if err != nil {
		return err
	}
	for m := range recs {
		if err := r.recs.Purge(ctx, recordKey(team, m)); err != nil {
			return teambus.Unavailablef("delete the spawn record of %s: %w", m, err)
		}
	}
	return nil
}

// conflict maps a lost compare-and-set to teambus.ErrConflict.
func conflict(err error) error {
	var apiErr *jetstream.APIError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jetstream.ErrKeyExists),
		errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence:
		return fmt.Errorf("%w: spawn record changed since it was read", teambus.ErrConflict)
	}
	return teambus.Unavailablef("write a spawn record: %w", err)
}

// Hosts returns the hosts alive now, by name.
func (r *Registry) Hosts(ctx context.Context) (map[string]HostInfo, error) {
	out := map[string]HostInfo{}
	lister, err := r.hosts.ListKeys(ctx)
	if err != nil {
		return nil, teambus.Unavailablef("list hosts: %w", err)
	}
	for k := range lister.Keys() {
		if strings.HasPrefix(k, "_") {
			continue // loss markers
		}
		if h, err := r.Host(ctx, k); err == nil {
			out[k] = *h
		}
	}
	return out, nil
}

// Host returns a host that is alive, or an error wrapping
// teambus.ErrNotFound.
func (r *Registry) Host(ctx context.Context, name string) (*HostInfo, error) {
	e, err := r.hosts.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, teambus.NotFoundf("host %s is not running (teambus host --name %s starts it)", name, name)
	}
	if err != nil {
		return nil, teambus.Unavailablef("read host %s: %w", name, err)
	}
	var h HostInfo
	if err := json.Unmarshal(e.Value(), &h); err != nil {
		return nil, fmt.Errorf("host %s: %w", name, err)
	}
	return &h, nil
}

// Alive reports whether host name is registered now; "" is never alive.
func (r *Registry) Alive(ctx context.Context, name string) bool {
	if name == "" {
		return false
	}
	_, err := r.Host(ctx, name)
	return err == nil
}

// ValidateHost checks a host name: an id (letters, digits, _ and -), so
// it can stand in a subject.
func ValidateHost(name string) error { return teambus.ValidateID("host", name) }

// SpawnSubject is the subject a host answers spawn requests on.
func SpawnSubject(host string) string { return "tbhost." + host + ".spawn" }

// OpenExisting opens the two buckets without creating them: nil, nil
// when no spawn or host was ever recorded on this bus.
func OpenExisting(ctx context.Context, js jetstream.JetStream) (*Registry, error) {
	recs, err := js.KeyValue(ctx, RecordBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, teambus.Unavailablef("open the spawn records: %w", err)
	}
	hosts, err := js.KeyValue(ctx, HostBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, teambus.Unavailablef("open the host registry: %w", err)
	}
	return &Registry{js: js, recs: recs, hosts: hosts}, nil
}
