package mcpserver

import (
	"fmt"
	"strings"

	"github.com/teambus/teambus"
)

// Text from a member is data, never structure: control characters are
// stripped and bodies are indented in the text views.

// cleanLine returns s on one line without control characters.
func cleanLine(s string) string { return teambus.StripLine(s) }

// cleanBody returns s without control characters other than newlines and
// tabs, every line indented by indent.
func cleanBody(s, indent string) string {
	var w strings.Builder
	w.Grow(len(s) + len(indent)*(1+strings.Count(s, "\n")))
	writeBody(&w, s, indent)
	return w.String()
}

// writeBody writes cleanBody(s, indent) to w.
func writeBody(w *strings.Builder, s, indent string) {
	s = teambus.Strip(s)
	s = strings.TrimRight(s, "\n")
	w.WriteString(indent)
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			w.WriteString(s)
			return
		}
		w.WriteString(s[:i+1])
		w.WriteString(indent)
		s = s[i+1:]
	}
}

// teamStatusText is team_status's text: the team, then one line per
// member saying each thing once (its status, its liveness when that adds
// something, epoch, task), then the tasks and whether the lead is online.
func teamStatusText(out TeamStatusOut, tasks int) string {
	var w strings.Builder
	fmt.Fprintf(&w, "team %s: %s", out.Team, out.Status)
	for _, m := range out.Members {
		state := m.Status
		switch {
		case m.Condition == "offline" && m.Status == "offline":
			state = "offline (no heartbeat)"
		case m.Condition != m.Status && m.Condition != "":
			state += ", " + m.Condition
		}
		task := "no task"
		if m.Task != "" {
			task = "task " + m.Task
		}
		fmt.Fprintf(&w, "\n%s: %s, epoch %d, %s", m.ID, state, m.Epoch, task)
	}
	lead := "offline"
	if out.LeadOnline {
		lead = "online"
	}
	fmt.Fprintf(&w, "\ntasks %d, %d%% done; lead %s", tasks, out.Progress, lead)
	return w.String()
}

// reportText is team_resume's and team_probe's text: each member's state
// said once (its liveness, and its status when that adds something).
func reportText(r ReportOut) string {
	var w strings.Builder
	fmt.Fprintf(&w, "team %s: %s, decision %s, %d%% done, lead %s epoch %d", r.Team, r.Status, r.Decision, r.Progress, orDash(r.LeadSession), r.LeadEpoch)
	if r.Why != "" {
		w.WriteString("\nresume by a new lead session: " + cleanLine(r.Why))
	}
	for _, s := range r.Warnings {
		w.WriteString("\nwarning: " + cleanLine(s))
	}
	for _, m := range r.Members {
		state := m.State
		if m.Status != "" && m.Status != m.State {
			state += " (" + m.Status + ")"
		}
		task := "no task"
		if m.Task != "" {
			task = "task " + m.Task
		}
		fmt.Fprintf(&w, "\n%s: %s, epoch %d, %s", m.ID, state, m.Epoch, task)
	}
	return w.String()
}
