package eventlog

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/teambus/teambus"
)

// Decision is what the resume analysis of seed 004 concludes.
type Decision string

// Decisions of the analysis (seed 004, phase 3).
const (
	// DecisionAutoResume: a checkpoint and no errors, blockers or failures
	// after it: resume from the checkpoint without asking.
	DecisionAutoResume Decision = "auto_resume"
	// DecisionNeedsDecision: issues after the last checkpoint (or a
	// checkpoint marked resumable:false): present them and ask.
	DecisionNeedsDecision Decision = "needs_decision"
	// DecisionNoCheckpoint: the session was interrupted before its first
	// checkpoint: present its state; restart from the beginning.
	DecisionNoCheckpoint Decision = "no_checkpoint"
	// DecisionClean: no session was interrupted; nothing to resume.
	DecisionClean Decision = "clean"
	// DecisionEmpty: the log holds no event at all (an empty file,
	// /dev/null, a team that logged nothing): nothing to analyze.
	DecisionEmpty Decision = "empty"
)

// Task statuses the analysis reconstructs, as seed 004 writes them.
const (
	TaskStateInProgress = "IN_PROGRESS"
	TaskStateComplete   = "COMPLETE"
	TaskStateFailed     = "FAILED"
	TaskStateAvailable  = "AVAILABLE"
	TaskStatePending    = "PENDING"
	TaskStateBlocked    = "BLOCKED"
	TaskStatePaused     = "PAUSED"
)

// AnalyzeOptions tune the analysis.
type AnalyzeOptions struct {
	// SID analyzes this session instead of the most recent interrupted
	// one, even when it ended normally.
	SID string
	// MaxListed caps each list of the result (issues, warnings, damaged
	// lines, duplicates); what is left out is counted in Omitted. 0 means
	// 1000.
	MaxListed int
}

// SessionSummary is one session of the log (seed 004's listSessions).
type SessionSummary struct {
	SID string `json:"sid"`
	// FirstTS and LastTS are the ts of the session's first and last event
	// in log order.
	FirstTS    time.Time `json:"first_ts"`
	LastTS     time.Time `json:"last_ts"`
	EventCount int64     `json:"event_count"`
	FirstSeq   int64     `json:"first_seq"`
	LastSeq    int64     `json:"last_seq"`
	HasStart   bool      `json:"has_start"`
	HasEnd     bool      `json:"has_end"`
	// Interrupted is true when the session has no session.end.
	Interrupted bool `json:"interrupted"`
	// Resumed is true when its session.start says command "resume".
	Resumed    bool  `json:"resumed"`
	Gaps       int   `json:"gaps"`
	Missing    int64 `json:"missing"`
	Duplicates int   `json:"duplicates"`
}

// Gap is a jump in a session's sequence numbers: events lost, most likely
// in a crash during a write (seed 004's detectGaps).
type Gap struct {
	AfterSeq     int64 `json:"after_seq"`
	ExpectedSeq  int64 `json:"expected_seq"`
	ActualSeq    int64 `json:"actual_seq"`
	MissingCount int64 `json:"missing_count"`
}

// Duplicate is an event line with the (sid, seq) of an earlier one. The
// later line wins (seed 004).
type Duplicate struct {
	SID string `json:"sid"`
	Seq int64  `json:"seq"`
	// Line is the later line, which replaces the earlier one.
	Line int64 `json:"line"`
}

// TaskState is a task's last known state in the analyzed session, rebuilt
// from its task.* events. Like seed 004's, each event replaces the record.
type TaskState struct {
	Status       string   `json:"status"`
	Agent        string   `json:"agent,omitempty"`
	Files        []string `json:"files,omitempty"`
	FilesChanged []string `json:"files_changed,omitempty"`
	Error        string   `json:"error,omitempty"`
	Attempts     *int64   `json:"attempts,omitempty"`
	// Seq and Event are the event that set this state.
	Seq   int64  `json:"seq"`
	Event string `json:"event"`
}

