package spawn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/team"
)

// Event types of the team log written here (declared in eventlog).
const (
	EvMemberSpawned   = eventlog.EvMemberSpawned
	EvMemberRespawned = eventlog.EvMemberRespawned
	EvHostJoined      = eventlog.EvHostJoined
	EvHostLost        = eventlog.EvHostLost
)

// Transcripts restores a member's newest Claude Code transcript onto this
// machine. Restore writes it under home for the working directory cwd and
// returns the Claude session to resume; any error means a fresh session
// (a *RestoreError says why, in the events).
type Transcripts interface {
	Restore(ctx context.Context, team, member, home, cwd string) (Restored, error)
}

// Spawner claims and runs the starts of members on this machine: the
// `teambus spawn` command (Host empty) and every teambus host.
type Spawner struct {
	Reg      *Registry
	Svc      *team.Service
	Launcher *Launcher
	// Transcripts, when set, lets Claude Code members resume their
	// conversation.
	Transcripts Transcripts
	// Host is the host's name; empty for a command that starts a session
	// itself.
	Host string
	Log  *slog.Logger
}

// Request asks for a start of a member.
type Request struct {
	Spec Spec `json:"spec"`
	// Force starts the member even when it runs (its running incarnation
	// is fenced when the new one registers) or when another start of it is
	// under way.
	Force bool `json:"force,omitempty"`
	// Fresh starts a new conversation even when a transcript exists.
	Fresh bool `json:"fresh,omitempty"`
}

// Result says what a start did.
type Result struct {
	Team    string `json:"team"`
	Member  string `json:"member"`
	Host    string `json:"host,omitempty"`
	Machine string `json:"machine,omitempty"`
	Mode    Mode   `json:"mode"`
	PID     int    `json:"pid"`
	Log     string `json:"log,omitempty"`
	Window  string `json:"window,omitempty"`
	// From is FromPrompt, FromTranscript or FromBrief; Session the Claude
	// session resumed; Note why a transcript was not used.
	From    string `json:"from"`
	Session string `json:"session,omitempty"`
	Note    string `json:"note,omitempty"`
	// Epoch is the member epoch the start was claimed for; Respawn is
	// true for an automatic restart after a crash.
	Epoch   int64 `json:"epoch"`
	Respawn bool  `json:"respawn,omitempty"`
	// Reclaim is the task the crashed incarnation held, requeued by its
	// crash: Reclaim gives it to the new incarnation once it registers.
	Reclaim string `json:"reclaim,omitempty"`
}

// Machine is this machine's host name.
func Machine() string {
	h, err := os.Hostname()
	if err != nil {
		return "unknown"
	}
	return h
}

// live reports whether m has an incarnation that may still run.
func live(m *teambus.Member) bool {
	if m.Epoch == 0 {
		return false
	}
	switch m.Status {
	case teambus.MemberCrashed, teambus.MemberShutdown:
		return false
	}
	return true
}

// Spawn starts a member on request: refused while the member runs or
// another start of it is under way (unless Force), or while it is paused
// after repeated crashes. The start is claimed on the member's spawn
// record first, so two spawners never both start it.
func (s *Spawner) Spawn(ctx context.Context, req Request) (*Result, Started, error) {
	spec := req.Spec
	if err := spec.Validate(); err != nil {
		return nil, Started{}, err
	}
	snap, err := s.Svc.Snapshot(ctx, spec.Team)
	if err != nil {
		return nil, Started{}, err
	}
	if snap.Team.Closed() {
		return nil, Started{}, teambus.Statef("team %s is %s: nothing to spawn", spec.Team, snap.Team.Status)
	}
	m, err := snap.Member(spec.Member)
	if err != nil {
		return nil, Started{}, err
	}
	if m.Status == teambus.MemberPaused {
		return nil, Started{}, teambus.Statef("member %s is paused after %d crashes (crash-limit %d): the lead decides first (teambus task reassign, or team abort)", m.ID, m.CrashCount, snap.Team.Policy.CrashLimit)
	}
	if err := s.Launcher.check(spec); err != nil {
		return nil, Started{}, err // bad input: nothing claimed, nothing logged
	}
	if live(m) && !req.Force {
		return nil, Started{}, teambus.Conflictf("member %s runs (epoch %d, %s): a second session would be fenced at once; --force replaces it", m.ID, m.Epoch, m.Status)
	}
	rec, rev, err := s.Reg.Record(ctx, spec.Team, spec.Member)
	var prev *Record // what a failed start puts back; nil: no record
	switch {
	case errors.Is(err, ErrNoRecord):
		rec = &Record{}
	case err != nil:
		return nil, Started{}, err
	case rec.Starts > 0 && rec.Epoch == m.Epoch && !req.Force:
		where := "this machine"
		if rec.Host != "" {
			where = "host " + rec.Host
		}
		return nil, Started{}, teambus.Conflictf("a start of %s for epoch %d already ran on %s at %s (pid %d) and has not registered yet: wait for it, or --force", m.ID, m.Epoch, where, rec.StartedAt.Format(time.RFC3339), rec.PID)
	}
	if rev != 0 {
		old := *rec
		prev = &old
	}
	next := *rec
	next.Team, next.Member, next.Spec = spec.Team, spec.Member, spec
	next.Host, next.Machine, next.Epoch = s.Host, Machine(), m.Epoch
	next.Starts++
	next.StartedAt = s.Svc.Now()
	next.PID, next.Log, next.Window, next.Session, next.From = 0, "", "", "", ""
	rev2, err := s.Reg.put(ctx, &next, rev)
	if err != nil {
		return nil, Started{}, fmt.Errorf("claim the start of %s: %w", m.ID, err)
	}
	return s.run(ctx, snap.Team, m, prev, &next, rev2, req.Fresh, false)
}

