package team

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/teambus/teambus/eventlog"
)

// What teambus logs about itself, in a team's event log (seed 004's
// envelope, feature = the team id):
//
//   - The team session, sid "teambus:<team>", holds the team's own story:
//     session.start at team create, task.* for every task transition,
//     agent.spawned / agent.completed / agent.crashed for member
//     incarnations, member.zombie / member.unzombie, lead.attached /
//     lead.takeover, escalation, checkpoint (team checkpoint), the team
//     transitions, and session.end when the team completes or is aborted.
//     Its events come from whatever process did the operation (a command,
//     a sidecar), so its seq is assigned by the event log itself:
//     compare-and-set on the session's last event (eventlog.Events.Append with
//     eventlog.AutoSeq).
//   - Every sidecar run is a session of its own, sid
//     "teambus:<team>:<member>:<epoch>" (member "lead" for the lead and
//     the lead epoch): session.start when it attached or registered,
//     session.end when it stops on its own. One process owns that
//     incarnation, so it counts its seq itself. A sidecar killed with
//     kill -9 leaves its session without session.end: exactly what seed
//     004's detection looks for.
//
// Logging never fails an operation: an event that can not be stored is
// reported to the service's logger and dropped (a seq gap in the sidecar
// sessions says so).

// SessionID is the sid of a team's own session in its event log.
func SessionID(team string) string { return "teambus:" + team }

// SidecarSessionID is the sid of one sidecar run: the member ("lead" for
// the lead) and the incarnation's epoch.
func SidecarSessionID(team, member string, epoch int64) string {
	return fmt.Sprintf("teambus:%s:%s:%d", team, member, epoch)
}

// Events returns the event log of team with the service's limits.
func (s *Service) Events(team string) *eventlog.Events {
	return eventlog.NewEvents(s.js, team, s.cfg.Events)
}

// LogEvent appends an event of type typ to the team session of team. agent
// names the member it is about ("" for the team). Failures are logged, not
// returned.
func (s *Service) LogEvent(ctx context.Context, team, typ, agent string, data any) {
	s.logEvent(ctx, team, SessionID(team), eventlog.AutoSeq, typ, agent, data)
}

// LogEventWithin is LogEvent bounded by d instead of its own few seconds,
// for a hook that must finish within its budget.
func (s *Service) LogEventWithin(ctx context.Context, team, typ, agent string, data any, d time.Duration) {
	s.logEventTimeout(ctx, team, SessionID(team), eventlog.AutoSeq, typ, agent, data, d)
}

func (s *Service) logEvent(ctx context.Context, team, sid string, seq int64, typ, agent string, data any) {
	s.logEventTimeout(ctx, team, sid, seq, typ, agent, data, 5*time.Second)
}

func (s *Service) logEventTimeout(ctx context.Context, team, sid string, seq int64, typ, agent string, data any, d time.Duration) {
	e := &eventlog.Event{TS: s.Now().Truncate(time.Millisecond), SID: sid, Seq: seq, Type: typ, Feature: team, Agent: agent}
	if data != nil {
		b, err := json.Marshal(data)
		if err != nil {
			s.cfg.Logger.Warn("encode event", "team", team, "type", typ, "err", err)
			return
		}
		e.Data = b
	}
	// The operation may have used up its context; the event gets its own
	// few seconds.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
	defer cancel()
	if _, err := s.Events(team).Append(ctx, e); err != nil {
		s.cfg.Logger.Warn("log event", "team", team, "sid", sid, "type", typ, "err", err)
	}
}

// EventSession is the event log session of one sidecar run. It is safe
// for concurrent use.
type EventSession struct {
	svc   *Service
	team  string
	sid   string
	agent string
	mu    sync.Mutex
	seq   int64
	ended bool
}

// StartSession starts the session of a sidecar run of member ("lead" for
// the lead) at epoch: session.start with data (command, mode, pid...).
func (s *Service) StartSession(ctx context.Context, team, member string, epoch int64, data map[string]any) *EventSession {
	es := &EventSession{svc: s, team: team, sid: SidecarSessionID(team, member, epoch), agent: member}
	if data == nil {
		data = map[string]any{}
	}
	data["epoch"] = epoch
	es.Log(ctx, eventlog.EvSessionStart, data)
	return es
}

// SID returns the session id.
func (es *EventSession) SID() string { return es.sid }

// Log appends an event to the session. Every call takes the next seq,
// stored or not, so a lost event shows as a gap.
func (es *EventSession) Log(ctx context.Context, typ string, data any) {
	es.mu.Lock()
	seq := es.seq
	es.seq++
	es.mu.Unlock()
	es.svc.logEvent(ctx, es.team, es.sid, seq, typ, es.agent, data)
}

// End appends session.end once: the run finished on its own, with
// outcome (why it stopped) and the error it returns, if any.
func (es *EventSession) End(ctx context.Context, outcome string, err error) {
	es.mu.Lock()
	done := es.ended
	es.ended = true
	es.mu.Unlock()
	if done {
		return
	}
	data := map[string]any{"outcome": outcome}
	if err != nil {
		data["error"] = clipText(err.Error(), 1000)
	}
	es.Log(ctx, eventlog.EvSessionEnd, data)
}

// clipText shortens free text carried in event data to about n bytes,
// on a character boundary.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