// Analysis is the result of seed 004's detection, analysis and decision
// over an event log (spec section 11).
type Analysis struct {
	// Sessions are all sessions of the log, most recent first (by the
	// position of their last event).
	Sessions []SessionSummary `json:"sessions"`
	// Interrupted is the session to resume: the most recent without a
	// session.end. Null when there is none.
	Interrupted *string `json:"interrupted"`
	// InterruptedSessions lists every session without session.end, most
	// recent first.
	InterruptedSessions []string `json:"interrupted_sessions"`
	// Analyzed is the session the fields below describe: Interrupted, or
	// the one AnalyzeOptions.SID named.
	Analyzed       *string              `json:"analyzed"`
	Gaps           []Gap                `json:"gaps"`
	LastCheckpoint *Event               `json:"last_checkpoint"`
	Tasks          map[string]TaskState `json:"tasks"`
	ActiveAgents   []string             `json:"active_agents"`
	// Issues are the error.encountered (unless resolved), blocker.reported,
	// task.failed and agent.crashed events after the last checkpoint.
	Issues []Event `json:"issues"`
	// Warnings are the warning.logged events after the last checkpoint.
	Warnings []Event `json:"warnings"`
	// Resolved are error.encountered events after the last checkpoint
	// marked resolved:true: reported, not issues.
	Resolved []Event  `json:"resolved"`
	Decision Decision `json:"decision"`
	// Reasons explain the decision, for people.
	Reasons []string `json:"reasons"`
	// Lines read (or stream messages), events decoded, blank lines.
	Lines  int64 `json:"lines"`
	Events int64 `json:"events"`
	Blank  int64 `json:"blank"`
	// Damaged lines were skipped: junk, truncated writes, not envelopes.
	Damaged []Damaged `json:"damaged"`
	// Duplicates are lines that replaced an earlier line of the same
	// (sid, seq).
	Duplicates []Duplicate `json:"duplicates"`
	// Omitted counts entries left out of a capped list, by list name.
	Omitted map[string]int64 `json:"omitted,omitempty"`
}

// Analyzer runs the analysis over events fed in log order. It keeps a
// summary per session, not the events: memory grows with the number of
// sessions, tasks and agents, and with the issues after each session's
// last checkpoint, not with the length of the log.
//
// The state of a session is dropped at its session.end, so memory holds
// the sessions still open. A log whose analyzed session holds duplicate
// (sid, seq) lines needs a second look to let the later line win exactly
// (and to rebuild a state dropped at a session.end that a later line
// undid): SecondPass returns an analyzer to feed the same log again, or
// nil when the first pass is exact, the common case. Callers must ask.
type Analyzer struct {
	opts     AnalyzeOptions
	sessions map[string]*sessionState
	order    []*sessionState
	lines    int64
	events   int64
	blank    int64
	damaged  capped[Damaged]
	dups     capped[Duplicate]

	// Second pass: only this session, lines it superseded skipped.
	first *Analyzer
	only  *sessionState
	exact *sessionAnalysis
}

// NewAnalyzer returns an analyzer.
func NewAnalyzer(opts AnalyzeOptions) *Analyzer {
	if opts.MaxListed <= 0 {
		opts.MaxListed = 1000
	}
	return &Analyzer{opts: opts, sessions: map[string]*sessionState{},
		damaged: capped[Damaged]{max: opts.MaxListed}, dups: capped[Duplicate]{max: opts.MaxListed}}
}

type sessionState struct {
	sid               string
	firstTS, lastTS   time.Time
	lastPos           int64
	hasStart, resumed bool
	// ends are the positions of session.end lines, by seq.
	ends map[int64]int64
	seqs SeqSet
	// dups holds, for every seq seen more than once, the position of its
	// last line.
	dups  map[int64]int64
	ndups int
	an    *sessionAnalysis
	// dropped is set when an was dropped at a session.end.
	dropped bool
}

// Line counts a line read (the reader's count is used when given).
func (a *Analyzer) Line() { a.lines++ }

// AddDamaged records a line that is not an event.
func (a *Analyzer) AddDamaged(d Damaged) {
	if a.first == nil {
		a.damaged.add(d)
	}
}

