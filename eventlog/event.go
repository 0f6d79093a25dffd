package eventlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/teambus/teambus"
)

// Event is one line of an event log, in the envelope of seed 004:
//
//	{"v":1,"ts":"2026-02-14T10:00:00.000Z","sid":"f4e3d2c1","seq":0,"type":"session.start",
//	 "feature":"auth-system","agent":null,"pane_id":null,"data":{...}}
//
// SID names the session that wrote the event and Seq counts that
// session's events from 0; (SID, Seq) identifies an event. An empty
// Feature, Agent or PaneID is null in JSON, and nil Data is null.
//
// MarshalJSON writes the canonical form: the fields in the order above,
// compact, ts in UTC with at least millisecond digits. Event logs that
// teambus stores keep each imported line exactly as it was written, so an
// import followed by an export gives the same bytes; events teambus
// writes itself are in the canonical form.
type Event struct {
	V       int             `json:"v"`
	TS      time.Time       `json:"ts"`
	SID     string          `json:"sid"`
	Seq     int64           `json:"seq"`
	Type    string          `json:"type"`
	Feature string          `json:"feature"`
	Agent   string          `json:"agent"`
	PaneID  string          `json:"pane_id"`
	Data    json.RawMessage `json:"data"`
}

// Version is the envelope version teambus writes.
const Version = 1

// AutoSeq as an event's Seq asks the event log to assign the session's
// next sequence number.
const AutoSeq int64 = -1

// Limits of events.
const (
	// MaxSize is the largest event line, in bytes.
	MaxSize = 256 << 10
	// MaxField is the longest feature, agent or pane id, in bytes.
	MaxField = 128
	// MaxType is the longest event type, in bytes.
	MaxType = 64
)

// Event types of seed 004, which agents and their hooks log.
const (
	EvSessionStart     = "session.start"     // a session began; data.command "resume" marks a resumed one
	EvSessionEnd       = "session.end"       // a session ended normally; its absence means it was interrupted
	EvPlanCreated      = "plan.created"      // the plan: tasks, waves, dependencies
	EvAgentSpawned     = "agent.spawned"     // data.name started (teambus: a member incarnation registered)
	EvAgentCompleted   = "agent.completed"   // data.name finished (teambus: a member shut down cleanly)
	EvAgentCrashed     = "agent.crashed"     // data.name died (teambus: a crash was counted) — an issue
	EvTaskStarted      = "task.started"      // data.taskId in progress
	EvTaskCompleted    = "task.completed"    // data.taskId done
	EvTaskFailed       = "task.failed"       // data.taskId failed — an issue
	EvBranchMerged     = "branch.merged"     // a work branch was merged
	EvCheckpoint       = "checkpoint"        // a safe point to resume from: data.label, plan_step, resumable
	EvErrorEncountered = "error.encountered" // an error; an issue unless data.resolved is true
	EvBlockerReported  = "blocker.reported"  // a blocker — an issue
	EvWarningLogged    = "warning.logged"    // a warning, reported for context
)

// Event types teambus logs itself, besides session.start and session.end
// of every sidecar run and of the team, agent.spawned, agent.completed,
// agent.crashed, task.completed, task.failed and checkpoint. Task events
// carry data.taskId and member events data.name, like seed 004's.
const (
	EvTaskAdded       = "task.added"         // a task was added: data.taskId, summary, dependencies, status
	EvTaskClaimed     = "task.claimed"       // a member claimed a task (counts as started)
	EvTaskBlocked     = "task.blocked"       // the holder blocked its task: data.on, reason
	EvTaskReleased    = "task.released"      // the holder gave its task back to the queue
	EvTaskRequeued    = "task.requeued"      // the lead or a crash put a task back in the queue
	EvTaskReassigned  = "task.reassigned"    // the task was handed to data.to
	EvTaskReopened    = "task.reopened"      // a finished task went back to the queue
	EvTaskPaused      = "task.paused"        // paused after repeated crashes or failures
	EvTaskUnblocked   = "task.unblocked"     // its dependencies completed: available
	EvTaskCheckpoint  = "task.checkpoint"    // a member recorded progress on its task
	EvMemberZombie    = "member.zombie"      // a teammate entered zombie mode (lead gone)
	EvMemberUnzombie  = "member.unzombie"    // it left zombie mode (a lead re-attached)
	EvLeadAttached    = "lead.attached"      // a lead attached or re-attached: data.session, epoch, decision
	EvLeadTakeover    = "lead.takeover"      // a new lead session fenced the old one: data.old_session
	EvEscalation      = "escalation"         // the lead was asked to decide (crash limit passed)
	EvTeamConsolidate = "team.consolidating" // the lead started consolidating: data.worktree
	EvTeamComplete    = "team.complete"      // the team completed (then session.end of the team session)
	EvTeamAborted     = "team.aborted"       // the team was aborted (then session.end of the team session)
	EvStateRepaired   = "state.repaired"     // `team repair` restored or deleted a damaged state record: data.key, action
)

