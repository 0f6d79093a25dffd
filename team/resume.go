package team

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/kv"
)

// MemberState is a member's liveness at resume (teambus.MemberState).
type MemberState = teambus.MemberState

// Report is the summary of a resume or a probe (teambus.Report).
type Report = teambus.Report

// Resume decisions.
const (
	DecisionAttach    = "attach"    // the first lead of a pending team
	DecisionReattach  = "reattach"  // the same lead session again
	DecisionTakeover  = "takeover"  // a new lead session replaced a stale (or forced) one
	DecisionResumable = "resumable" // probe: a lead may resume the team
	DecisionReview    = "review"    // probe: the team is finished; review it
	// DecisionAlreadyLead: `team resume` by the session of the running
	// lead; nothing changed.
	DecisionAlreadyLead = "already_lead"
	// DecisionPending: probe: no lead has attached yet; `team resume`
	// refuses it, the first `teambus lead` attaches.
	DecisionPending = "pending"
	// DecisionLeadLive: probe: the team's lead is live (its heartbeat is
	// fresh); `team resume` by another session refuses until it stops,
	// or with --force.
	DecisionLeadLive = "lead_live"
	// DecisionWait: probe: the lead stopped heartbeating without releasing
	// the team; `team resume` by another session refuses until
	// takeover-after has passed (Report.ResumableAt), or with --force.
	DecisionWait = "wait"
)

// LeadHeldError is the refusal of a resume by another session while the
// team's lead holds it: the lead is live, or it went silent without
// releasing the team less than takeover-after ago. It is ErrUnavailable.
type LeadHeldError struct {
	Team    string
	Session string
	Epoch   int64
	// Live is true when the lead's heartbeat is fresh (or it attached and
	// has not beaten yet): it holds the team until it stops.
	Live bool
	// Beating: Live by its heartbeat, not only by a fresh attach.
	Beating bool
	// NeverBeat: the lead has not beaten since it attached (no lead
	// sidecar runs for it: a `team resume` alone, or a sidecar that did
	// not start).
	NeverBeat bool
	// Seen is how long ago the lead was last seen.
	Seen time.Duration
	// At is when takeover-after passes; meaningful when !Live.
	At            time.Time
	TakeoverAfter time.Duration
}

// Unwrap makes the refusal transient: it may succeed later.
func (e *LeadHeldError) Unwrap() error { return teambus.ErrUnavailable }

// Error says why and the ways out, in plain words: a caller names its own
// switch that forces a resume with When.
func (e *LeadHeldError) Error() string { return e.Why() + ": " + e.When("force the resume") }

// Why says what holds the team.
func (e *LeadHeldError) Why() string {
	switch {
	case e.Beating:
		return fmt.Sprintf("team %s has a live lead (session %s, epoch %d, last heartbeat %s ago)", e.Team, e.Session, e.Epoch, e.Seen.Round(time.Second))
	case e.Live:
		return fmt.Sprintf("team %s's lead (session %s, epoch %d) attached %s ago and its first heartbeat is due", e.Team, e.Session, e.Epoch, e.Seen.Round(time.Second))
	case e.NeverBeat:
		return fmt.Sprintf("team %s's lead (session %s, epoch %d) attached %s ago and has not beaten since (no lead sidecar runs for it) nor released the team", e.Team, e.Session, e.Epoch, e.Seen.Round(time.Second))
	}
	return fmt.Sprintf("team %s's lead (session %s, epoch %d) went silent %s ago without releasing the team (its sidecar was killed or lost the bus while its agent may still run)", e.Team, e.Session, e.Epoch, e.Seen.Round(time.Second))
}

// When says when a resume by another session succeeds, force naming the
// switch that forces it where the text is shown.
func (e *LeadHeldError) When(force string) string {
	if e.Live {
		return fmt.Sprintf("another session resumes once that lead stops (its session ends or its sidecar is stopped), or %s to take over now (the old lead is fenced)", force)
	}
	return fmt.Sprintf("takeover becomes possible at %s (takeover-after %s), or %s to take over now (the old lead is fenced)", e.At.Format(time.RFC3339), e.TakeoverAfter, force)
}