// Add feeds one event at pos, its line number or stream sequence; pos
// grows along the log. e.Data may alias a buffer the caller reuses.
func (a *Analyzer) Add(pos int64, e *Event) {
	if a.first != nil {
		a.addSecond(pos, e)
		return
	}
	a.events++
	st := a.sessions[e.SID]
	if st == nil {
		st = &sessionState{sid: e.SID, firstTS: e.TS.UTC(), an: newSessionAnalysis(a.opts.MaxListed)}
		a.sessions[e.SID] = st
		a.order = append(a.order, st)
	}
	if st.seqs.Add(e.Seq) {
		if st.dups == nil {
			st.dups = map[int64]int64{}
		}
		st.dups[e.Seq] = pos
		st.ndups++
		a.dups.add(Duplicate{SID: e.SID, Seq: e.Seq, Line: pos})
	}
	st.lastTS, st.lastPos = e.TS.UTC(), pos
	switch e.Type {
	case EvSessionStart:
		st.hasStart = true
		if readData(e.Data).command == "resume" {
			st.resumed = true
		}
	case EvSessionEnd:
		if st.ends == nil {
			st.ends = map[int64]int64{}
		}
		st.ends[e.Seq] = pos
		if a.opts.SID != st.sid {
			// An ended session is not resumed: its state is dropped, so
			// memory holds the sessions still open, not every session of
			// the log. (Should a later duplicate undo this session.end, the
			// second pass rebuilds the state.)
			st.an, st.dropped = nil, true
		}
	}
	if st.an != nil {
		st.an.apply(e)
	}
}

func (a *Analyzer) addSecond(pos int64, e *Event) {
	if e.SID != a.only.sid {
		return
	}
	if last, ok := a.only.dups[e.Seq]; ok && last != pos {
		return // superseded by a later line
	}
	a.exact.apply(e)
}

// hasEnd reports whether a session.end line of the session survives the
// duplicate rule: it is the last line of its seq.
func (st *sessionState) hasEnd() bool {
	for seq, pos := range st.ends {
		if last, ok := st.dups[seq]; !ok || last == pos {
			return true
		}
	}
	return false
}

// SecondPass returns an analyzer to feed the same log again when the
// analyzed session has duplicate lines, or nil when the result is exact
// already.
func (a *Analyzer) SecondPass() *Analyzer {
	if a.first != nil {
		return nil
	}
	st := a.chosen()
	if st == nil || (st.ndups == 0 && !st.dropped) {
		return nil
	}
	return &Analyzer{opts: a.opts, first: a, only: st, exact: newSessionAnalysis(a.opts.MaxListed)}
}

// recent returns the sessions, most recent first.
func (a *Analyzer) recent() []*sessionState {
	out := append([]*sessionState(nil), a.order...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].lastPos > out[j].lastPos })
	return out
}

// chosen is the session to analyze: the one named, else the most recent
// interrupted one.
func (a *Analyzer) chosen() *sessionState {
	if a.opts.SID != "" {
		return a.sessions[a.opts.SID]
	}
	for _, st := range a.recent() {
		if !st.hasEnd() {
			return st
		}
	}
	return nil
}

// Result returns the analysis. Asked of a second-pass analyzer it is the
// first pass's result with the analyzed session's state made exact.
func (a *Analyzer) Result() (*Analysis, error) {
	if a.first != nil {
		res, err := a.first.Result()
		if err != nil {
			return nil, err
		}
		a.exact.fill(res)
		decide(res, a.only, a.exact)
		return res, nil
	}
	res := &Analysis{Sessions: []SessionSummary{}, InterruptedSessions: []string{}, Gaps: []Gap{},
		Tasks: map[string]TaskState{}, ActiveAgents: []string{}, Issues: []Event{}, Warnings: []Event{}, Resolved: []Event{},
		Reasons: []string{}, Lines: a.lines, Events: a.events, Blank: a.blank}
	res.Damaged = a.damaged.list()
	res.Duplicates = a.dups.list()
	a.damaged.omitted(res, "damaged")
	a.dups.omitted(res, "duplicates")
	for _, st := range a.recent() {
		sum := st.summary()
		res.Sessions = append(res.Sessions, sum)
		if sum.Interrupted {
			res.InterruptedSessions = append(res.InterruptedSessions, st.sid)
		}
	}
	if a.opts.SID != "" && a.sessions[a.opts.SID] == nil {
		return nil, teambus.NotFoundf("no events of session %q in the log", clip(a.opts.SID))
	}
	if len(res.InterruptedSessions) > 0 {
		sid := res.InterruptedSessions[0]
		res.Interrupted = &sid
	}
	st := a.chosen()
	if st == nil && len(res.Sessions) == 0 {
		res.Decision = DecisionEmpty
		res.Reasons = append(res.Reasons, "the log holds no events: nothing to analyze (is it the right file or team?)")
		return res, nil
	}
	if st == nil {
		res.Decision = DecisionClean
		res.Reasons = append(res.Reasons, "every session ended with session.end: nothing to resume")
		return res, nil
	}
	sid := st.sid
	res.Analyzed = &sid
	for i, r := range st.seqs.iv {
		if i > 0 {
			prev := st.seqs.iv[i-1].hi
			res.Gaps = append(res.Gaps, Gap{AfterSeq: prev, ExpectedSeq: prev + 1, ActualSeq: r.lo, MissingCount: r.lo - prev - 1})
		}
	}
	an := st.an
	if an == nil {
		an = newSessionAnalysis(a.opts.MaxListed) // dropped: SecondPass rebuilds it
	}
	an.fill(res)
	decide(res, st, an)
	return res, nil
}

