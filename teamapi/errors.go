package teamapi

import (
	"errors"
	"fmt"

	"github.com/teambus/teambus"
)

// Code is the class of a refused request as it travels on the wire: the
// Nats-Service-Error-Code header and the code of the ErrorReply body.
// The client turns it back into an *Error that matches, with errors.Is,
// the same sentinel errors the service's error matched.
type Code string

// The codes of the team service.
const (
	CodeInvalid     Code = "invalid"     // teambus.ErrInvalid, exit 2
	CodeNotFound    Code = "not_found"   // teambus.ErrNotFound, exit 2
	CodeState       Code = "state"       // teambus.ErrState, exit 2
	CodeRefused     Code = "refused"     // ErrRefused (and teambus.ErrInvalid), exit 2
	CodeConflict    Code = "conflict"    // teambus.ErrConflict, exit 3
	CodeFenced      Code = "fenced"      // teambus.ErrFenced, exit 3
	CodeUnavailable Code = "unavailable" // teambus.ErrUnavailable, exit 1
	// CodeNoLeader is a teambus.ErrNoLeader: a stream had no leader, nothing
	// was stored, the same request succeeds once one is elected (exit 1).
	CodeNoLeader Code = "no_leader"
	// CodeNoTask is an ErrNoTask: no task is available yet (exit 1).
	CodeNoTask Code = "no_task"
	// CodeBusy is an ErrBusy: the request was past the service's budget
	// for its caller and did not run (exit 1: a retry is safe).
	CodeBusy Code = "busy"
	// CodeTooBig is an ErrTooBig: the answer was larger than the bus
	// carries and was not sent (exit 2: the same request gets the same
	// answer; ask for less).
	CodeTooBig Code = "too_big"
	// CodeFull is a teambus.ErrFull: the team's mailbox or event log is at
	// its size limit; nothing was stored, and a retry stores nothing
	// until the limit is raised (exit 2). The message names the fix.
	CodeFull Code = "full"
	// CodeNoSpace is a teambus.ErrNoSpace: the bus node's own store is
	// out of room (a full disk); the operator's to fix (exit 2).
	CodeNoSpace Code = "no_space"
	// CodeQuota is an ErrQuota: the member sent its share of the team's
	// mailbox within the quota window; nothing was stored, and the same
	// send works once the window moves on (exit 1: a retry is safe).
	CodeQuota Code = "quota"
)

// Classes: the exit code a code maps to, carried beside it so a client
// that does not know a code still exits right.
const (
	ClassTransient = "transient" // exit 1
	ClassPermanent = "permanent" // exit 2
	ClassConflict  = "conflict"  // exit 3
)

// ErrRefused is a request refused for who sent it: a credential acting
// beyond itself, request info that does not check out. It is also a
// teambus.ErrInvalid.
var ErrRefused = errors.New("refused")

// ErrNoTask is a task next that found nothing to claim yet. It is also a
// teambus.ErrUnavailable: later there may be one.
var ErrNoTask = errors.New("no task available")

// ErrBusy is a request the team service did not run because its caller
// (or the service) had as many requests in flight as its budget allows.
// Nothing happened: a retry is safe. It is also a teambus.ErrUnavailable.
var ErrBusy = errors.New("team service busy")

// ErrTooBig is a request whose answer was larger than a message of the
// bus carries: the service answered this error instead. It is also a
// teambus.ErrInvalid (exit 2): the same request gets the same answer.
var ErrTooBig = errors.New("answer too big for the bus")

// TooBigf returns an ErrTooBig with a message.
func TooBigf(format string, args ...any) error {
	return &Error{Code: CodeTooBig, Class: ClassPermanent, Message: fmt.Sprintf(format, args...)}
}

// ErrQuota is a send refused because its member had stored its share of
// the team's mailbox within the quota window. Nothing was stored; the
// same send works later. It is also a teambus.ErrUnavailable.
var ErrQuota = errors.New("send quota used up")

// Quotaf returns an ErrQuota with a message.
func Quotaf(format string, args ...any) error {
	return &Error{Code: CodeQuota, Class: ClassTransient, Message: fmt.Sprintf(format, args...)}
}

// Busyf returns an ErrBusy with a message.
func Busyf(format string, args ...any) error {
	return &Error{Code: CodeBusy, Class: ClassTransient, Message: fmt.Sprintf(format, args...)}
}

