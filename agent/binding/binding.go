package binding

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/internal/atomicfile"
)

// Version is the binding file format.
const Version = 1

// RecentMax is the size of the ring of recently delivered mail sequences.
const RecentMax = 256

// Roles of a bound member.
const (
	RoleTeammate = "teammate"
	RoleLead     = "lead"
)

// Binding is the binding file of one Claude process (§12.1.4).
type Binding struct {
	V              int       `json:"v"`
	Team           string    `json:"team"`
	Member         string    `json:"member"`
	Role           string    `json:"role"`
	Session        string    `json:"session"`
	Epoch          int64     `json:"epoch"`
	ClaudePID      int       `json:"claude_pid"`
	ClaudeStart    uint64    `json:"claude_start"`
	ClaudeSessions []string  `json:"claude_sessions"`
	Cwd            string    `json:"cwd"`
	SidecarPID     int       `json:"sidecar_pid"`
	SidecarStart   uint64    `json:"sidecar_start,omitempty"`
	WaiterPID      int       `json:"waiter_pid"`
	WaiterStart    uint64    `json:"waiter_start,omitempty"`
	BoundAt        time.Time `json:"bound_at"`
	CleanExit      bool      `json:"clean_exit"`
	// Notices remembers the last state of each notice kind, so a notice is
	// shown once per transition.
	Notices map[string]string `json:"notices"`
	// Recent is the ring of mail sequences delivered to this session,
	// oldest first: mail seen again is marked as a possible repeat.
	Recent    []uint64   `json:"recent"`
	LastTouch *time.Time `json:"last_touch"`
	// BusDownUntil remembers a failed bus connection: hooks before this
	// time do not try again.
	BusDownUntil *time.Time `json:"bus_down_until,omitempty"`
	// TurnStart and PromptID are of the current turn (UserPromptSubmit).
	TurnStart *time.Time `json:"turn_start,omitempty"`
	PromptID  string     `json:"prompt_id,omitempty"`
	// StopContinues counts the autonomous Stop continuations of PromptID.
	StopContinues int `json:"stop_continues,omitempty"`
	// Fenced is set once a newer incarnation replaced this one; hooks then
	// do nothing else.
	Fenced bool `json:"fenced,omitempty"`
}

// Lead reports whether the binding is the team's lead.
func (b *Binding) Lead() bool { return b.Role == RoleLead }

// HasSession reports whether the Claude session id belongs to this binding
// (session gating, §12.1.5).
func (b *Binding) HasSession(id string) bool {
	return id != "" && slices.Contains(b.ClaudeSessions, id)
}

// AddSession adds a Claude session id (after /clear or /resume in the same
// process); it reports whether it was new.
func (b *Binding) AddSession(id string) bool {
	if id == "" || b.HasSession(id) {
		return false
	}
	b.ClaudeSessions = append(b.ClaudeSessions, id)
	return true
}

// Seen reports whether seq was delivered to this session before.
func (b *Binding) Seen(seq uint64) bool { return slices.Contains(b.Recent, seq) }

// Remember adds delivered sequences to the recent ring.
func (b *Binding) Remember(seqs ...uint64) {
	for _, s := range seqs {
		if !b.Seen(s) {
			b.Recent = append(b.Recent, s)
		}
	}
	if n := len(b.Recent); n > RecentMax {
		b.Recent = append([]uint64(nil), b.Recent[n-RecentMax:]...)
	}
}

// Notice reports whether the notice kind moved to state since it was last
// shown, and records state.
func (b *Binding) Notice(kind, state string) bool {
	if b.Notices == nil {
		b.Notices = map[string]string{}
	}
	if b.Notices[kind] == state {
		return false
	}
	b.Notices[kind] = state
	return true
}

// Validate checks the ids of a binding read from disk: they end up in
// subjects and keys.
func (b *Binding) Validate() error {
	if b.V != Version {
		return teambus.Invalidf("binding version %d: want %d", b.V, Version)
	}
	if err := teambus.ValidateID("team", b.Team); err != nil {
		return err
	}
	if err := teambus.ValidateID("member", b.Member); err != nil {
		return err
	}
	if b.ClaudePID <= 0 {
		return teambus.Invalidf("binding: invalid claude_pid %d", b.ClaudePID)
	}
	return teambus.ValidateSession(b.Session)
}

// Dir returns the directory of this host's bindings under the state
// directory.
func Dir(stateDir string) string {
	host, err := os.Hostname()
	if err != nil || host == "" || strings.ContainsAny(host, "/\x00") {
		host = "localhost"
	}
	return filepath.Join(stateDir, "agents", host)
}

// Path returns the binding file of a Claude pid.
func Path(stateDir string, pid int) string {
	return filepath.Join(Dir(stateDir), strconv.Itoa(pid)+".json")
}

// LockPath returns the lock file of a Claude pid's binding.
func LockPath(stateDir string, pid int) string {
	return filepath.Join(Dir(stateDir), strconv.Itoa(pid)+".lock")
}

// WaitLockPath returns the lock file a waiter of a Claude pid holds.
func WaitLockPath(stateDir string, pid int) string {
	return filepath.Join(Dir(stateDir), strconv.Itoa(pid)+".wait.lock")
}

// ErrNoBinding is returned by Load when the process has no binding.
var ErrNoBinding = errors.New("no binding")

// Load reads the binding of a Claude pid. A missing file is ErrNoBinding.
func Load(stateDir string, pid int) (*Binding, error) {
	raw, err := os.ReadFile(Path(stateDir, pid))
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoBinding
	}
	if err != nil {
		return nil, fmt.Errorf("read binding of pid %d: %w", pid, err)
	}
	var b Binding
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, teambus.Invalidf("binding of pid %d is damaged: %w", pid, err)
	}
	if err := b.Validate(); err != nil {
		return nil, err
	}
	return &b, nil
}

// Save writes the binding atomically (temp file, fsync, rename), mode 0600.
func Save(stateDir string, b *Binding) error {
	b.V = Version
	dir := Dir(stateDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("binding dir: %w", err)
	}
	raw, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("encode binding: %w", err)
	}
	if err := atomicfile.Write(Path(stateDir, b.ClaudePID), raw, 0o600); err != nil {
		return fmt.Errorf("write binding of pid %d: %w", b.ClaudePID, err)
	}
	return nil
}

// Remove deletes the binding of pid and its lock files.
func Remove(stateDir string, pid int) {
	_ = os.Remove(Path(stateDir, pid))
	_ = os.Remove(LockPath(stateDir, pid))
	_ = os.Remove(WaitLockPath(stateDir, pid))
}

// All reads every binding of this host; damaged files are skipped.
func All(stateDir string) []*Binding {
	ents, err := os.ReadDir(Dir(stateDir))
	if err != nil {
		return nil
	}
	var out []*Binding
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 0 {
			continue
		}
		if b, err := Load(stateDir, pid); err == nil {
			out = append(out, b)
		}
	}
	return out
}

// Alive reports whether the binding's Claude process still runs: the pid
// exists with the recorded start time.
func (b *Binding) Alive() bool {
	st, err := StartTime(b.ClaudePID)
	return err == nil && st == b.ClaudeStart
}

// Cleanup removes the bindings of processes that are gone (pid gone or
// start time differs) and returns their pids.
func Cleanup(stateDir string) []int {
	var gone []int
	for _, b := range All(stateDir) {
		if !b.Alive() {
			Remove(stateDir, b.ClaudePID)
			gone = append(gone, b.ClaudePID)
		}
	}
	return gone
}
