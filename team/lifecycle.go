package team

import (
	"context"
	"fmt"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/kv"
)

// Join registers a new incarnation of a member: epoch up, the new session
// becomes the only one accepted, the old incarnation is fenced. The
// member's tasks stay assigned to it; a crashed member's were requeued.
func (s *Service) Join(ctx context.Context, team, member, session string) (*teambus.Member, error) {
	if err := teambus.ValidateMemberID(member); err != nil {
		return nil, err
	}
	if err := teambus.ValidateSession(session); err != nil {
		return nil, err
	}
	var out *teambus.Member
	err := kv.Retry(ctx, func() error {
		snap, err := s.store.Snapshot(ctx, team)
		if err != nil {
			return err
		}
		if snap.Team.Closed() {
			return teambus.Statef("team %s is %s: nothing to join", team, snap.Team.Status)
		}
		m, err := snap.Member(member)
		if err != nil {
			return err
		}
		if m.Status == teambus.MemberPaused {
			return teambus.Statef("member %s is paused after repeated crashes: the lead must decide (task reassign, or team abort)", member)
		}
		m.Register(session, s.Now())
		if _, err := s.store.PutMember(ctx, team, m, snap.MemberRev[member]); err != nil {
			return err
		}
		out = m
		return nil
	})
	if err == nil {
		err = s.markIncarnation(ctx, team, out)
	}
	if err == nil {
		_ = s.store.Touch(ctx, team, member) // advisory: a lost activity stamp makes the lead probe a little early
		s.LogEvent(ctx, team, eventlog.EvAgentSpawned, member, map[string]any{"name": member, "epoch": out.Epoch, "session": session, "role": out.Role})
	}
	return out, err
}

// markIncarnation fences the mail of m's earlier incarnations, which m's
// record now refuses: it stores the incarnation marker that their sends
// expect not to exist (mailbox.Mailbox.SendFenced), then records its sequence
// with m so the new incarnation's sends expect it. A send of an old
// incarnation that read the record before it changed is refused by the
// server once the marker is stored, and Join returns only after that.
// Recording the sequence may lose to another write of the record; the
// sender then learns it from the server's refusal.
func (s *Service) markIncarnation(ctx context.Context, team string, m *teambus.Member) error {
	seq, err := s.Mailbox(team).MarkIncarnation(ctx, m.ID, m.Epoch)
	if err != nil {
		return fmt.Errorf("join %s of team %s: %w", m.ID, team, err)
	}
	m.Marker = seq
	return s.UpdateMember(ctx, team, m.ID, m.Epoch, func(cur *teambus.Member) bool {
		if cur.Marker >= seq {
			return false
		}
		cur.Marker = seq
		return true
	})
}

// SetMemberStatus sets the stored lifecycle status of a member's current
// incarnation. It does nothing when epoch is no longer current.
func (s *Service) SetMemberStatus(ctx context.Context, team, member string, epoch int64, status teambus.MemberStatus) error {
	var (
		from    teambus.MemberStatus
		changed bool
		cur     int64
		since   *time.Time
	)
	err := s.UpdateMember(ctx, team, member, epoch, func(m *teambus.Member) bool {
		from, changed, cur, since = m.Status, false, m.Epoch, m.ZombieSince
		if m.Status == status {
			return false
		}
		switch m.Status {
		case teambus.MemberCrashed, teambus.MemberPaused, teambus.MemberShutdown:
			return false
		}
		m.Status = status
		if status == teambus.MemberZombie {
			m.ZombieSince = teambus.TimePtr(s.Now())
		} else {
			m.ZombieSince = nil
		}
		changed = true
		return true
	})
	if err == nil && changed {
		data := map[string]any{"name": member, "epoch": cur, "from": from, "status": status}
		switch {
		case status == teambus.MemberZombie:
			s.LogEvent(ctx, team, eventlog.EvMemberZombie, member, data)
		case from == teambus.MemberZombie && status != teambus.MemberShutdown:
			if since != nil {
				data["zombie_for"] = s.Now().Sub(*since).Round(time.Millisecond).String()
			}
			s.LogEvent(ctx, team, eventlog.EvMemberUnzombie, member, data)
		}
		if status == teambus.MemberShutdown {
			data["result"] = "shutdown"
			s.LogEvent(ctx, team, eventlog.EvAgentCompleted, member, data)
		}
	}
	return err
}

// UpdateMember applies fn to the member's current incarnation with
// compare-and-set; fn returns whether it changed anything. A stale epoch
// changes nothing.
func (s *Service) UpdateMember(ctx context.Context, team, member string, epoch int64, fn func(*teambus.Member) bool) error {
	return kv.Retry(ctx, func() error {
		m, rev, err := s.store.Member(ctx, team, member)
		if err != nil {
			return err
		}
		if epoch != 0 && m.Epoch != epoch {
			return nil
		}
		if !fn(m) {
			return nil
		}
		_, err = s.store.PutMember(ctx, team, m, rev)
		return err
	})
}

