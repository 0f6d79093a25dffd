package teambus

import "time"

// TeamStatus is the lifecycle of a team.
type TeamStatus string

// Team statuses: pending → active → consolidating → complete, or aborted.
const (
	TeamPending       TeamStatus = "pending"
	TeamActive        TeamStatus = "active"
	TeamConsolidating TeamStatus = "consolidating"
	TeamComplete      TeamStatus = "complete"
	TeamAborted       TeamStatus = "aborted"
)

// Team is the team record. Members and tasks are records of their own.
type Team struct {
	ID           string     `json:"id"`
	Status       TeamStatus `json:"status"`
	CreatedAt    time.Time  `json:"created_at"`
	LeadSession  string     `json:"lead_session"`
	LeadEpoch    int64      `json:"lead_epoch"`
	LeadLastSeen *time.Time `json:"lead_last_seen"`
	// LeadAttachedAt is when the lead of LeadEpoch attached; while
	// LeadLastSeen still equals it, that lead has not beaten yet.
	LeadAttachedAt        *time.Time        `json:"lead_attached_at,omitempty"`
	LeadTimeoutDetectedAt *time.Time        `json:"lead_timeout_detected_at"`
	Policy                Policy            `json:"policy"`
	Facts                 map[string]string `json:"facts,omitempty"`
	CheckpointSeq         int64             `json:"checkpoint_seq"`
	WorkTree              string            `json:"worktree,omitempty"`
	MaxBody               int               `json:"max_body"`
	// Probes are the status checks the lead has in flight, by member, so a
	// new lead continues them.
	Probes    map[string]Probe `json:"probes,omitempty"`
	UpdatedAt time.Time        `json:"updated_at"`
}

// Closed reports whether the team accepts no more work.
func (t *Team) Closed() bool {
	return t.Status == TeamComplete || t.Status == TeamAborted
}

// TimePtr returns a pointer to t in UTC, for the optional time fields.
func TimePtr(t time.Time) *time.Time {
	u := t.UTC()
	return &u
}

// Probe is a status check the lead sent to a member incarnation.
type Probe struct {
	Epoch  int64     `json:"epoch"`
	SentAt time.Time `json:"sent_at"`
	Reason string    `json:"reason"`
}
