package teambus

import (
	"fmt"
	"strings"
	"time"
)

// MemberState is a member's liveness at resume: online, offline or zombie,
// or its lifecycle status when it is not running.
type MemberState struct {
	ID     string       `json:"id"`
	State  string       `json:"state"`
	Status MemberStatus `json:"status"`
	Task   *string      `json:"task"`
	Epoch  int64        `json:"epoch"`
}

// Report is the summary of a resume or a probe (spec section 11).
type Report struct {
	Team        string         `json:"team"`
	Status      TeamStatus     `json:"status"`
	Decision    string         `json:"decision"`
	Warnings    []string       `json:"warnings"`
	Members     []MemberState  `json:"members"`
	Tasks       map[string]int `json:"tasks"`
	Progress    int            `json:"progress"`
	MailboxTail []Message      `json:"mailbox_tail"`
	LeadSession string         `json:"lead_session"`
	LeadEpoch   int64          `json:"lead_epoch"`
	// OldLead is the session replaced by a takeover.
	OldLead string `json:"old_lead,omitempty"`
	// LeadTimeoutDetectedAt is when teammates saw the old lead gone.
	LeadTimeoutDetectedAt *time.Time `json:"lead_timeout_detected_at"`
	// Why (probe) says what a `team resume` by a new session meets now:
	// why it succeeds, or what refuses it and how to get past that.
	Why string `json:"why,omitempty"`
	// ResumableAt (probe, decision "wait") is when a new session may take
	// over without force.
	ResumableAt *time.Time `json:"resumable_at,omitempty"`
	Took        string     `json:"took"`
}

// CrashResult says what a crash report did.
type CrashResult struct {
	// Counted is false when this incarnation's crash was recorded before,
	// or the incarnation was already replaced: nothing changed.
	Counted bool
	// Paused is true when the crash limit was passed: the member and its
	// task are paused and an escalation is due.
	Paused bool
	// Tasks are the tasks that went back to the queue (or were paused).
	Tasks []string
	// Crashes is the member's crash count after this crash.
	Crashes int
}

// CrashNotice is the message the lead gets when member crashed: what
// happened to its task and what to do, from either sidecar that saw it.
func CrashNotice(teamID, member, reason string, res CrashResult) string {
	tasks := strings.Join(res.Tasks, ", ")
	if tasks == "" {
		tasks = "none"
	}
	if res.Paused {
		return fmt.Sprintf("%s crashed (%s), crash %d: past the crash limit, task %s and the member are paused; decide with `teambus task reassign` or `teambus task reopen`", member, reason, res.Crashes, tasks)
	}
	return fmt.Sprintf("%s crashed (%s), crash %d: task %s back in the queue with its checkpoint; respawn it with `teambus brief --team %s --member %s`", member, reason, res.Crashes, tasks, teamID, member)
}