// Event types of spawning and hosts (teambus spawn, teambus host).
const (
	EvMemberSpawned   = "member.spawned"   // a member's session was started: data.name, host, machine, mode, pid, from
	EvMemberRespawned = "member.respawned" // a crashed member was restarted: data.name, crashed_epoch, host, from (transcript|brief), note
	EvHostJoined      = "host.joined"      // a teambus host began serving the team: data.host, machine, max
	EvHostLost        = "host.lost"        // a host's registration expired: data.host, crashed (members judged crashed)
	// EvMemberSpawnFailed: a claimed start could not run (data.error); the
	// claim was given back.
	EvMemberSpawnFailed = "member.spawn_failed"
)

var eventTypeRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$`) })

// TypeRule describes the event type rule for error messages.
const TypeRule = "lowercase words of a-z 0-9 _ separated by dots, starting with a letter, at most 64 bytes (e.g. task.started)"

// ValidType reports whether t follows the event type rule.
func ValidType(t string) bool {
	return len(t) <= MaxType && eventTypeRE().MatchString(t)
}

// ValidateType checks the type of an event teambus is asked to write.
func ValidateType(t string) error {
	if !ValidType(t) {
		return teambus.Invalidf("invalid event type %q: %s", clip(t), TypeRule)
	}
	return nil
}

// Validate checks an event before it is written: the type rule, a session
// id as for --session, a sequence (or AutoSeq), short single-line feature,
// agent and pane id, and data that is valid JSON.
func (e *Event) Validate() error {
	if e.V < 0 {
		return teambus.Invalidf("invalid event version %d", e.V)
	}
	if err := ValidateType(e.Type); err != nil {
		return err
	}
	switch {
	case e.SID == "":
		return teambus.Invalidf("invalid event sid: empty (pass --sid, or --session / TEAMBUS_SESSION)")
	case len(e.SID) > teambus.MaxSessionLen:
		return teambus.Invalidf("invalid event sid: %d bytes, at most %d", len(e.SID), teambus.MaxSessionLen)
	case !teambus.Printable(e.SID):
		return teambus.Invalidf("invalid event sid %q: only printable characters", clip(e.SID))
	}
	if e.Seq < AutoSeq {
		return teambus.Invalidf("invalid event seq %d: 0 or more", e.Seq)
	}
	for _, f := range []struct{ name, v string }{{"feature", e.Feature}, {"agent", e.Agent}, {"pane_id", e.PaneID}} {
		if len(f.v) > MaxField {
			return teambus.Invalidf("invalid event %s: %d bytes, at most %d", f.name, len(f.v), MaxField)
		}
		if !teambus.Printable(f.v) {
			return teambus.Invalidf("invalid event %s %q: only printable characters", f.name, clip(f.v))
		}
	}
	if len(e.Data) > 0 && !json.Valid(e.Data) {
		return teambus.Invalidf("invalid event data: not valid JSON")
	}
	if n := len(e.AppendJSON(nil)); n > MaxSize {
		return teambus.Invalidf("event is %d bytes, at most %d: put large content in a file and log its path", n, MaxSize)
	}
	return nil
}

// AppendJSON appends the canonical encoding of e, without a newline.
func (e *Event) AppendJSON(b []byte) []byte {
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(e.V), 10)
	b = append(b, `,"ts":"`...)
	b = AppendTime(b, e.TS)
	b = append(b, `","sid":`...)
	b = appendJSONString(b, e.SID)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, e.Seq, 10)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, e.Type)
	b = append(b, `,"feature":`...)
	b = appendNullString(b, e.Feature)
	b = append(b, `,"agent":`...)
	b = appendNullString(b, e.Agent)
	b = append(b, `,"pane_id":`...)
	b = appendNullString(b, e.PaneID)
	b = append(b, `,"data":`...)
	switch {
	case len(e.Data) == 0:
		b = append(b, "null"...)
	case bytes.ContainsAny(e.Data, "\r\n\t"):
		var buf bytes.Buffer
		if json.Compact(&buf, e.Data) == nil {
			b = append(b, buf.Bytes()...)
		} else {
			b = append(b, "null"...)
		}
	default:
		b = append(b, e.Data...)
	}
	return append(b, '}')
}