// Respawn restarts member after a confirmed crash when the team's policy
// is respawn=auto: once per crashed incarnation, claimed on the spawn
// record, by the member's own host, or by any host when that one is gone
// (or the member was started by a command). It returns a nil Result when
// there is nothing for this spawner to do; the caller waits for (or
// releases) the Started process.
func (s *Spawner) Respawn(ctx context.Context, teamID, member string) (*Result, Started, error) {
	t, err := s.Svc.Team(ctx, teamID)
	if err != nil {
		return nil, Started{}, err
	}
	if t.Closed() || t.Policy.RespawnMode() != teambus.RespawnAuto {
		return nil, Started{}, nil
	}
	m, err := s.Svc.Member(ctx, teamID, member)
	if err != nil {
		return nil, Started{}, err
	}
	if m.Status != teambus.MemberCrashed || m.CrashedEpoch != m.Epoch || m.Epoch == 0 {
		return nil, Started{}, nil // running, paused past the crash budget, shut down, or replaced
	}
	rec, rev, err := s.Reg.Record(ctx, teamID, member)
	if errors.Is(err, ErrNoRecord) {
		return nil, Started{}, nil // not started by teambus: nothing recorded to start again
	}
	if err != nil {
		return nil, Started{}, err
	}
	if rec.Epoch >= m.Epoch {
		return nil, Started{}, nil // this crash was claimed already
	}
	if rec.Host != s.Host && rec.Host != "" && s.Reg.Alive(ctx, rec.Host) {
		return nil, Started{}, nil // its own host restarts it
	}
	prev := *rec
	next := *rec
	next.Host, next.Machine, next.Epoch = s.Host, Machine(), m.Epoch
	next.Starts++
	next.Respawns++
	next.StartedAt = s.Svc.Now()
	next.PID, next.Log, next.Window, next.Session, next.From = 0, "", "", "", ""
	rev2, err := s.Reg.put(ctx, &next, rev)
	if errors.Is(err, teambus.ErrConflict) {
		return nil, Started{}, nil // another host claimed it
	}
	if err != nil {
		return nil, Started{}, err
	}
	return s.run(ctx, t, m, &prev, &next, rev2, false, true)
}

