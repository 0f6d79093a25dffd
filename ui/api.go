package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/team"
)

// requestTimeout bounds one API request's reads.
const requestTimeout = 10 * time.Second

// TeamSummary is one row of the teams list.
type TeamSummary struct {
	ID       string         `json:"id"`
	Status   string         `json:"status"`
	Members  int            `json:"members"`
	Online   int            `json:"online"`
	Tasks    int            `json:"tasks"`
	Counts   map[string]int `json:"counts"`
	Progress int            `json:"progress"`
	Error    string         `json:"error,omitempty"`
}

// TeamPage is what the team page shows besides mail and events: the view,
// each task's depth in the dependency graph and the progress.
type TeamPage struct {
	*team.View
	Depth    map[string]int `json:"depth"`
	Progress int            `json:"progress"`
	Actions  bool           `json:"actions"`
	// Now is the server's clock, so the page ages heartbeats without
	// trusting the browser's clock.
	Now time.Time `json:"now"`
	// Spawns says where each member started by teambus spawn runs.
	Spawns map[string]SpawnItem `json:"spawns,omitempty"`
}

// EventItem is an event as the page shows it.
type EventItem struct {
	Seq    uint64          `json:"seq"`
	Stored time.Time       `json:"stored"`
	TS     time.Time       `json:"ts"`
	Type   string          `json:"type"`
	Agent  string          `json:"agent"`
	SID    string          `json:"sid"`
	Data   json.RawMessage `json:"data,omitempty"`
	Error  string          `json:"error,omitempty"`
}

func eventItem(rec *eventlog.EventRecord) EventItem {
	if rec.Err != nil {
		return EventItem{Seq: rec.StreamSeq, Stored: rec.Stored, Error: "not an event: " + oneLine(rec.Err.Error())}
	}
	e := rec.Event
	it := EventItem{Seq: rec.StreamSeq, Stored: rec.Stored, TS: e.TS, Type: e.Type, Agent: e.Agent, SID: e.SID}
	if len(e.Data) > 0 && json.Valid(e.Data) {
		it.Data = append(json.RawMessage(nil), e.Data...) // Raw is valid during the callback only
	}
	return it
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v) // the client went away: nothing to tell it
}

// teamParam returns the {team} path value, checked.
func teamParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("team")
	if err := teambus.ValidateID("team", id); err != nil {
		httpError(w, err)
		return "", false
	}
	return id, true
}

// actionTeam checks an operator action request (see checkAction) and
// returns its team.
func (s *Server) actionTeam(w http.ResponseWriter, r *http.Request) (string, bool) {
	if !s.checkAction(w, r) {
		return "", false
	}
	return teamParam(w, r)
}

func (s *Server) handleTeams(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	ids, err := s.cfg.Service.ListTeams(ctx)
	if err != nil {
		httpError(w, err)
		return
	}
	out := []TeamSummary{}
	for _, id := range ids {
		sum := TeamSummary{ID: id, Counts: map[string]int{}}
		v, err := s.cfg.Service.Show(ctx, id)
		if err != nil {
			sum.Error = oneLine(err.Error())
			out = append(out, sum)
			continue
		}
		sum.Status = string(v.Team.Status)
		sum.Members, sum.Tasks, sum.Counts, sum.Progress = len(v.Members), len(v.Tasks), v.Counts, progress(v)
		for _, m := range v.Members {
			if m.Online {
				sum.Online++
			}
		}
		out = append(out, sum)
	}
	writeJSON(w, out)
}

