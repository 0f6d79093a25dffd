package teambus

import "time"

// MemberStatus is the status of a teammate.
type MemberStatus string

// Member statuses of the specification, section 5.
const (
	MemberSpawned    MemberStatus = "spawned"
	MemberIdle       MemberStatus = "idle"
	MemberInProgress MemberStatus = "in_progress"
	MemberBlocked    MemberStatus = "blocked"
	MemberComplete   MemberStatus = "complete"
	MemberZombie     MemberStatus = "zombie"
	MemberOffline    MemberStatus = "offline"
	MemberCrashed    MemberStatus = "crashed"
	MemberPaused     MemberStatus = "paused"
	MemberShutdown   MemberStatus = "shutdown"
)

// Member is a teammate record. Its working status (idle, in_progress,
// blocked) is derived from the tasks assigned to it; the stored status
// carries the lifecycle states the sidecars set.
type Member struct {
	ID              string       `json:"id"`
	Name            string       `json:"name,omitempty"`
	Role            string       `json:"role,omitempty"`
	Quantum         string       `json:"quantum,omitempty"`
	Status          MemberStatus `json:"status"`
	Epoch           int64        `json:"epoch"`
	Session         string       `json:"session"`
	ContextPct      int          `json:"context_pct"`
	CrashCount      int          `json:"crash_count"`
	CrashedEpoch    int64        `json:"crashed_epoch,omitempty"`
	EscalatePending bool         `json:"escalate_pending,omitempty"`
	ZombieSince     *time.Time   `json:"zombie_since"`
	// ClaimTask is the task of the member's latest claim: a claim writes it
	// (compare-and-set) before it writes the task, so two claims of one
	// member are ordered by this record and at most one task is active per
	// member (issue 12 item 6).
	ClaimTask string `json:"claim_task,omitempty"`
	// HeldSince is set while mail the member sent in zombie mode waits for
	// release: set (compare-and-set) before the first held message is
	// stored, cleared after the release delivered it.
	HeldSince *time.Time `json:"held_since,omitempty"`
	// Marker is the mailbox seq of this incarnation's marker
	// (mailbox.Mailbox.MarkIncarnation): a member's send expects it.
	Marker uint64 `json:"marker,omitempty"`
	// Condition is why a live member is not working, as its agent session
	// reported it (hooks, agent-wiring §12.3.14): "approval" (waiting for a
	// permission prompt), "input", "idle", or the API error that stopped
	// its turn ("rate_limit", "overloaded", …). Empty when working.
	Condition   string     `json:"condition,omitempty"`
	ConditionAt *time.Time `json:"condition_at,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
}

// Fenced reports why a command from session may not act as this member, or
// nil when it may. A member without a registered session accepts any
// session; once a sidecar (or join) registered one, only it is accepted.
func (m *Member) Fenced(session string) error {
	switch m.Status {
	case MemberCrashed:
		return Fencedf("member %s (epoch %d) was declared crashed: its task went back to the queue; a new incarnation must register (teambus teammate or teambus join)", m.ID, m.Epoch)
	case MemberPaused:
		return Fencedf("member %s is paused after repeated crashes: ask the lead", m.ID)
	case MemberShutdown:
		return Fencedf("member %s has shut down: a new incarnation must register", m.ID)
	}
	if m.Session != "" && session == "" {
		return Invalidf("missing --session (TEAMBUS_SESSION): member %s has a registered incarnation (epoch %d); give its session id", m.ID, m.Epoch)
	}
	if m.Session != "" && session != m.Session {
		return Fencedf("session %q is not the current session of member %s (epoch %d): this incarnation was replaced", clip(session), m.ID, m.Epoch)
	}
	return nil
}

// Register starts a new incarnation of the member: epoch up, new session,
// status spawned. It clears the lifecycle states of the old incarnation.
func (m *Member) Register(session string, now time.Time) {
	m.Epoch++
	m.Session = session
	m.Status = MemberSpawned
	m.ZombieSince = nil
	m.UpdatedAt = now.UTC()
}