// run starts the claimed record rec (revision rev) for member m of team t;
// prev is the record before the claim (nil: there was none), put back when
// a requested start fails.
func (s *Spawner) run(ctx context.Context, t *teambus.Team, m *teambus.Member, prev, rec *Record, rev uint64, fresh, respawn bool) (*Result, Started, error) {
	spec := rec.Spec
	res := &Result{Team: spec.Team, Member: spec.Member, Host: s.Host, Machine: rec.Machine, Mode: spec.Mode, Epoch: m.Epoch, Respawn: respawn, From: FromPrompt}
	resume := ""
	if spec.Claude() && !fresh && m.Epoch > 0 {
		switch {
		case s.Transcripts == nil:
			res.Note = "transcripts are not carried on this bus"
		default:
			r, err := s.Transcripts.Restore(ctx, spec.Team, spec.Member, s.Launcher.Home(), spec.Cwd)
			if err != nil {
				res.Note = clean(err.Error())
			} else {
				resume, res.Session, res.From = r.Session, r.Session, FromTranscript
			}
		}
	}
	if respawn && resume == "" {
		res.From = FromBrief
	}
	prompt, err := s.prompt(ctx, t, m, spec, resume != "", respawn, res.Note)
	if err != nil {
		s.unclaim(ctx, prev, rec, rev)
		return nil, Started{}, err
	}
	st, err := s.Launcher.Start(ctx, Launch{Spec: spec, Prompt: prompt, Resume: resume})
	if err != nil {
		s.Svc.LogEvent(ctx, spec.Team, eventlog.EvMemberSpawnFailed, spec.Member, map[string]any{"name": spec.Member, "host": s.Host, "machine": rec.Machine, "error": clean(err.Error()), "respawn": respawn})
		if !respawn {
			s.unclaim(ctx, prev, rec, rev) // the caller sees the error and may try again
			return nil, Started{}, err
		}
		// An automatic respawn keeps its claim: a start that can not run
		// here is not retried in a loop. The lead is told instead.
		body := fmt.Sprintf("teambus could not restart %s after its crash (host %s): %s; start it with `teambus spawn --team %s --member %s` once fixed",
			spec.Member, orHere(s.Host), clean(err.Error()), spec.Team, spec.Member)
		if _, nerr := s.Svc.Notify(ctx, spec.Team, spec.Member, m.Epoch, teambus.Lead, teambus.MsgSystem, fmt.Sprintf("respawn-failed/%s/%d", spec.Member, m.Epoch), body,
			map[string]any{"member": spec.Member, "epoch": m.Epoch, "host": s.Host}); nerr != nil {
			s.logger().Warn("tell the lead", "err", nerr)
		}
		return nil, Started{}, err
	}
	res.PID, res.Log, res.Window = st.PID, st.Log, st.Window
	rec.PID, rec.Log, rec.Window, rec.Session, rec.From = st.PID, st.Log, st.Window, res.Session, res.From
	if _, err := s.Reg.put(ctx, rec, rev); err != nil {
		s.logger().Warn("record the start", "member", spec.Member, "err", err) // the claim stands; only the pid and log are missing
	}
	data := map[string]any{"name": spec.Member, "host": s.Host, "machine": rec.Machine, "mode": spec.Mode, "pid": st.PID, "from": res.From, "epoch": m.Epoch}
	if !spec.Claude() {
		data["agent"] = "command"
	}
	if res.Session != "" {
		data["session"] = res.Session
	}
	if res.Note != "" {
		data["note"] = res.Note
	}
	typ := EvMemberSpawned
	if respawn {
		typ = EvMemberRespawned
		data["crashed_epoch"], data["crashes"] = m.Epoch, m.CrashCount
	}
	s.Svc.LogEvent(ctx, spec.Team, typ, spec.Member, data)
	s.logger().Info(typ, "team", spec.Team, "member", spec.Member, "pid", st.PID, "from", res.From, "note", res.Note)
	if m.Status == teambus.MemberCrashed && m.ClaimTask != "" {
		res.Reclaim = m.ClaimTask
	}
	return res, st, nil
}

