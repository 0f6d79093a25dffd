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
	Took                  string     `json:"took"`
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
	// Respawn is the team's respawn policy: who restarts the member.
	Respawn RespawnPolicy
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
	head := fmt.Sprintf("%s crashed (%s), crash %d: task %s back in the queue with its checkpoint; ", member, reason, res.Crashes, tasks)
	switch res.Respawn {
	case RespawnAuto:
		return head + fmt.Sprintf("a teambus host restarts it now (respawn=auto), resuming its conversation when its transcript was synced; `teambus team show %s` shows where (with no host running: `teambus spawn --team %s --member %s`)", teamID, teamID, member)
	case RespawnOff:
		return head + fmt.Sprintf("nothing restarts it (respawn=off); `teambus brief --team %s --member %s` is the prompt for a replacement", teamID, member)
	}
	return head + fmt.Sprintf("restart it with `teambus spawn --team %s --member %s` (MCP: member_spawn): it resumes its conversation when its transcript was synced, else starts from `teambus brief --team %s --member %s`", teamID, member, teamID, member)
}