// Refusedf returns an ErrRefused whose message starts with "refused: ".
func Refusedf(format string, args ...any) error {
	return &Error{Code: CodeRefused, Message: "refused: " + fmt.Sprintf(format, args...)}
}

// NoTaskf returns an ErrNoTask with a message.
func NoTaskf(format string, args ...any) error {
	return &Error{Code: CodeNoTask, Message: fmt.Sprintf(format, args...)}
}

// ErrorCodeHeader carries the code of a service error; the body is an
// ErrorReply.
const ErrorCodeHeader = "Nats-Service-Error-Code"

// ErrorReply is the body of a refused request.
type ErrorReply struct {
	Error Error `json:"error"`
}

// Error is one service error: its code, its class (the exit code) and
// the one-line message. It matches (errors.Is) the sentinels of its code.
type Error struct {
	Code    Code   `json:"code"`
	Class   string `json:"class"`
	Message string `json:"message"`
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "team service refused the request"
	}
	return e.Message
}

// Unwrap returns the sentinels of the code; an unknown code falls back
// to its class.
func (e *Error) Unwrap() []error {
	switch e.Code {
	case CodeInvalid:
		return []error{teambus.ErrInvalid}
	case CodeNotFound:
		return []error{teambus.ErrNotFound}
	case CodeState:
		return []error{teambus.ErrState}
	case CodeRefused:
		return []error{ErrRefused, teambus.ErrInvalid}
	case CodeConflict:
		return []error{teambus.ErrConflict}
	case CodeFenced:
		return []error{teambus.ErrFenced}
	case CodeNoLeader:
		return []error{teambus.ErrNoLeader, teambus.ErrUnavailable}
	case CodeNoTask:
		return []error{ErrNoTask, teambus.ErrUnavailable}
	case CodeBusy:
		return []error{ErrBusy, teambus.ErrUnavailable}
	case CodeTooBig:
		return []error{ErrTooBig, teambus.ErrInvalid}
	case CodeQuota:
		return []error{ErrQuota, teambus.ErrUnavailable}
	case CodeFull:
		return []error{teambus.ErrFull}
	case CodeNoSpace:
		return []error{teambus.ErrNoSpace, teambus.ErrFull}
	case CodeUnavailable:
		return []error{teambus.ErrUnavailable}
	}
	switch e.Class {
	case ClassPermanent:
		return []error{teambus.ErrInvalid}
	case ClassConflict:
		return []error{teambus.ErrConflict}
	}
	return []error{teambus.ErrUnavailable}
}

// ErrorOf turns err into the error the service answers with, classed by
// the sentinels it matches.
func ErrorOf(err error) *Error {
	var e *Error
	code := CodeUnavailable
	switch {
	case errors.As(err, &e) && e.Code != "" && teambus.ExitCode(err) == classExit(classOf(e.Code)):
		code = e.Code
	case errors.Is(err, teambus.ErrNoLeader) && teambus.ExitCode(err) == teambus.ExitTransient:
		code = CodeNoLeader
	case errors.Is(err, teambus.ErrNoSpace) && teambus.ExitCode(err) == teambus.ExitPermanent:
		code = CodeNoSpace
	case errors.Is(err, teambus.ErrFull) && teambus.ExitCode(err) == teambus.ExitPermanent:
		code = CodeFull
	case errors.Is(err, teambus.ErrFenced):
		code = CodeFenced
	case errors.Is(err, teambus.ErrConflict):
		code = CodeConflict
	case errors.Is(err, ErrRefused):
		code = CodeRefused
	case errors.Is(err, teambus.ErrInvalid):
		code = CodeInvalid
	case errors.Is(err, teambus.ErrNotFound):
		code = CodeNotFound
	case errors.Is(err, teambus.ErrState):
		code = CodeState
	}
	return &Error{Code: code, Class: classOf(code), Message: err.Error()}
}

func classOf(c Code) string {
	switch c {
	case CodeFenced, CodeConflict:
		return ClassConflict
	case CodeInvalid, CodeNotFound, CodeState, CodeRefused, CodeTooBig, CodeFull, CodeNoSpace:
		return ClassPermanent
	default:
		return ClassTransient
	}
}

func classExit(class string) int {
	switch class {
	case ClassConflict:
		return teambus.ExitConflict
	case ClassPermanent:
		return teambus.ExitPermanent
	}
	return teambus.ExitTransient
}