func (st *sessionState) summary() SessionSummary {
	s := SessionSummary{SID: st.sid, FirstTS: st.firstTS, LastTS: st.lastTS, EventCount: st.seqs.Len(),
		HasStart: st.hasStart, HasEnd: st.hasEnd(), Resumed: st.resumed, Duplicates: st.ndups}
	s.Interrupted = !s.HasEnd
	if n := len(st.seqs.iv); n > 0 {
		s.FirstSeq, s.LastSeq = st.seqs.iv[0].lo, st.seqs.iv[n-1].hi
		s.Gaps = n - 1
		s.Missing = s.LastSeq - s.FirstSeq + 1 - s.EventCount
	}
	return s
}

// decide is seed 004's decision flow for the analyzed session.
func decide(res *Analysis, st *sessionState, an *sessionAnalysis) {
	res.Reasons = res.Reasons[:0]
	if st.hasEnd() {
		res.Decision = DecisionClean
		res.Reasons = append(res.Reasons, fmt.Sprintf("session %s ended with session.end: nothing to resume", st.sid))
		return
	}
	if len(res.Gaps) > 0 {
		var missing int64
		for _, g := range res.Gaps {
			missing += g.MissingCount
		}
		res.Reasons = append(res.Reasons, fmt.Sprintf("%d event(s) missing in %d gap(s): the reconstructed state may be incomplete; the checkpoint is the known-good anchor", missing, len(res.Gaps)))
	}
	if an.cp == nil {
		res.Decision = DecisionNoCheckpoint
		res.Reasons = append(res.Reasons, fmt.Sprintf("session %s was interrupted before its first checkpoint: restart from the beginning (its plan is available for reference)", st.sid))
		return
	}
	d := readData(an.cp.Data)
	label := d.label
	if label == "" && an.cp.Type == EvTaskCheckpoint && d.taskID != "" {
		label = "task " + d.taskID
	}
	if label == "" {
		label = fmt.Sprintf("seq %d", an.cp.Seq)
	}
	n := an.issues.total()
	switch {
	case n > 0:
		res.Decision = DecisionNeedsDecision
		res.Reasons = append(res.Reasons, fmt.Sprintf("%d issue(s) after checkpoint %q (seq %d): fix and restart, continue past them, or give instructions", n, label, an.cp.Seq))
	case d.resumable != nil && !*d.resumable:
		res.Decision = DecisionNeedsDecision
		res.Reasons = append(res.Reasons, fmt.Sprintf("checkpoint %q (seq %d) is marked resumable:false", label, an.cp.Seq))
	default:
		res.Decision = DecisionAutoResume
		next := ""
		if d.planStep != "" {
			next = ": next step " + d.planStep
		}
		res.Reasons = append(res.Reasons, fmt.Sprintf("no unresolved errors, blockers or failures after checkpoint %q (seq %d): resume from it automatically%s", label, an.cp.Seq, next))
	}
	if r := an.resolved.total(); r > 0 {
		res.Reasons = append(res.Reasons, fmt.Sprintf("%d error(s) after the checkpoint were marked resolved", r))
	}
}

