package team

import (
	"context"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/kv"
)

// MemberView is a member as `team show` prints it (spec section 11).
type MemberView struct {
	ID            string               `json:"id"`
	Name          string               `json:"name,omitempty"`
	Role          string               `json:"role"`
	Quantum       string               `json:"quantum,omitempty"`
	Status        teambus.MemberStatus `json:"status"`
	Epoch         int64                `json:"epoch"`
	Session       string               `json:"session"`
	Task          *string              `json:"task"`
	CrashCount    int                  `json:"crash_count"`
	ContextPct    int                  `json:"context_pct"`
	Online        bool                 `json:"online"`
	LastHeartbeat *time.Time           `json:"last_heartbeat"`
	LastActivity  *time.Time           `json:"last_activity"`
	ZombieSince   *time.Time           `json:"zombie_since"`
}

// View is a whole team as `team show --json` prints it.
type View struct {
	Team    *teambus.Team   `json:"team"`
	Members []MemberView    `json:"members"`
	Tasks   []*teambus.Task `json:"tasks"`
	Counts  map[string]int  `json:"counts"`
	Lead    *LeadView       `json:"lead"`
	// Damaged are the state records that do not decode (kv.DamagedRecord):
	// left out of members and tasks; `teambus team repair` fixes them.
	Damaged []kv.DamagedRecord `json:"damaged"`
	snap    *kv.Snapshot
}

// LeadView is the lead's liveness.
type LeadView struct {
	Session string `json:"session"`
	Epoch   int64  `json:"epoch"`
	// Online: the lead's heartbeat of this epoch is fresh.
	Online bool `json:"online"`
	// LastHeartbeat is when the lead was last seen alive: its heartbeat
	// while the key lives, else the last beat it recorded in the team
	// (the key is deleted at a clean stop and expires after a crash).
	LastHeartbeat *time.Time `json:"last_heartbeat"`
	// ReleasedAt is when the lead released the team (Released says why):
	// its sidecar stopped cleanly or its agent exited.
	ReleasedAt *time.Time `json:"released_at,omitempty"`
	Released   string     `json:"released,omitempty"`
}

// Snapshot returns the records the view was built from.
func (v *View) Snapshot() *kv.Snapshot { return v.snap }

// Show reads the whole team with liveness from heartbeats.
func (s *Service) Show(ctx context.Context, team string) (*View, error) {
	snap, err := s.store.Snapshot(ctx, team)
	if err != nil {
		return nil, err
	}
	hbs, err := s.store.Heartbeats(ctx, team)
	if err != nil {
		return nil, err
	}
	return BuildView(snap, hbs, s.Now()), nil
}

// BuildView assembles the view from a snapshot and heartbeats. A member is
// online when its heartbeat key exists and is younger than member-timeout
// (keys expire on the server; the age check covers the moments after a
// restart, before expiry runs).
func BuildView(snap *kv.Snapshot, hbs map[string]kv.HeartbeatEntry, now time.Time) *View {
	return buildView(snap, hbs, now, true)
}

// buildView is BuildView; without tasks it leaves out the sorted task
// list, which a resume report does not show.
func buildView(snap *kv.Snapshot, hbs map[string]kv.HeartbeatEntry, now time.Time, tasks bool) *View {
	v := &View{Team: snap.Team, Counts: map[string]int{}, Damaged: snap.Damaged, snap: snap}
	if v.Damaged == nil {
		v.Damaged = []kv.DamagedRecord{}
	}
	pol := snap.Team.Policy
	// One pass over the tasks for all members, not one per member: a team
	// of 1,000 members and 10,000 tasks.
	active := snap.ActiveTasks()
	for _, id := range snap.MemberIDs() {
		m := snap.Members[id]
		mv := MemberView{
			ID: m.ID, Name: m.Name, Role: m.Role, Quantum: m.Quantum, Status: snap.WorkStatusOf(id, active[id]),
			Epoch: m.Epoch, Session: m.Session, CrashCount: m.CrashCount, ContextPct: m.ContextPct, ZombieSince: m.ZombieSince,
		}
		if ts := active[id]; len(ts) > 0 {
			mv.Task = &ts[0].ID
		}
		if hb, ok := hbs[kv.MemberKey(id)]; ok && hb.Epoch == m.Epoch {
			mv.LastHeartbeat = teambus.TimePtr(hb.Created)
			mv.Online = now.Sub(hb.Created) < pol.MemberTimeout
			if hb.ContextPct > 0 {
				mv.ContextPct = hb.ContextPct
			}
		}
		if at, ok := snap.Activity[id]; ok {
			mv.LastActivity = teambus.TimePtr(at)
		}
		if !mv.Online && (mv.Status == teambus.MemberIdle || mv.Status == teambus.MemberInProgress || mv.Status == teambus.MemberBlocked) && m.Session != "" {
			mv.Status = teambus.MemberOffline
		}
		v.Members = append(v.Members, mv)
	}
	if tasks {
		for _, id := range snap.TaskIDs() {
			v.Tasks = append(v.Tasks, snap.Tasks[id])
		}
	}
	if v.Tasks == nil {
		v.Tasks = []*teambus.Task{}
	}
	if v.Members == nil {
		v.Members = []MemberView{}
	}
	for st, n := range teambus.CountByStatus(snap.Tasks) {
		v.Counts[string(st)] = n
	}
	t := snap.Team
	lv := &LeadView{Session: t.LeadSession, Epoch: t.LeadEpoch, ReleasedAt: t.LeadReleasedAt, Released: t.LeadReleased}
	if hb, ok := hbs[kv.LeadKey]; ok && hb.Session == t.LeadSession && hb.Epoch == t.LeadEpoch {
		lv.LastHeartbeat = teambus.TimePtr(hb.Created)
		lv.Online = t.LeadReleasedAt == nil && hb.Status != teambus.MemberOffline && now.Sub(hb.Created) < pol.LeadTimeout
	}
	if t.LeadSession != "" && t.LeadLastSeen != nil && (lv.LastHeartbeat == nil || t.LeadLastSeen.After(*lv.LastHeartbeat)) {
		lv.LastHeartbeat = teambus.TimePtr(*t.LeadLastSeen)
	}
	v.Lead = lv
	return v
}