// UpdateTeam applies fn to the team record with compare-and-set; fn returns
// whether it changed anything.
func (s *Service) UpdateTeam(ctx context.Context, team string, fn func(*teambus.Team) (bool, error)) (*teambus.Team, error) {
	var out *teambus.Team
	err := kv.Retry(ctx, func() error {
		t, rev, err := s.store.Team(ctx, team)
		if err != nil {
			return err
		}
		changed, err := fn(t)
		if err != nil {
			return err
		}
		if changed {
			if _, err := s.store.PutTeam(ctx, t, rev); err != nil {
				return err
			}
		}
		out = t
		return nil
	})
	return out, err
}

// memberSnapshot reads team's state and member's record in it.
func (s *Service) memberSnapshot(ctx context.Context, team, member string) (*kv.Snapshot, *teambus.Member, error) {
	snap, err := s.store.Snapshot(ctx, team)
	if err != nil {
		return nil, nil, err
	}
	m, err := snap.Member(member)
	if err != nil {
		return nil, nil, err
	}
	return snap, m, nil
}

// CrashResult says what a crash report did (teambus.CrashResult).
type CrashResult = teambus.CrashResult

// MarkCrashed records the crash of a member's incarnation epoch: crash count
// +1, its tasks back to available with their checkpoints, or past the crash
// limit the tasks and the member paused with an escalation pending. It is
// idempotent per incarnation: reporting the same crash again, from the lead,
// the teammate sidecar or a restarted lead, changes nothing.
func (s *Service) MarkCrashed(ctx context.Context, team, member string, epoch int64, reason string) (CrashResult, error) {
	var res CrashResult
	err := kv.Retry(ctx, func() error {
		res = CrashResult{}
		snap, m, err := s.memberSnapshot(ctx, team, member)
		if err != nil {
			return err
		}
		if m.Epoch != epoch || m.CrashedEpoch == epoch || m.Status == teambus.MemberShutdown {
			res.Crashes = m.CrashCount
			return nil
		}
		tasks := snap.MemberTasks(member)
		n := m.CrashCount + 1
		for _, t := range tasks {
			if t.Crashes+1 > n {
				n = t.Crashes + 1
			}
		}
		m.CrashCount = n
		m.CrashedEpoch = epoch
		m.ZombieSince = nil
		res.Counted, res.Crashes, res.Respawn = true, n, snap.Team.Policy.RespawnMode()
		if n > snap.Team.Policy.CrashLimit {
			m.Status = teambus.MemberPaused
			m.EscalatePending = true
			res.Paused = true
		} else {
			m.Status = teambus.MemberCrashed
		}
		// The member record is the decision point: once it says this epoch
		// crashed, the crash is counted. Its tasks follow; the lead's
		// reconcile finishes them if this process dies in between.
		if _, err := s.store.PutMember(ctx, team, m, snap.MemberRev[member]); err != nil {
			return err
		}
		for _, t := range tasks {
			res.Tasks = append(res.Tasks, t.ID)
			if t.Checkpoint != nil {
				res.Checkpointed = append(res.Checkpointed, t.ID)
			}
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("record crash of %s: %w", member, err)
	}
	if res.Counted {
		s.LogEvent(ctx, team, eventlog.EvAgentCrashed, member, map[string]any{"name": member, "epoch": epoch, "reason": clipText(reason, 1000),
			"crashes": res.Crashes, "tasks": nonNil(res.Tasks), "paused": res.Paused})
	}
	if _, err := s.ReconcileMember(ctx, team, member, reason); err != nil {
		return res, err
	}
	return res, nil
}

// ReconcileMember makes a member's tasks agree with its stored status: a
// crashed member's active tasks go back to the queue (checkpoint kept), a
// paused member's are paused. It is idempotent and returns the tasks it
// changed.
func (s *Service) ReconcileMember(ctx context.Context, team, member, reason string) ([]string, error) {
	var (
		changed []string
		paused  bool
	)
	err := kv.Retry(ctx, func() error {
		changed = changed[:0]
		snap, m, err := s.memberSnapshot(ctx, team, member)
		if err != nil {
			return err
		}
		if m.Status != teambus.MemberCrashed && m.Status != teambus.MemberPaused {
			return nil
		}
		paused = m.Status == teambus.MemberPaused
		for _, t := range snap.MemberTasks(member) {
			if t.Epoch > m.CrashedEpoch && m.Status == teambus.MemberCrashed {
				continue // claimed by a later incarnation
			}
			t.Crashes++
			if m.Status == teambus.MemberPaused {
				teambus.Pause(t, fmt.Sprintf("paused: %s crashed %d times (%s)", member, m.CrashCount, reason), s.Now())
			} else {
				_ = teambus.Requeue(t, snap.Tasks, s.Now()) // its only error is a task already finished: nothing to requeue
				t.LastError = fmt.Sprintf("%s crashed: %s", member, reason)
			}
			if _, err := s.store.PutTask(ctx, team, t, snap.TaskRev[t.ID]); err != nil {
				return err
			}
			changed = append(changed, t.ID)
		}
		return nil
	})
	if err == nil {
		for _, id := range changed {
			if paused {
				s.LogEvent(ctx, team, eventlog.EvTaskPaused, "", map[string]any{"taskId": id, "error": clipText(fmt.Sprintf("%s crashed: %s", member, reason), 1000)})
			} else {
				s.LogEvent(ctx, team, eventlog.EvTaskRequeued, "", map[string]any{"taskId": id, "reason": clipText(fmt.Sprintf("%s crashed: %s", member, reason), 1000)})
			}
		}
	}
	return changed, err
}