// MarshalJSON returns the canonical encoding of e.
func (e Event) MarshalJSON() ([]byte, error) {
	return e.AppendJSON(nil), nil
}

// UnmarshalJSON decodes an event envelope as Parse does.
func (e *Event) UnmarshalJSON(b []byte) error {
	ev, err := Parse(b)
	if err != nil {
		return err
	}
	*e = ev
	return nil
}

// AppendTime appends t in UTC as RFC 3339 with at least millisecond
// digits, as JavaScript's toISOString writes it: 2026-02-14T10:00:00.000Z
// (an instant outside the UTC years 0000-9999 keeps its own offset).
func AppendTime(b []byte, t time.Time) []byte {
	zone := "Z"
	if u := t.UTC(); u.Year() >= 0 && u.Year() <= 9999 {
		t = u
	} else {
		// An instant whose UTC year RFC 3339 can not write (0000-01-01
		// at +00:10 is the year -1 in UTC) keeps the offset it was read
		// with, so the line still parses back to the same instant.
		zone = t.Format("Z07:00")
	}
	b = t.AppendFormat(b, "2006-01-02T15:04:05")
	ns := t.Nanosecond()
	switch {
	case ns%1e6 == 0:
		b = appendFrac(b, ns/1e6, 3)
	case ns%1e3 == 0:
		b = appendFrac(b, ns/1e3, 6)
	default:
		b = appendFrac(b, ns, 9)
	}
	return append(b, zone...)
}

func appendFrac(b []byte, v, digits int) []byte {
	b = append(b, '.')
	var d [9]byte
	for i := digits - 1; i >= 0; i-- {
		d[i] = byte('0' + v%10)
		v /= 10
	}
	return append(b, d[:digits]...)
}

func appendNullString(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendJSONString(b, s)
}

const hexDigits = "0123456789abcdef"

// clip shortens s for an error message, as the root package does.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// appendJSONString appends s as a JSON string the way encoding/json does
// without HTML escaping: control characters, quote and backslash escaped,
// U+2028 and U+2029 escaped, invalid UTF-8 as U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// ParseError says why a line is not an event: it is not JSON (Malformed),
// or it is JSON but not an event envelope.
type ParseError struct {
	Malformed bool
	// Truncated is set when the JSON ended too early: a write cut short.
	Truncated bool
	Msg       string
}

func (e *ParseError) Error() string {
	if e.Malformed {
		return "malformed JSON: " + e.Msg
	}
	return "not an event: " + e.Msg
}

// Unwrap classifies the error as bad input.
func (e *ParseError) Unwrap() error { return teambus.ErrInvalid }

// Parse decodes one JSON line into an event. It requires a JSON
// object with a non-empty string sid and type, an integer seq of 0 or more
// and an RFC 3339 ts; v is an integer; feature, agent and pane_id are
// strings or null; data is any JSON value; other fields are ignored. Keys
// match exactly (case-sensitive) and the last of duplicate keys wins.
func Parse(line []byte) (Event, error) {
	var e Event
	if err := parseEvent(line, &e, nil); err != nil {
		return Event{}, err
	}
	if e.Data != nil {
		e.Data = append(json.RawMessage(nil), e.Data...)
	}
	return e, nil
}

// Decoder decodes event lines like Parse without copying: the
// Data of a decoded event aliases the line, and the strings that repeat
// from line to line are shared. For reading large logs.
type Decoder struct {
	in interner
}

// Decode decodes line into e; e.Data aliases line.
func (d *Decoder) Decode(line []byte, e *Event) error {
	if d.in == nil {
		d.in = interner{}
	}
	return parseEvent(line, e, d.in)
}

// interner shares the strings that repeat from line to line (session ids,
// types, agents), so reading a large log does not allocate them again.
type interner map[string]string

