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
	// Checkpointed are those of Tasks that have a checkpoint to resume
	// from; the others start over.
	Checkpointed []string
	// Crashes is the member's crash count after this crash.
	Crashes int
	// Respawn is the team's respawn policy: who restarts the member.
	Respawn RespawnPolicy
}

// CrashNotice is the message the lead gets when member crashed: what
// happened to its task and what to do, from either sidecar that saw it.
// It says "with its checkpoint" only of a task that has one.
func CrashNotice(teamID, member, reason string, res CrashResult) string {
	if res.Paused {
		what := "the member is paused"
		if len(res.Tasks) > 0 {
			what = "task " + strings.Join(res.Tasks, ", ") + " and the member are paused"
		}
		return fmt.Sprintf("%s crashed (%s), crash %d: past the crash limit, %s; decide with `teambus task reassign` or `teambus task reopen`", member, reason, res.Crashes, what)
	}
	head := fmt.Sprintf("%s crashed (%s), crash %d: %s; ", member, reason, res.Crashes, Requeued(res.Tasks, res.Checkpointed))
	switch res.Respawn {
	case RespawnAuto:
		return head + fmt.Sprintf("a teambus host restarts it now (respawn=auto), resuming its conversation when its transcript was synced; `teambus team show %s` shows where (with no host running: `teambus spawn --team %s --member %s`)", teamID, teamID, member)
	case RespawnOff:
		return head + fmt.Sprintf("nothing restarts it (respawn=off); `teambus brief --team %s --member %s` is the prompt for a replacement", teamID, member)
	}
	return head + fmt.Sprintf("restart it with `teambus spawn --team %s --member %s` (MCP: member_spawn): it resumes its conversation when its transcript was synced, else starts from `teambus brief --team %s --member %s`", teamID, member, teamID, member)
}

// Requeued says that tasks went back to the queue, and with or without a
// checkpoint: checkpointed are those of tasks that have one.
func Requeued(tasks, checkpointed []string) string {
	has := map[string]bool{}
	for _, id := range checkpointed {
		has[id] = true
	}
	var with, without []string
	for _, id := range tasks {
		if has[id] {
			with = append(with, id)
		} else {
			without = append(without, id)
		}
	}
	switch {
	case len(tasks) == 0:
		return "it held no task"
	case len(tasks) == 1 && len(with) == 1:
		return "task " + with[0] + " back in the queue with its checkpoint"
	case len(tasks) == 1:
		return "task " + without[0] + " back in the queue, without a checkpoint: it starts over"
	case len(without) == 0:
		return "tasks " + strings.Join(with, ", ") + " back in the queue with their checkpoints"
	case len(with) == 0:
		return "tasks " + strings.Join(without, ", ") + " back in the queue, without checkpoints: they start over"
	}
	return fmt.Sprintf("tasks %s back in the queue; %s with a checkpoint, %s without one (starts over)",
		strings.Join(tasks, ", "), strings.Join(with, ", "), strings.Join(without, ", "))
}
