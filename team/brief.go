package team

import (
	"context"
	"fmt"
	"strings"

	"github.com/teambus/teambus"
)

// Brief is the prompt that lets a fresh agent replace a dead member without
// redoing completed work.
type Brief struct {
	Team       string            `json:"team"`
	Member     string            `json:"member"`
	Role       string            `json:"role"`
	Task       *teambus.Task     `json:"task"`
	Deps       []*teambus.Task   `json:"dependencies"`
	RecentMail []teambus.Message `json:"recent_mail"`
	Text       string            `json:"text"`
	// Requeued says the task is the member's last claim, back in the
	// queue without a checkpoint.
	Requeued bool `json:"requeued,omitempty"`
}

// Brief builds the respawn prompt for member: its role, the task it held
// (or the task it will pick up: its last one, requeued), the dependencies,
// the checkpoint, and its recent mail.
func (s *Service) Brief(ctx context.Context, teamID, member string, mailN int) (*Brief, error) {
	if err := teambus.ValidateMemberID(member); err != nil {
		return nil, err
	}
	snap, m, err := s.memberSnapshot(ctx, teamID, member)
	if err != nil {
		return nil, err
	}
	b := &Brief{Team: teamID, Member: member, Role: m.Role, Deps: []*teambus.Task{}, RecentMail: []teambus.Message{}}
	// The task: the one it holds, else the last one it had (requeued after a
	// crash, with its checkpoint).
	if ts := snap.MemberTasks(member); len(ts) > 0 {
		b.Task = ts[0]
	} else {
		for _, id := range snap.TaskIDs() {
			t := snap.Tasks[id]
			if t.Checkpoint != nil && t.Checkpoint.Member == member && !t.Done() {
				if b.Task == nil || t.Checkpoint.At.After(b.Task.Checkpoint.At) {
					b.Task = t
				}
			}
		}
		// Without a checkpoint: the task of its latest claim, if a crash
		// put it back in the queue and nobody finished it.
		if t, ok := snap.Tasks[m.ClaimTask]; b.Task == nil && m.ClaimTask != "" && ok && !t.Done() && t.AssignedTo == "" {
			b.Task, b.Requeued = t, true
		}
	}
	if b.Task != nil {
		for _, d := range b.Task.Dependencies {
			if t, ok := snap.Tasks[d]; ok {
				b.Deps = append(b.Deps, t)
			}
		}
	}
	if mailN <= 0 {
		mailN = 10
	}
	tail, err := s.teamMailbox(snap.Team).Tail(ctx, 200)
	if err == nil {
		for _, msg := range tail {
			if msg.To == member || msg.From == member || msg.To == teambus.All {
				b.RecentMail = append(b.RecentMail, msg)
			}
		}
		if len(b.RecentMail) > mailN {
			b.RecentMail = b.RecentMail[len(b.RecentMail)-mailN:]
		}
		// The mail goes in the answer twice (as messages and in the text):
		// the newest that fit a quarter of an answer, at least one.
		used, keep := 0, len(b.RecentMail)
		for i := len(b.RecentMail) - 1; i >= 0; i-- {
			used += 2 * messageJSONLen(b.RecentMail[i])
			if used > s.cfg.MaxReply/4 && i < len(b.RecentMail)-1 {
				break
			}
			keep = i
		}
		b.RecentMail = b.RecentMail[keep:]
	}
	b.Text = b.render()
	return b, nil
}

func (b *Brief) render() string {
	var w strings.Builder
	fmt.Fprintf(&w, "You are %s", b.Member)
	if b.Role != "" {
		fmt.Fprintf(&w, " (%s)", b.Role)
	}
	fmt.Fprintf(&w, " in team %s, replacing an earlier session of %s that stopped.\n", b.Team, b.Member)
	fmt.Fprintf(&w, "Set TEAMBUS_TEAM=%s TEAMBUS_MEMBER=%s and your own TEAMBUS_SESSION; start `teambus teammate` beside you.\n\n", b.Team, b.Member)
	b.body(&w)
	return w.String()
}