// Reclaim gives the task a crashed incarnation held (requeued by the
// crash) back to the member's next incarnation: it waits, until ctx ends,
// for an incarnation after epoch to register, then claims task for it if
// the task is still available. It returns whether it claimed it.
func (s *Spawner) Reclaim(ctx context.Context, teamID, member string, epoch int64, task string) (bool, error) {
	for {
		m, err := s.Svc.Member(ctx, teamID, member)
		if err != nil {
			return false, err
		}
		if m.Epoch > epoch+1 {
			return false, nil // replaced again: not this start's to reclaim
		}
		if m.Epoch == epoch+1 && m.Session != "" {
			t, err := s.Svc.Task(ctx, teamID, task)
			if err != nil {
				return false, err
			}
			if t.Status != teambus.TaskAvailable {
				return false, nil // taken by another member, or finished
			}
			if _, err := s.Svc.Claim(ctx, team.Actor{Team: teamID, Member: member, Session: m.Session}, task); err != nil {
				if errors.Is(err, teambus.ErrConflict) || errors.Is(err, teambus.ErrState) {
					return false, nil // someone was faster (the session itself, or another member)
				}
				return false, err
			}
			s.logger().Info("reclaimed", "team", teamID, "member", member, "task", task, "epoch", m.Epoch)
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// unclaim gives back a claim whose start failed, so a later start may
// claim the epoch again.
func (s *Spawner) unclaim(ctx context.Context, prev, rec *Record, rev uint64) {
	var err error
	if prev == nil {
		err = s.Reg.remove(ctx, rec.Team, rec.Member, rev)
	} else {
		_, err = s.Reg.put(ctx, prev, rev)
	}
	if err != nil {
		s.logger().Warn("give back the claim", "member", rec.Member, "err", err)
	}
}

// prompt is the first prompt of the session.
func (s *Spawner) prompt(ctx context.Context, t *teambus.Team, m *teambus.Member, spec Spec, resumed, respawn bool, note string) (string, error) {
	if spec.Prompt != "" && !respawn && !resumed {
		return spec.Prompt, nil
	}
	b, err := s.Svc.Brief(ctx, spec.Team, spec.Member, 10)
	if err != nil {
		return "", err
	}
	var w strings.Builder
	if m.Status == teambus.MemberCrashed {
		fmt.Fprintf(&w, "teambus restarted you, %s of team %s: your earlier session (incarnation %d) crashed (crash %d of the %d the team allows).\n",
			spec.Member, spec.Team, m.Epoch, m.CrashCount, t.Policy.CrashLimit)
	} else if m.Epoch > 0 {
		fmt.Fprintf(&w, "teambus started you again, %s of team %s (after incarnation %d).\n", spec.Member, spec.Team, m.Epoch)
	}
	if m.Status == teambus.MemberCrashed && m.ClaimTask != "" {
		fmt.Fprintf(&w, "Your task %s went back to the queue at the crash; teambus gives it back to this session as soon as it registers (if nobody took it meanwhile): `teambus task show %s` tells.\n", m.ClaimTask, m.ClaimTask)
	}
	switch {
	case resumed:
		w.WriteString("Your conversation so far is above: continue it. Do not redo work that is already done; check the checkpoint below.\n")
	case m.Epoch > 0:
		fmt.Fprintf(&w, "Your earlier conversation could not be restored (%s): start from this brief, and do not redo work the checkpoint lists as done.\n", orNone(note))
	}
	if w.Len() > 0 {
		w.WriteString("\n")
	}
	w.WriteString(b.HookText(m.Epoch + 1))
	if spec.Prompt != "" {
		w.WriteString("\n" + spec.Prompt + "\n")
	}
	return w.String(), nil
}

// JudgeLost marks the members that host ran crashed after the host was
// lost: those whose incarnation registered after its start there and that
// no longer beat (a member whose sidecar still beats runs on). It returns
// the members judged crashed.
func (s *Spawner) JudgeLost(ctx context.Context, teamID, host string) ([]string, error) {
	recs, err := s.Reg.Records(ctx, teamID)
	if err != nil {
		return nil, err
	}
	t, err := s.Svc.Team(ctx, teamID)
	if err != nil {
		return nil, err
	}
	beats, err := s.Svc.Heartbeats(ctx, teamID)
	if err != nil {
		return nil, err
	}
	fresh := s.Svc.Now().Add(-max(2*t.Policy.Heartbeat, time.Second))
	var out []string
	for member, rec := range recs {
		if rec.Host != host {
			continue
		}
		m, err := s.Svc.Member(ctx, teamID, member)
		if err != nil || !live(m) || m.Epoch <= rec.Epoch {
			continue
		}
		if hb, ok := beats[kv.MemberKey(member)]; ok && hb.Epoch == m.Epoch && hb.Created.After(fresh) {
			continue
		}
		res, err := s.Svc.MarkCrashed(ctx, teamID, member, m.Epoch, fmt.Sprintf("its host %s was lost", host))
		if err != nil {
			return out, err
		}
		if !res.Counted {
			continue // judged already (by another host, or a watcher)
		}
		out = append(out, member)
	}
	return out, nil
}

func (s *Spawner) logger() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

func orHere(host string) string {
	if host == "" {
		return "a spawn command"
	}
	return host
}

func orNone(s string) string {
	if s == "" {
		return "none was stored"
	}
	return s
}

// clean makes err text one short line.
func clean(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