// leadLive reports whether the team's lead of its current epoch is live:
// its heartbeat is fresh, or it attached and has not beaten yet for less
// than lead-timeout. A released lead is never live. seen is when it was
// last seen alive.
func leadLive(t *teambus.Team, hbs map[string]kv.HeartbeatEntry, now time.Time) (live bool, seen time.Time, beating bool) {
	if t.LeadLastSeen != nil {
		seen = *t.LeadLastSeen
	}
	if t.LeadSession == "" || t.LeadReleasedAt != nil {
		return false, seen, false
	}
	if hb, ok := hbs[kv.LeadKey]; ok && hb.Epoch == t.LeadEpoch && hb.Session == t.LeadSession {
		if hb.Created.After(seen) {
			seen = hb.Created
		}
		live = hb.Status != teambus.MemberOffline && now.Sub(hb.Created) < t.Policy.LeadTimeout
		return live, seen, live
	}
	// Attached, its first heartbeat not written yet: the attach itself is
	// the sign of life, as fresh for as long as a heartbeat would be. A
	// lead that has beaten and stopped (its heartbeat gone) is not live.
	if t.LeadAttachedAt != nil && t.LeadLastSeen != nil && t.LeadLastSeen.Equal(*t.LeadAttachedAt) {
		return now.Sub(*t.LeadAttachedAt) < t.Policy.LeadTimeout, seen, false
	}
	return false, seen, false
}

// leadHold returns what keeps another session from taking the team's
// lead now without force, or nil when nothing does: no lead, a released
// lead, or one silent for takeover-after.
func leadHold(t *teambus.Team, hbs map[string]kv.HeartbeatEntry, now time.Time) *LeadHeldError {
	if t.LeadSession == "" || t.LeadReleasedAt != nil {
		return nil
	}
	live, seen, beating := leadLive(t, hbs, now)
	age := time.Duration(1 << 62)
	if !seen.IsZero() {
		age = max(now.Sub(seen), 0)
	}
	if !live && age >= t.Policy.TakeoverAfter {
		return nil
	}
	neverBeat := t.LeadAttachedAt != nil && t.LeadLastSeen != nil && t.LeadLastSeen.Equal(*t.LeadAttachedAt) && !beating
	return &LeadHeldError{Team: t.ID, Session: t.LeadSession, Epoch: t.LeadEpoch, Live: live, Beating: beating, NeverBeat: neverBeat, Seen: age,
		At: now.Add(t.Policy.TakeoverAfter - age), TakeoverAfter: t.Policy.TakeoverAfter}
}