// HookText is the brief of a session bound by a SessionStart hook
// (agent-wiring §12.3.6): its sidecar already runs, so it never asks the
// agent to start one, and only a later incarnation (epoch > 1) is told it
// replaces an earlier session.
func (b *Brief) HookText(epoch int64) string {
	var w strings.Builder
	fmt.Fprintf(&w, "You are %s", b.Member)
	if b.Role != "" {
		fmt.Fprintf(&w, " (%s)", b.Role)
	}
	fmt.Fprintf(&w, " in team %s, incarnation %d; your teambus sidecar runs beside this session.\n", b.Team, epoch)
	if epoch > 1 {
		fmt.Fprintf(&w, "An earlier session of %s stopped; this one continues its work.\n", b.Member)
	}
	w.WriteString("\n")
	b.body(&w)
	return w.String()
}

func (b *Brief) body(w *strings.Builder) {
	if b.Task == nil {
		w.WriteString("You hold no task. Take the next one with `teambus task next`.\n")
	} else {
		t := b.Task
		fmt.Fprintf(w, "TASK %s (%s): %s\n", t.ID, t.Status, teambus.IndentBody(t.Description, bodyIndent))
		switch {
		case b.Requeued:
			fmt.Fprintf(w, "It was yours when the earlier session stopped and went back to the queue; teambus gives it back to a respawned session when it registers. If `teambus task show %s` does not show it assigned to you, claim it with `teambus task claim %s`.\n", t.ID, t.ID)
		case t.Status != teambus.TaskInProgress:
			fmt.Fprintf(w, "Claim it with `teambus task claim %s`.\n", t.ID)
		}
		if len(b.Deps) > 0 {
			w.WriteString("Dependencies:\n")
			for _, d := range b.Deps {
				fmt.Fprintf(w, "  - %s (%s): %s\n", d.ID, d.Status, teambus.IndentBody(d.Description, bodyIndent))
			}
		}
		if cp := t.Checkpoint; cp != nil {
			fmt.Fprintf(w, "\nCHECKPOINT RESUME (checkpoint #%d, %s) — DO NOT re-execute completed work.\n", cp.Seq, cp.At.Format("2006-01-02T15:04:05Z"))
			fmt.Fprintf(w, "Tasks already completed: %s\n", list(cp.TasksCompleted))
			fmt.Fprintf(w, "Tasks remaining: %s\n", list(cp.TasksRemaining))
			fmt.Fprintf(w, "Last action: %s\n", teambus.IndentBody(orNone(cp.LastAction), bodyIndent))
			fmt.Fprintf(w, "Files touched: %s\n", list(cp.Files))
			if len(cp.Data) > 0 {
				fmt.Fprintf(w, "Data: %s\n", teambus.IndentBody(string(cp.Data), bodyIndent))
			}
			w.WriteString("Continue from the remaining tasks only.\n")
		} else {
			w.WriteString("\nNo checkpoint was recorded: check the working tree before starting over.\n")
		}
		if t.LastError != "" {
			fmt.Fprintf(w, "Why it stopped: %s\n", teambus.IndentBody(t.LastError, bodyIndent))
		}
	}
	if len(b.RecentMail) > 0 {
		w.WriteString("\nRecent mail:\n")
		for _, m := range b.RecentMail {
			fmt.Fprintf(w, "  #%d %s -> %s [%s] %s\n", m.Seq, m.From, m.To, m.Type, oneLine(m.Body))
		}
	}
	w.WriteString("\nRecord progress with `teambus checkpoint --done ... --remaining ... --last-action ...`; finish with `teambus task complete ID`.\n")
}

func list(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return teambus.SanitizeLine(strings.Join(s, "; "))
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// bodyIndent starts every further line of member text in a text view, so
// none can pass for a line of the view itself.
const bodyIndent = "    "

// oneLine flattens member text to one sanitized line of at most 160 runes.
func oneLine(s string) string {
	s = teambus.SanitizeLine(strings.Join(strings.Fields(s), " "))
	if r := []rune(s); len(r) > 160 {
		return string(r[:159]) + "…"
	}
	return s
}