// sessionAnalysis is the state of one session rebuilt from its events.
type sessionAnalysis struct {
	cp       *Event
	tasks    map[string]TaskState
	agents   map[string]bool // name → active
	agentSeq []string        // names in order of first spawn
	issues   capped[Event]
	warnings capped[Event]
	resolved capped[Event]
}

func newSessionAnalysis(max int) *sessionAnalysis {
	return &sessionAnalysis{tasks: map[string]TaskState{}, agents: map[string]bool{},
		issues: capped[Event]{max: max}, warnings: capped[Event]{max: max}, resolved: capped[Event]{max: max}}
}

// after reports whether e comes after the last checkpoint.
func (an *sessionAnalysis) after(e *Event) bool {
	return an.cp == nil || e.Seq > an.cp.Seq
}

func (an *sessionAnalysis) apply(e *Event) {
	switch {
	case e.Type == EvCheckpoint || e.Type == EvTaskCheckpoint:
		// A member's task checkpoint is a safe point too: the sidecars
		// of a live team write these, not the lead's checkpoint.
		if an.cp == nil || e.Seq >= an.cp.Seq {
			cp := copyEvent(e)
			an.cp = &cp
			keep := func(x *Event) bool { return x.Seq > e.Seq }
			an.issues.filter(keep)
			an.warnings.filter(keep)
			an.resolved.filter(keep)
		}
		return
	case strings.HasPrefix(e.Type, "task."):
		an.task(e)
	case strings.HasPrefix(e.Type, "agent."):
		an.agent(e)
	}
	switch e.Type {
	case EvErrorEncountered:
		if an.after(e) {
			if r := readData(e.Data).resolved; r != nil && *r {
				an.resolved.add(copyEvent(e))
			} else {
				an.issues.add(copyEvent(e))
			}
		}
	case EvBlockerReported, EvTaskFailed, EvAgentCrashed:
		if an.after(e) {
			an.issues.add(copyEvent(e))
		}
	case EvWarningLogged:
		if an.after(e) {
			an.warnings.add(copyEvent(e))
		}
	}
}

func (an *sessionAnalysis) task(e *Event) {
	d := readData(e.Data)
	if d.taskID == "" {
		return
	}
	ts := TaskState{Seq: e.Seq, Event: e.Type}
	agent := d.agent
	if agent == "" {
		agent = e.Agent
	}
	switch e.Type {
	case EvTaskStarted, EvTaskClaimed:
		ts.Status, ts.Agent, ts.Files = TaskStateInProgress, agent, d.files
	case EvTaskCompleted:
		ts.Status, ts.FilesChanged = TaskStateComplete, d.filesChanged
	case EvTaskFailed:
		ts.Status, ts.Error, ts.Attempts = TaskStateFailed, d.errText, d.attempts
	case EvTaskAdded:
		ts.Status = TaskStateAvailable
		if strings.EqualFold(d.status, "pending") {
			ts.Status = TaskStatePending
		}
	case EvTaskReleased, EvTaskRequeued, EvTaskReopened, EvTaskUnblocked:
		ts.Status = TaskStateAvailable
		if strings.EqualFold(d.status, "pending") {
			ts.Status = TaskStatePending
		}
	case EvTaskBlocked:
		ts.Status, ts.Agent = TaskStateBlocked, agent
	case EvTaskPaused:
		ts.Status, ts.Error = TaskStatePaused, d.errText
	case EvTaskReassigned:
		ts.Status, ts.Agent = TaskStateInProgress, d.to
	default:
		return // task.checkpoint and other progress notes change no state
	}
	an.tasks[d.taskID] = ts
}

func (an *sessionAnalysis) agent(e *Event) {
	var active bool
	switch e.Type {
	case EvAgentSpawned:
		active = true
	case EvAgentCompleted, EvAgentCrashed:
	default:
		return
	}
	name := readData(e.Data).name
	if name == "" {
		name = e.Agent
	}
	if name == "" {
		return
	}
	if _, seen := an.agents[name]; !seen {
		an.agentSeq = append(an.agentSeq, name)
	}
	an.agents[name] = active
}