// Resume runs the resume validation sequence of spec section 8 and attaches
// session as the team's lead: lead epoch up, the old lead fenced. asLead is
// true for the lead sidecar, which may attach to a pending team as its first
// lead; `team resume` may not.
func (s *Service) Resume(ctx context.Context, team, session string, force, asLead bool) (*Report, error) {
	start := time.Now()
	if err := teambus.ValidateID("team", team); err != nil {
		return nil, err
	}
	if err := teambus.ValidateSession(session); err != nil {
		return nil, err
	}
	if !asLead {
		// The running lead's own session resuming again must not bump the
		// epoch: that would fence (and stop) the very lead it names.
		if rep, err := s.alreadyLead(ctx, team, session); rep != nil || err != nil {
			if rep != nil {
				rep.Took = time.Since(start).Round(time.Microsecond).String()
			}
			return rep, err
		}
	}
	var (
		decision, oldLead string
		warnings          []string
	)
	// The heartbeats say whether the lead is live; the team record, written
	// with compare-and-set, decides. A heartbeat that moves on meanwhile
	// belongs to the lead this read already saw live.
	hbs, err := s.store.Heartbeats(ctx, team)
	if err != nil {
		return nil, err
	}
	// Steps 1-3 decide and write with compare-and-set: of two leads
	// resuming at once, one wins.
	t, err := s.UpdateTeam(ctx, team, func(t *teambus.Team) (bool, error) {
		decision, oldLead, warnings = "", "", nil
		now := s.Now()
		switch t.Status {
		case teambus.TeamActive:
		case teambus.TeamConsolidating:
			warnings = append(warnings, "consolidation was interrupted: check the working tree, then run `teambus team complete "+team+"` or continue the work")
		case teambus.TeamComplete:
			return false, teambus.Statef("team %s is complete: use `teambus team review %s`", team, team)
		case teambus.TeamAborted:
			return false, teambus.Statef("team %s was aborted: use `teambus team review %s`", team, team)
		case teambus.TeamPending:
			if !asLead {
				return false, &NoLeadError{Team: team, Session: session}
			}
		}
		if t.Status == teambus.TeamPending && t.LeadSession != "" && t.LeadSession != session && !force {
			// The lead session named at create is the team's first lead.
			return false, &NoLeadError{Team: team, Session: t.LeadSession, Other: session}
		}
		switch {
		case t.LeadSession == "" || t.Status == teambus.TeamPending:
			decision = DecisionAttach
		case t.LeadSession == session:
			decision = DecisionReattach
		default:
			hold := leadHold(t, hbs, now)
			if hold != nil && !force {
				return false, hold
			}
			decision, oldLead = DecisionTakeover, t.LeadSession
			switch {
			case hold != nil:
				warnings = append(warnings, fmt.Sprintf("forced takeover from session %s, last seen %s ago: it is fenced now", t.LeadSession, hold.Seen.Round(time.Second)))
			case t.LeadReleasedAt != nil:
				warnings = append(warnings, fmt.Sprintf("took over from session %s, which released the team at %s (%s)", t.LeadSession, t.LeadReleasedAt.Format(time.RFC3339), teambus.ReleaseWords(t.LeadReleased)))
			}
		}
		if t.Status == teambus.TeamPending {
			t.Status = teambus.TeamActive
		}
		t.LeadSession = session
		t.LeadEpoch++
		t.LeadLastSeen = teambus.TimePtr(now)
		t.LeadAttachedAt = t.LeadLastSeen
		t.LeadReleasedAt, t.LeadReleased = nil, ""
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	if decision == DecisionTakeover {
		s.LogEvent(ctx, team, eventlog.EvLeadTakeover, teambus.Lead, map[string]any{"session": session, "old_session": oldLead, "epoch": t.LeadEpoch, "forced": force})
	} else {
		s.LogEvent(ctx, team, eventlog.EvLeadAttached, teambus.Lead, map[string]any{"session": session, "epoch": t.LeadEpoch, "decision": decision})
	}
	rep, err := s.report(ctx, t, decision)
	if err != nil {
		return nil, err
	}
	rep.OldLead = oldLead
	rep.Warnings = append(warnings, rep.Warnings...)
	rep.Took = time.Since(start).Round(time.Microsecond).String()
	return rep, nil
}

// alreadyLead returns a report with DecisionAlreadyLead when session is
// the team's lead and its heartbeat of the current lead epoch is fresh —
// or, before that heartbeat exists, its attach is; nil otherwise. It
// changes nothing.
func (s *Service) alreadyLead(ctx context.Context, team, session string) (*Report, error) {
	t, _, err := s.store.Team(ctx, team)
	if err != nil {
		return nil, err
	}
	if t.Closed() || t.LeadSession != session {
		return nil, nil
	}
	hbs, err := s.store.Heartbeats(ctx, team)
	if err != nil {
		return nil, err
	}
	// Before its first heartbeat the attach is the sign of life: without
	// that, a resume in that moment (an agent's first command beside the
	// sidecar its SessionStart hook started) reattached and fenced the
	// lead it names.
	if live, _, _ := leadLive(t, hbs, s.Now()); !live {
		return nil, nil
	}
	return s.report(ctx, t, DecisionAlreadyLead)
}

// Probe runs steps 1, 2, 4 and 5 of the resume sequence without changing
// anything.
func (s *Service) Probe(ctx context.Context, team string) (*Report, error) {
	start := time.Now()
	t, _, err := s.store.Team(ctx, team)
	if err != nil {
		return nil, err
	}
	hbs, err := s.store.Heartbeats(ctx, team)
	if err != nil {
		return nil, err
	}
	now := s.Now()
	decision := DecisionResumable
	var (
		warn []string
		why  string
		at   *time.Time
	)
	switch t.Status {
	case teambus.TeamComplete, teambus.TeamAborted:
		decision = DecisionReview
	case teambus.TeamActive, teambus.TeamConsolidating:
		// What a `team resume` by a new session would meet now.
		switch hold := leadHold(t, hbs, now); {
		case hold != nil && hold.Live:
			decision, why = DecisionLeadLive, hold.Why()+": "+hold.When("force the resume")
		case hold != nil:
			decision, why, at = DecisionWait, hold.Why()+": "+hold.When("force the resume"), teambus.TimePtr(hold.At)
		case t.LeadSession == "":
			why = "no lead is attached"
		case t.LeadReleasedAt != nil:
			why = fmt.Sprintf("lead session %s released the team at %s (%s)", t.LeadSession, t.LeadReleasedAt.Format(time.RFC3339), teambus.ReleaseWords(t.LeadReleased))
		default:
			why = fmt.Sprintf("lead session %s went silent over takeover-after (%s) ago", t.LeadSession, t.Policy.TakeoverAfter)
		}
	}
	switch t.Status {
	case teambus.TeamPending:
		decision = DecisionPending
		sess := "S"
		if t.LeadSession != "" {
			sess = t.LeadSession
		}
		warn = append(warn, "no lead has attached yet: start its lead (session "+sess+")")
	case teambus.TeamConsolidating:
		warn = append(warn, "consolidation was interrupted")
	}
	rep, err := s.report(ctx, t, decision)
	if err != nil {
		return nil, err
	}
	rep.Warnings = append(warn, rep.Warnings...)
	rep.Why, rep.ResumableAt = why, at
	rep.Took = time.Since(start).Round(time.Microsecond).String()
	return rep, nil
}

// report builds steps 4 to 7: member liveness, facts, the mailbox tail and
// the task summary.
func (s *Service) report(ctx context.Context, t *teambus.Team, decision string) (*Report, error) {
	// The records, the heartbeats and the mailbox tail are read at once:
	// three independent reads, the records the longest in a large team.
	// The records are the team, members and activity with the task
	// summary (kv.ReportSnapshot): O(members) records while the summary
	// is current, one read of every task otherwise.
	var (
		snap    *kv.Snapshot
		sum     *kv.TaskSummary
		hbs     map[string]kv.HeartbeatEntry
		tail    []teambus.Message
		hbErr   error
		tailErr error
		wg      sync.WaitGroup
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		hbs, hbErr = s.store.Heartbeats(ctx, t.ID)
	}()
	go func() {
		defer wg.Done()
		tail, tailErr = s.teamMailbox(t).Tail(ctx, 10)
	}()
	snap, sum, err := s.store.ReportSnapshot(ctx, t.ID)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	if hbErr != nil {
		return nil, hbErr
	}
	rep := &Report{Team: t.ID, Status: t.Status, Decision: decision, Warnings: []string{}, Tasks: map[string]int{},
		Progress: sum.Progress, LeadSession: t.LeadSession, LeadEpoch: t.LeadEpoch,
		LeadTimeoutDetectedAt: t.LeadTimeoutDetectedAt, Members: []MemberState{}}
	view := buildView(snap, hbs, s.Now(), false)
	for _, m := range view.Members {
		st := MemberState{ID: m.ID, Status: m.Status, Task: m.Task, Epoch: m.Epoch}
		switch {
		case m.Status == teambus.MemberZombie:
			st.State = "zombie"
		case m.Online:
			st.State = "online"
		default:
			st.State = "offline"
		}
		if st.State == "offline" && m.Task != nil {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("member %s is offline holding task %s: the lead's crash detection will probe it", m.ID, *m.Task))
		}
		rep.Members = append(rep.Members, st)
	}
	for st, n := range sum.Counts {
		rep.Tasks[string(st)] = n
	}
	if n := rep.Tasks[string(teambus.TaskPaused)]; n > 0 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%d task(s) paused: they need a lead decision (task reassign or reopen)", n))
	}
	rep.Warnings = append(rep.Warnings, CheckFacts(t.Facts)...)
	if t.Status == teambus.TeamConsolidating && t.WorkTree != "" {
		rep.Warnings = append(rep.Warnings, CheckWorkTree(ctx, t.WorkTree)...)
	}
	if tailErr == nil {
		rep.MailboxTail = tail
	}
	if rep.MailboxTail == nil {
		rep.MailboxTail = []teambus.Message{}
	}
	return rep, nil
}