func (s *Server) handleTeam(w http.ResponseWriter, r *http.Request) {
	id, ok := teamParam(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	v, err := s.cfg.Service.Show(ctx, id)
	if err != nil {
		httpError(w, err)
		return
	}
	writeJSON(w, s.teamPage(v))
}

func (s *Server) teamPage(v *team.View) *TeamPage {
	return &TeamPage{View: v, Depth: Depths(v.Tasks), Progress: progress(v), Actions: s.cfg.AllowActions, Now: s.cfg.Service.Now(),
		Spawns: s.spawnItems(v.Team.ID)}
}

// progress is the share of tasks done, in percent.
func progress(v *team.View) int {
	if len(v.Tasks) == 0 {
		return 0
	}
	done := 0
	for _, t := range v.Tasks {
		if t.Done() {
			done++
		}
	}
	return done * 100 / len(v.Tasks)
}

// Depths returns each task's layer in the dependency graph: 0 without
// dependencies, else one more than its deepest dependency. A dependency
// that is missing counts as depth 0; a cycle (which the domain refuses) is
// cut where it closes.
func Depths(tasks []*teambus.Task) map[string]int {
	byID := make(map[string]*teambus.Task, len(tasks))
	for _, t := range tasks {
		byID[t.ID] = t
	}
	depth := make(map[string]int, len(tasks))
	visiting := map[string]bool{}
	var visit func(id string) int
	visit = func(id string) int {
		if d, ok := depth[id]; ok {
			return d
		}
		t, ok := byID[id]
		if !ok || visiting[id] {
			return -1
		}
		visiting[id] = true
		d := 0
		for _, dep := range t.Dependencies {
			if dd := visit(dep); dd+1 > d {
				d = dd + 1
			}
		}
		delete(visiting, id)
		depth[id] = d
		return d
	}
	for _, t := range tasks {
		visit(t.ID)
	}
	return depth
}

// mailFilter reads from, to, type, text and limit from the query.
func mailFilter(r *http.Request) (mailbox.ReplayFilter, string, int, error) {
	q := r.URL.Query()
	f := mailbox.ReplayFilter{From: q.Get("from"), To: q.Get("to"), Type: teambus.MessageType(q.Get("type"))}
	if err := f.Validate(); err != nil {
		return f, "", 0, err
	}
	limit, err := limitParam(q.Get("limit"), 200, 2000)
	return f, q.Get("text"), limit, err
}

func limitParam(s string, def, max int) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		return 0, teambus.Invalidf("invalid limit %q: 1 to %d", oneLine(s), max)
	}
	return n, nil
}

func (s *Server) handleMail(w http.ResponseWriter, r *http.Request) {
	id, ok := teamParam(w, r)
	if !ok {
		return
	}
	f, text, limit, err := mailFilter(r)
	if err != nil {
		httpError(w, err)
		return
	}
	text = strings.ToLower(text)
	writeTail(s, w, r, id, limit, func(ctx context.Context, ring *ring[teambus.Message]) error {
		return s.cfg.Service.ReplayMail(ctx, id, f, func(m teambus.Message) error {
			if text == "" || strings.Contains(strings.ToLower(m.Body), text) {
				ring.add(m)
			}
			return nil
		})
	})
}

func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	id, ok := teamParam(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	limit, err := limitParam(q.Get("limit"), 200, 2000)
	if err != nil {
		httpError(w, err)
		return
	}
	f := eventlog.EventFilter{Type: q.Get("type"), Agent: q.Get("agent")}
	if err := f.Validate(); err != nil {
		httpError(w, err)
		return
	}
	writeTail(s, w, r, id, limit, func(ctx context.Context, ring *ring[EventItem]) error {
		return s.cfg.Service.Events(id).Replay(ctx, f, func(rec *eventlog.EventRecord) error {
			ring.add(eventItem(rec))
			return nil
		})
	})
}

// writeTail answers with the last limit items replay adds to the ring, after
// checking that team id exists. The ring bounds memory by limit however
// long the stream is.
func writeTail[T any](s *Server, w http.ResponseWriter, r *http.Request, id string, limit int, replay func(context.Context, *ring[T]) error) {
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	if _, err := s.cfg.Service.Team(ctx, id); err != nil {
		httpError(w, err)
		return
	}
	ring := newRing[T](limit)
	if err := replay(ctx, ring); err != nil {
		httpError(w, err)
		return
	}
	writeJSON(w, ring.items())
}

// ActionResult is the answer to an operator action.
type ActionResult struct {
	Action string        `json:"action"`
	Task   *teambus.Task `json:"task,omitempty"`
	Member string        `json:"member,omitempty"`
	Detail string        `json:"detail"`
}

