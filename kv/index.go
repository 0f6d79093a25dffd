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
