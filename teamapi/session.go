package teamapi

import (
	"encoding/json"

	"github.com/teambus/teambus"
)

// Verbs a session's hooks use besides the mail and task verbs: its own
// records at once, an event of its own in the team's log, and, for the
// lead, the resume and probe of its team.
const (
	VerbStatus = "status"
	VerbEvent  = "event"
	VerbResume = "resume"
	VerbProbe  = "probe"
	VerbEvents = "events"
)

// StatusRequest reads the caller's records in one request: its team, its
// member record (none for the lead), with Held the tasks assigned to it
// and, when
// Task is set, that task. Touch records the member's activity and
// Condition sets (or, with "", clears) its liveness condition; both only
// while the caller's session is the member's current incarnation.
type StatusRequest struct {
	Actor
	Task      string  `json:"task,omitempty"`
	Held      bool    `json:"held,omitempty"`
	Touch     bool    `json:"touch,omitempty"`
	Condition *string `json:"condition,omitempty"`
}

// StatusReply is the caller's records. Member is nil for the lead;
// Held are the tasks assigned to the member, in progress first.
type StatusReply struct {
	Team   *teambus.Team   `json:"team"`
	Member *teambus.Member `json:"member,omitempty"`
	Held   []*teambus.Task `json:"held"`
	Task   *teambus.Task   `json:"task,omitempty"`
}

// MaxEventData caps the data of one event a session logs.
const MaxEventData = 4096

// EventRequest logs an event of the caller in its team's event log: the
// agent is the caller, the type one of SessionEventTypes.
type EventRequest struct {
	Actor
	Type string          `json:"type"`
	Data json.RawMessage `json:"data,omitempty"`
}

// EventReply is empty: the event was logged.
type EventReply struct{}

// SessionEventTypes are the event types a member's session may log of
// itself; the lead's session also logs LeadEventTypes.
var SessionEventTypes = []string{"mail.delivered", "transcript.synced", "transcript.restored"}

// LeadEventTypes are the events of Claude Code's own agent teams the
// lead's hooks record.
var LeadEventTypes = []string{"claude.teammate_idle", "claude.task_created", "claude.task_completed"}

// ResumeRequest attaches the caller's session as the team's lead (the
// lead's credential or the operator only). Force takes the team over from
// a lead that still holds it.
type ResumeRequest struct {
	Actor
	Force bool `json:"force,omitempty"`
	// AsLead is a lead session attaching (the SessionStart of the lead's
	// session): it may be the first lead of a team that never had one,
	// which a `team resume` may not.
	AsLead bool `json:"as_lead,omitempty"`
}

// ProbeRequest asks what a resume would find, changing nothing (the
// lead's credential or the operator only).
type ProbeRequest struct {
	Actor
}

// EventsMax caps the events of one EventsReply; EventsMaxBytes their
// bytes.
const (
	EventsMax      = 1000
	EventsMaxBytes = 256 << 10
)

// EventsRequest reads a page of the team's event log, from SinceSeq on
// (the lead's credential and the operator only); Type, when set, only
// events of that type.
type EventsRequest struct {
	Actor
	SinceSeq uint64 `json:"since_seq,omitempty"`
	Limit    int    `json:"limit,omitempty"`
	Type     string `json:"type,omitempty"`
}

// EventsReply is one page: each event exactly as stored, and where the
// next page starts (0 when this page reached the end).
type EventsReply struct {
	Events []json.RawMessage `json:"events"`
	Next   uint64            `json:"next,omitempty"`
}
