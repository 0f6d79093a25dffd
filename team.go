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
	LeadAttachedAt *time.Time `json:"lead_attached_at,omitempty"`
	// LeadReleasedAt is when the lead of LeadEpoch released the team: its
	// sidecar stopped cleanly or saw its agent process exit. A released
	// lead is not live, and any lead session may resume the team at once.
	// Every attach clears it.
	LeadReleasedAt *time.Time `json:"lead_released_at,omitempty"`
	// LeadReleased says why: LeadStopped or LeadAgentExited.
	LeadReleased          string            `json:"lead_released,omitempty"`
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

// Why a lead released its team (Team.LeadReleased).
const (
	LeadStopped     = "stopped"      // its sidecar stopped cleanly
	LeadAgentExited = "agent_exited" // its sidecar saw the agent process exit
)

// ReleaseLead records that the lead of epoch (session) released the team
// at now, for why. It reports whether it changed t: not when another lead
// attached since, nor when the release is recorded already. Run it in a
// compare-and-set update.
func (t *Team) ReleaseLead(session string, epoch int64, now time.Time, why string) bool {
	if t.LeadSession != session || t.LeadEpoch != epoch || t.LeadReleasedAt != nil {
		return false
	}
	t.LeadReleasedAt, t.LeadReleased = TimePtr(now), why
	return true
}

// ReleaseWords says in words why a lead released its team.
func ReleaseWords(why string) string {
	switch why {
	case LeadAgentExited:
		return "its agent process exited"
	case LeadStopped:
		return "its sidecar stopped cleanly"
	case "":
		return "no reason recorded"
	}
	return why
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