// fill writes the session's state into res.
func (an *sessionAnalysis) fill(res *Analysis) {
	res.LastCheckpoint = an.cp
	res.Tasks = an.tasks
	res.ActiveAgents = []string{}
	for _, name := range an.agentSeq {
		if an.agents[name] {
			res.ActiveAgents = append(res.ActiveAgents, name)
		}
	}
	res.Issues, res.Warnings, res.Resolved = an.issues.list(), an.warnings.list(), an.resolved.list()
	if res.Omitted != nil {
		delete(res.Omitted, "issues")
		delete(res.Omitted, "warnings")
		delete(res.Omitted, "resolved")
	}
	an.issues.omitted(res, "issues")
	an.warnings.omitted(res, "warnings")
	an.resolved.omitted(res, "resolved")
}

func copyEvent(e *Event) Event {
	c := *e
	if e.Data != nil {
		c.Data = append([]byte(nil), e.Data...)
	}
	return c
}

// capped keeps the last max entries added and counts the ones it dropped.
type capped[T any] struct {
	max     int
	items   []T
	dropped int64
}

func (c *capped[T]) add(v T) {
	c.items = append(c.items, v)
	if len(c.items) >= 2*c.max {
		n := len(c.items) - c.max
		c.dropped += int64(n)
		c.items = append(c.items[:0:0], c.items[n:]...)
	}
}

// filter keeps the entries keep accepts. Entries dropped earlier were
// older than every kept one, so a filter that drops kept entries drops
// them too.
func (c *capped[T]) filter(keep func(*T) bool) {
	out := c.items[:0]
	removed := false
	for i := range c.items {
		if keep(&c.items[i]) {
			out = append(out, c.items[i])
		} else {
			removed = true
		}
	}
	clear(c.items[len(out):])
	c.items = out
	if removed || len(out) == 0 {
		c.dropped = 0
	}
}

func (c *capped[T]) total() int64 { return int64(len(c.items)) + c.dropped }

func (c *capped[T]) list() []T {
	n := len(c.items)
	start := max(n-c.max, 0)
	out := make([]T, n-start)
	copy(out, c.items[start:])
	return out
}

func (c *capped[T]) omitted(res *Analysis, name string) {
	n := c.dropped + int64(max(len(c.items)-c.max, 0))
	if n == 0 {
		return
	}
	if res.Omitted == nil {
		res.Omitted = map[string]int64{}
	}
	res.Omitted[name] = n
}

// SeqSet is a set of sequence numbers kept as sorted, disjoint ranges: a
// session's contiguous seqs cost one range however many there are.
type SeqSet struct {
	iv []seqRange
}

type seqRange struct{ lo, hi int64 }

// Add inserts s and reports whether it was there already.
func (ss *SeqSet) Add(s int64) bool {
	n := len(ss.iv)
	if n == 0 || s > ss.iv[n-1].hi+1 {
		ss.iv = append(ss.iv, seqRange{s, s})
		return false
	}
	if s == ss.iv[n-1].hi+1 {
		ss.iv[n-1].hi = s
		return false
	}
	i := sort.Search(n, func(i int) bool { return ss.iv[i].hi >= s })
	if s >= ss.iv[i].lo {
		return true
	}
	joinPrev := i > 0 && ss.iv[i-1].hi == s-1
	joinNext := ss.iv[i].lo == s+1
	switch {
	case joinPrev && joinNext:
		ss.iv[i-1].hi = ss.iv[i].hi
		ss.iv = append(ss.iv[:i], ss.iv[i+1:]...)
	case joinPrev:
		ss.iv[i-1].hi = s
	case joinNext:
		ss.iv[i].lo = s
	default:
		ss.iv = append(ss.iv, seqRange{})
		copy(ss.iv[i+1:], ss.iv[i:])
		ss.iv[i] = seqRange{s, s}
	}
	return false
}

// Len returns the number of sequence numbers in the set.
func (ss *SeqSet) Len() int64 {
	var n int64
	for _, r := range ss.iv {
		n += r.hi - r.lo + 1
	}
	return n
}