// CheckFacts recomputes the sha256 of every registered facts file and
// returns a warning for each that changed or can not be read.
func CheckFacts(facts map[string]string) []string {
	var paths []string
	for p := range facts {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var out []string
	for _, p := range paths {
		sum, err := FileSHA256(p)
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("facts file %s can not be read: %v", p, err))
		case sum != facts[p]:
			out = append(out, fmt.Sprintf("facts file %s changed since it was registered (sha256 %s…, now %s…): facts may be stale", p, facts[p][:12], sum[:12]))
		}
	}
	return out
}

// FileSHA256 returns the hex sha256 of a file.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// RegisterFacts records the sha256 of files with the team, to be checked at
// every resume.
func (s *Service) RegisterFacts(ctx context.Context, team string, paths []string) (map[string]string, error) {
	sums := map[string]string{}
	for _, p := range paths {
		sum, err := FileSHA256(p)
		if err != nil {
			return nil, teambus.Invalidf("facts file %s: %w", p, err)
		}
		sums[p] = sum
	}
	t, err := s.UpdateTeam(ctx, team, func(t *teambus.Team) (bool, error) {
		if t.Facts == nil {
			t.Facts = map[string]string{}
		}
		for p, sum := range sums {
			t.Facts[p] = sum
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return t.Facts, nil
}

// Transition moves the team to consolidating, complete or aborted.
// worktree is recorded at consolidate, for the resume check. It does not
// check the tasks: see TransitionChecked.
func (s *Service) Transition(ctx context.Context, team string, to teambus.TeamStatus, worktree string) (*teambus.Team, error) {
	return s.transition(ctx, team, to, worktree)
}

// TransitionChecked is Transition that refuses to complete a team with
// unfinished tasks (ErrState naming them) unless force.
func (s *Service) TransitionChecked(ctx context.Context, team string, to teambus.TeamStatus, worktree string, force bool) (*teambus.Team, error) {
	if to == teambus.TeamComplete && !force {
		snap, err := s.store.Snapshot(ctx, team)
		if err != nil {
			return nil, err
		}
		if snap.Team.Status != teambus.TeamComplete {
			var open []string
			for _, id := range snap.TaskIDs() {
				if tk := snap.Tasks[id]; !tk.Finished() {
					open = append(open, fmt.Sprintf("%s (%s)", id, tk.Status))
				}
			}
			if len(open) > 0 {
				shown := open
				if len(shown) > 10 {
					shown = append(shown[:10:10], fmt.Sprintf("and %d more", len(open)-10))
				}
				return nil, &UnfinishedTasksError{Team: team, Open: len(open), Shown: shown}
			}
		}
	}
	return s.transition(ctx, team, to, worktree)
}

func (s *Service) transition(ctx context.Context, team string, to teambus.TeamStatus, worktree string) (*teambus.Team, error) {
	var from teambus.TeamStatus
	t, err := s.UpdateTeam(ctx, team, func(t *teambus.Team) (bool, error) {
		from = t.Status
		if t.Status == to {
			return false, nil
		}
		if t.Closed() {
			return false, teambus.Statef("team %s is already %s", team, t.Status)
		}
		switch to {
		case teambus.TeamConsolidating:
			if t.Status != teambus.TeamActive {
				return false, teambus.Statef("team %s is %s: only an active team can consolidate", team, t.Status)
			}
			t.WorkTree = worktree
		case teambus.TeamComplete:
			if t.Status != teambus.TeamActive && t.Status != teambus.TeamConsolidating {
				return false, teambus.Statef("team %s is %s: only an active or consolidating team can complete", team, t.Status)
			}
		case teambus.TeamAborted:
		default:
			return false, teambus.Invalidf("unknown team transition to %s", to)
		}
		t.Status = to
		return true, nil
	})
	if err != nil || from == to {
		return t, err
	}
	data := map[string]any{"from": from, "status": to}
	switch to {
	case teambus.TeamConsolidating:
		data["worktree"] = worktree
		s.LogEvent(ctx, team, eventlog.EvTeamConsolidate, "", data)
	case teambus.TeamComplete:
		s.LogEvent(ctx, team, eventlog.EvTeamComplete, "", data)
		s.LogEvent(ctx, team, eventlog.EvSessionEnd, "", map[string]any{"status": to})
	case teambus.TeamAborted:
		s.LogEvent(ctx, team, eventlog.EvTeamAborted, "", data)
		s.LogEvent(ctx, team, eventlog.EvSessionEnd, "", map[string]any{"status": to})
	}
	return t, nil
}

// CheckWorkTree returns a warning when the git working tree dir, recorded
// when the team started consolidating, has uncommitted changes (seed 000,
// section 4.1: the lead died between git add and git commit), or can not
// be checked.
func CheckWorkTree(ctx context.Context, dir string) []string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", "-C", dir, "status", "--porcelain")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return []string{fmt.Sprintf("consolidation worktree %s can not be checked (git status: %s): verify it by hand before completing", dir, oneLine(msg))}
	}
	var files []string
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if len(line) > 3 {
			files = append(files, strings.TrimSpace(line[3:]))
		}
	}
	if len(files) == 0 {
		return nil
	}
	shown := files
	if len(shown) > 5 {
		shown = append(shown[:5:5], fmt.Sprintf("and %d more", len(files)-5))
	}
	return []string{fmt.Sprintf("consolidation was interrupted with %d uncommitted change(s) in %s (%s): ask the teammates to verify their changes, rebuild, then commit (`teambus team complete`) or roll back",
		len(files), dir, strings.Join(shown, ", "))}
}