func (s *Server) handleTaskAction(w http.ResponseWriter, r *http.Request) {
	teamID, ok := s.actionTeam(w, r)
	if !ok {
		return
	}
	taskID, action := r.PathValue("task"), r.PathValue("action")
	if err := teambus.ValidateID("task", taskID); err != nil {
		httpError(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	var (
		t   *teambus.Task
		err error
	)
	switch action {
	case "release":
		t, err = s.release(ctx, teamID, taskID)
	case "pause":
		t, err = s.pause(ctx, teamID, taskID)
	default:
		http.Error(w, "404 unknown task action: release or pause", http.StatusNotFound)
		return
	}
	if err != nil {
		s.log.Info("ui action refused", "team", teamID, "task", taskID, "action", action, "err", err)
		httpError(w, err)
		return
	}
	s.cfg.Service.LogEvent(ctx, teamID, "ui.action", "", map[string]any{"action": action, "taskId": taskID, "status": t.Status, "remote": r.RemoteAddr})
	s.log.Info("ui action", "team", teamID, "task", taskID, "action", action, "status", t.Status)
	writeJSON(w, ActionResult{Action: action, Task: t, Detail: fmt.Sprintf("task %s is %s", t.ID, t.Status)})
}

// release requeues an active task with its checkpoint, acting as the lead.
func (s *Server) release(ctx context.Context, teamID, taskID string) (*teambus.Task, error) {
	return s.cfg.Service.OperatorRelease(ctx, teamID, taskID)
}

// pause stops a task that is not done until someone reopens it; pausing a
// paused task changes nothing.
func (s *Server) pause(ctx context.Context, teamID, taskID string) (*teambus.Task, error) {
	return s.cfg.Service.OperatorPause(ctx, teamID, taskID, "paused by an operator (teambus ui)")
}

func (s *Server) handleMemberAction(w http.ResponseWriter, r *http.Request) {
	teamID, ok := s.actionTeam(w, r)
	if !ok {
		return
	}
	memberID, action := r.PathValue("member"), r.PathValue("action")
	if err := teambus.ValidateMemberID(memberID); err != nil {
		httpError(w, err)
		return
	}
	if action != "probe" {
		http.Error(w, "404 unknown member action: probe", http.StatusNotFound)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	snap, err := s.cfg.Service.Snapshot(ctx, teamID)
	if err != nil {
		httpError(w, err)
		return
	}
	m, err := snap.Member(memberID)
	if err != nil {
		httpError(w, err)
		return
	}
	now := s.cfg.Service.Now()
	msgID := fmt.Sprintf("ui-probe/%s/%d/%d", m.ID, m.Epoch, now.UnixNano())
	body := "status check (operator, teambus ui): are you still working?"
	res, err := s.cfg.Service.Notify(ctx, teamID, teambus.Lead, snap.Team.LeadEpoch, m.ID, teambus.MsgStatusCheck, msgID, body, map[string]any{"reason": "operator"})
	if err != nil {
		httpError(w, err)
		return
	}
	s.cfg.Service.LogEvent(ctx, teamID, "ui.action", m.ID, map[string]any{"action": "probe", "name": m.ID, "epoch": m.Epoch, "remote": r.RemoteAddr})
	s.log.Info("ui action", "team", teamID, "member", m.ID, "action", "probe", "seq", res.Seq)
	writeJSON(w, ActionResult{Action: "probe", Member: m.ID, Detail: fmt.Sprintf("status check sent to %s (epoch %d)", m.ID, m.Epoch)})
}

// ring keeps the last n items added.
type ring[T any] struct {
	buf   []T
	start int
}

func newRing[T any](n int) *ring[T] { return &ring[T]{buf: make([]T, 0, n)} }

func (r *ring[T]) add(v T) {
	if len(r.buf) < cap(r.buf) {
		r.buf = append(r.buf, v)
		return
	}
	r.buf[r.start] = v
	r.start = (r.start + 1) % len(r.buf)
}

// items returns the items oldest first, never nil.
func (r *ring[T]) items() []T {
	out := make([]T, 0, len(r.buf))
	out = append(out, r.buf[r.start:]...)
	return append(out, r.buf[:r.start]...)
}
