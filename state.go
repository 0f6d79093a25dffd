package teambus

import (
	"sort"
	"time"
)

// State is a team's records read at one moment: the team, its members, its
// tasks and each member's last activity. kv.Snapshot embeds it.
type State struct {
	Team     *Team
	Members  map[string]*Member
	Tasks    map[string]*Task
	Activity map[string]time.Time
}

// MemberIDs returns the member ids sorted.
func (s *State) MemberIDs() []string {
	ids := make([]string, 0, len(s.Members))
	for id := range s.Members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// MemberTasks returns the active tasks assigned to member, sorted by id.
func (s *State) MemberTasks(member string) []*Task {
	var out []*Task
	for _, t := range s.Tasks {
		if t.Active() && t.AssignedTo == member {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// WorkStatus is the member's status as users see it: the stored lifecycle
// status, or for a working member the status derived from its tasks.
func (s *State) WorkStatus(member string) MemberStatus {
	return workStatus(s.Members[member], func() []*Task { return s.MemberTasks(member) })
}

// WorkStatusOf is WorkStatus for a member whose active tasks are known
// already.
func (s *State) WorkStatusOf(member string, active []*Task) MemberStatus {
	return workStatus(s.Members[member], func() []*Task { return active })
}

// workStatus derives a member's status as users see it: the stored
// lifecycle status, or for a working member the status its active tasks
// give. tasks is only called for a working member.
func workStatus(m *Member, tasks func() []*Task) MemberStatus {
	if m == nil {
		return ""
	}
	switch m.Status {
	case MemberSpawned, MemberIdle, MemberInProgress, MemberBlocked, MemberComplete:
	default:
		return m.Status
	}
	active := tasks()
	for _, t := range active {
		if t.Status == TaskInProgress {
			return MemberInProgress
		}
	}
	if len(active) > 0 {
		return MemberBlocked
	}
	if m.Status == MemberSpawned {
		return MemberSpawned
	}
	return MemberIdle
}

// StateChange is one change seen by a watch of a team's state: the team
// record, or the record of the watched member. Exactly one is set.
type StateChange struct {
	Team   *Team
	Member *Member
}