// Has reports whether s is in the set.
func (ss *SeqSet) Has(s int64) bool {
	i := sort.Search(len(ss.iv), func(i int) bool { return ss.iv[i].hi >= s })
	return i < len(ss.iv) && s >= ss.iv[i].lo
}

// evData is what the analysis reads from an event's data.
type evData struct {
	taskID, agent, name, errText, to, status, command, label, planStep string
	files, filesChanged                                                []string
	attempts                                                           *int64
	resolved, resumable                                                *bool
}

// readData reads the fields the analysis uses from an event's data; other
// fields, and data that is not an object, are ignored.
func readData(data []byte) evData {
	var d evData
	if len(data) == 0 || data[0] != '{' {
		return d
	}
	s := jscan{b: data}
	_ = s.object(func(key []byte, esc bool) error {
		if esc {
			key = decodeStr(key, true)
		}
		var err error
		switch string(key) {
		case "taskId", "task_id":
			d.taskID, err = s.text()
		case "agent":
			d.agent, err = s.text()
		case "name":
			d.name, err = s.text()
		case "error":
			d.errText, err = s.text()
		case "to":
			d.to, err = s.text()
		case "status":
			d.status, err = s.text()
		case "command":
			d.command, err = s.text()
		case "label":
			d.label, err = s.text()
		case "plan_step":
			d.planStep, err = s.text()
		case "files":
			d.files, err = s.strings()
		case "files_changed":
			d.filesChanged, err = s.strings()
		case "attempts":
			var n int64
			var ok bool
			if n, ok, err = s.intOrNull("attempts"); ok {
				d.attempts = &n
			}
		case "resolved":
			d.resolved, err = s.boolean()
		case "resumable":
			d.resumable, err = s.boolean()
		default:
			err = s.value()
		}
		if _, ok := err.(*typeError); ok {
			return nil
		}
		return err
	})
	return d
}

// text reads a string, or a number as its text; anything else is "".
func (s *jscan) text() (string, error) {
	if s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			raw, esc, err := s.str()
			return string(decodeStr(raw, esc)), err
		case c == '-' || c >= '0' && c <= '9':
			tok, err := s.number()
			return string(tok), err
		}
	}
	return "", s.value()
}

// strings reads an array of strings; other elements are skipped.
func (s *jscan) strings() ([]string, error) {
	if s.i >= len(s.b) || s.b[s.i] != '[' {
		return nil, s.value()
	}
	done, err := s.open(']')
	if err != nil {
		return nil, err
	}
	out := []string{}
	for !done {
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == '"' {
			raw, esc, err := s.str()
			if err != nil {
				return nil, err
			}
			out = append(out, string(decodeStr(raw, esc)))
		} else if err := s.value(); err != nil {
			return nil, err
		}
		if done, err = s.next(']', "after array element"); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// boolean reads true or false; anything else is nil.
func (s *jscan) boolean() (*bool, error) {
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case 't':
			v := true
			return &v, s.lit("true")
		case 'f':
			v := false
			return &v, s.lit("false")
		}
	}
	return nil, s.value()
}

// AnalyzeJSONL runs the analysis over the JSON Lines log that open
// returns. open is called once, or twice when the analyzed session has
// duplicate lines (so the later line wins exactly); each reader it returns
// is closed.
func AnalyzeJSONL(open func() (io.ReadCloser, error), opts AnalyzeOptions) (*Analysis, error) {
	a := NewAnalyzer(opts)
	if err := feedJSONL(open, a); err != nil {
		return nil, err
	}
	if b := a.SecondPass(); b != nil {
		if err := feedJSONL(open, b); err != nil {
			return nil, err
		}
		return b.Result()
	}
	return a.Result()
}

func feedJSONL(open func() (io.ReadCloser, error), a *Analyzer) error {
	rc, err := open()
	if err != nil {
		return err
	}
	defer rc.Close()
	er := NewReader(rc)
	er.OnDamaged = a.AddDamaged
	for er.Next() {
		a.Add(er.Line(), er.Event())
	}
	a.lines, a.blank = er.Lines, er.Blank
	if err := er.Err(); err != nil {
		return fmt.Errorf("read event log: %w", err)
	}
	return nil
}
