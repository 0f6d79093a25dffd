package kv

import (
	"sort"

	"github.com/teambus/teambus"
)

// ActiveTasks returns the active tasks of every member that has some, each
// list sorted by id: MemberTasks of all members in one pass over the
// tasks. A view of a large team asks for every member's tasks; calling
// MemberTasks per member walks all tasks once per member.
func (s *Snapshot) ActiveTasks() map[string][]*teambus.Task {
	out := map[string][]*teambus.Task{}
	for _, t := range s.Tasks {
		if t.Active() {
			out[t.AssignedTo] = append(out[t.AssignedTo], t)
		}
	}
	for _, ts := range out {
		sort.Slice(ts, func(i, j int) bool { return ts[i].ID < ts[j].ID })
	}
	return out
}

// WorkStatusOf is WorkStatus for a member whose active tasks are known
// already (from ActiveTasks).
func (s *Snapshot) WorkStatusOf(member string, active []*teambus.Task) teambus.MemberStatus {
	return workStatus(s.Members[member], func() []*teambus.Task { return active })
}

// workStatus derives a member's status as users see it: the stored
// lifecycle status, or for a working member the status its active tasks
// give. tasks is only called for a working member.
func workStatus(m *teambus.Member, tasks func() []*teambus.Task) teambus.MemberStatus {
	if m == nil {
		return ""
	}
	switch m.Status {
	case teambus.MemberSpawned, teambus.MemberIdle, teambus.MemberInProgress, teambus.MemberBlocked, teambus.MemberComplete:
	default:
		return m.Status
	}
	active := tasks()
	for _, t := range active {
		if t.Status == teambus.TaskInProgress {
			return teambus.MemberInProgress
		}
	}
	if len(active) > 0 {
		return teambus.MemberBlocked
	}
	if m.Status == teambus.MemberSpawned {
		return teambus.MemberSpawned
	}
	return teambus.MemberIdle
}
