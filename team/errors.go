package team

import (
	"fmt"
	"strings"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/internal/jserr"
)

// The errors below carry what a caller needs to say how to get out of
// them in its own terms: a command line names its flags, an MCP tool its
// arguments. Their texts name neither.

// NoRoomError is a team create refused because the store can not reserve
// the new team's limits. Nothing was created. It is transient
// (teambus.ErrUnavailable): it succeeds once there is room.
type NoRoomError struct {
	Team string
	// The limits the team would reserve, in bytes.
	Mailbox, Events, State, Heartbeats int64
	cause                              error
}

func (e *NoRoomError) Error() string {
	return fmt.Sprintf("create team %s: the store has no room to reserve another team (mailbox %s + event log %s + state %s + heartbeats %s): nothing was created; delete finished teams, give the store more room, or create the team with smaller mailbox and event log limits",
		e.Team, mib(e.Mailbox), mib(e.Events), mib(e.State), mib(e.Heartbeats))
}

// Unwrap makes the error transient and keeps the store's refusal.
func (e *NoRoomError) Unwrap() []error { return []error{teambus.ErrUnavailable, e.cause} }

// noRoom reports whether err is the store refusing to reserve more room
// (JetStream's resource limits), by its error code.
func noRoom(err error) bool {
	c, ok := jserr.Code(err)
	return ok && (c == jserr.InsufficientResources || c == jserr.StorageResourcesExceeded || c == jserr.MemoryResourcesExceeded)
}

// LiveSidecarsError is a team delete refused because sidecars of the team
// still run; a forced delete removes the team anyway. It is a state
// error (teambus.ErrState).
type LiveSidecarsError struct {
	Team string
	Live []string
}

func (e *LiveSidecarsError) Error() string {
	return fmt.Sprintf("team %s has live sidecars (%s): stop them first, or force the delete", e.Team, strings.Join(e.Live, ", "))
}

// Unwrap makes the refusal a state error.
func (e *LiveSidecarsError) Unwrap() error { return teambus.ErrState }

// UnfinishedTasksError is a team completion refused because tasks are not
// finished; a forced completion completes the team anyway. Shown lists the
// first of them with their status. It is a state error (teambus.ErrState).
type UnfinishedTasksError struct {
	Team  string
	Open  int
	Shown []string
}

func (e *UnfinishedTasksError) Error() string {
	return fmt.Sprintf("team %s has %d unfinished task(s): %s: finish or skip them, or force the completion", e.Team, e.Open, strings.Join(e.Shown, ", "))
}

// Unwrap makes the refusal a state error.
func (e *UnfinishedTasksError) Unwrap() error { return teambus.ErrState }

// NoLeadError is a resume of a team that has never had a lead (it is
// pending): its lead must attach first. Session is the lead session the
// team was created for, or the session that asked when none was named;
// Other, when set, is a different session that asked and may attach
// instead by forcing the resume. It is a state error (teambus.ErrState).
type NoLeadError struct {
	Team, Session, Other string
}

func (e *NoLeadError) Error() string {
	if e.Other != "" {
		return fmt.Sprintf("team %s was created for lead session %s: start its lead in that session, or force the resume to attach %s instead", e.Team, e.Session, e.Other)
	}
	return fmt.Sprintf("team %s has never had a lead: start its lead (session %s) first", e.Team, e.Session)
}

// Unwrap makes the refusal a state error.
func (e *NoLeadError) Unwrap() error { return teambus.ErrState }

// StaleLeadError is a request as the lead from a session that is not the
// team's lead session: an old lead, fenced. The session attaches as the
// lead by resuming the team.
type StaleLeadError struct {
	Team, Session string
	Epoch         int64
}

func (e *StaleLeadError) Error() string {
	return fmt.Sprintf("session %q is not the lead session of team %s (lead epoch %d): resume the team in this session to attach as its lead", e.Session, e.Team, e.Epoch)
}

// Unwrap makes the refusal fenced.
func (e *StaleLeadError) Unwrap() error { return teambus.ErrFenced }