func (in interner) str(b []byte) string {
	if in == nil {
		return string(b)
	}
	if s, ok := in[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(in) < 8192 {
		in[s] = s
	}
	return s
}

// parseEvent decodes line into e. e.Data aliases line.
func parseEvent(line []byte, e *Event, in interner) error {
	*e = Event{}
	s := jscan{b: line}
	s.ws()
	if s.i >= len(line) {
		return &ParseError{Malformed: true, Truncated: true, Msg: "empty"}
	}
	if line[s.i] != '{' {
		if err := s.value(); err != nil {
			return syntaxErr(err)
		}
		if err := s.end(); err != nil {
			return syntaxErr(err)
		}
		return &ParseError{Msg: "not a JSON object"}
	}
	var (
		hasSeq  bool
		tsRaw   []byte
		typeErr *typeError
	)
	err := s.object(func(key []byte, esc bool) error {
		if esc {
			key = decodeStr(key, true)
		}
		var (
			b   []byte
			err error
		)
		switch string(key) {
		case "v":
			var n int64
			n, _, err = s.intOrNull("v")
			if err == nil && (n > 1<<31-1 || n < -1<<31) {
				err = &typeError{"v", "a small integer"}
			}
			e.V = int(n)
		case "ts":
			tsRaw, err = s.strOrNull("ts")
		case "sid":
			b, err = s.strOrNull("sid")
			e.SID = in.str(b)
		case "seq":
			e.Seq, hasSeq, err = s.intOrNull("seq")
		case "type":
			b, err = s.strOrNull("type")
			e.Type = in.str(b)
		case "feature":
			b, err = s.strOrNull("feature")
			e.Feature = in.str(b)
		case "agent":
			b, err = s.strOrNull("agent")
			e.Agent = in.str(b)
		case "pane_id":
			b, err = s.strOrNull("pane_id")
			e.PaneID = in.str(b)
		case "data":
			b, err = s.raw()
			if string(b) == "null" {
				b = nil
			}
			e.Data = b
		default:
			err = s.value()
		}
		// A value of the wrong type is read whole: keep checking the
		// syntax, so a line cut short is reported as such.
		if te, ok := err.(*typeError); ok {
			if typeErr == nil {
				typeErr = te
			}
			return nil
		}
		return err
	})
	if err == nil {
		err = s.end()
	}
	if err != nil {
		return syntaxErr(err)
	}
	if typeErr != nil {
		return &ParseError{Msg: typeErr.Error()}
	}
	switch {
	case e.SID == "":
		return &ParseError{Msg: "missing sid"}
	case !hasSeq:
		return &ParseError{Msg: "missing seq"}
	case e.Seq < 0:
		return &ParseError{Msg: "negative seq"}
	case e.Type == "":
		return &ParseError{Msg: "missing type"}
	case len(tsRaw) == 0:
		return &ParseError{Msg: "missing ts"}
	}
	ts, ok := parseUTCStamp(tsRaw)
	if !ok {
		var terr error
		if ts, terr = time.Parse(time.RFC3339Nano, string(tsRaw)); terr != nil {
			return &ParseError{Msg: "ts is not an RFC 3339 time"}
		}
	}
	e.TS = ts
	return nil
}

// parseUTCStamp parses the common form of ts, 2026-02-14T10:00:00.000Z
// (UTC, 0 to 9 fractional digits), without allocating. Anything else is
// left to time.Parse (ok false).
func parseUTCStamp(b []byte) (time.Time, bool) {
	if len(b) < 20 || b[len(b)-1] != 'Z' || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' {
		return time.Time{}, false
	}
	num := func(i, n int) (int, bool) {
		v := 0
		for _, c := range b[i : i+n] {
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		return v, true
	}
	year, ok1 := num(0, 4)
	month, ok2 := num(5, 2)
	day, ok3 := num(8, 2)
	hour, ok4 := num(11, 2)
	minute, ok5 := num(14, 2)
	sec, ok6 := num(17, 2)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	if day > 28 && day > time.Date(year, time.Month(month)+1, 0, 0, 0, 0, 0, time.UTC).Day() {
		return time.Time{}, false
	}
	ns := 0
	if rest := b[19 : len(b)-1]; len(rest) > 0 {
		if len(rest) < 2 || len(rest) > 10 || rest[0] != '.' {
			return time.Time{}, false
		}
		frac, ok := num(20, len(rest)-1)
		if !ok {
			return time.Time{}, false
		}
		for n := len(rest) - 1; n < 9; n++ {
			frac *= 10
		}
		ns = frac
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, ns, time.UTC), true
}

func syntaxErr(err error) error {
	var je *jsonError
	if errors.As(err, &je) {
		return &ParseError{Malformed: true, Truncated: je.end, Msg: je.Error()}
	}
	return &ParseError{Malformed: true, Msg: err.Error()}
}
