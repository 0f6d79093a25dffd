package teambus

import (
	"errors"
	"fmt"
)

// The sentinel errors classify every failure. Wrap them with what was being
// done; match them with errors.Is. The command line maps them to exit codes.
var (
	// ErrInvalid is bad input: a malformed id, duration, JSON or size (exit 2).
	ErrInvalid = errors.New("invalid input")
	// ErrNotFound is a team, member, task or message that does not exist (exit 2).
	ErrNotFound = errors.New("not found")
	// ErrState is an illegal state transition (exit 2).
	ErrState = errors.New("illegal transition")
	// ErrConflict is a lost race: a stale revision or a task claimed by another (exit 3).
	ErrConflict = errors.New("conflict")
	// ErrFenced is a write from an old incarnation of a member or lead (exit 3).
	ErrFenced = errors.New("fenced")
	// ErrUnavailable is a transient failure: bus unreachable, timed out,
	// nothing to do yet (exit 1).
	ErrUnavailable = errors.New("unavailable")
)

// Exit codes of the specification, section 2.
const (
	ExitOK        = 0
	ExitTransient = 1
	ExitPermanent = 2
	ExitConflict  = 3
)

// ExitCode returns the exit code for err per the specification. Unclassified
// errors are treated as transient: retrying may help.
func ExitCode(err error) int {
	var c *classified
	if errors.As(err, &c) {
		err = c.kind // the outermost class decides, not a wrapped cause's
	}
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrConflict), errors.Is(err, ErrFenced):
		return ExitConflict
	case errors.Is(err, ErrInvalid), errors.Is(err, ErrNotFound), errors.Is(err, ErrState), errors.Is(err, ErrFull):
		return ExitPermanent
	default:
		return ExitTransient
	}
}

// Invalidf returns an ErrInvalid with a message.
func Invalidf(format string, args ...any) error {
	return newClassified(ErrInvalid, format, args...)
}

// NotFoundf returns an ErrNotFound with a message.
func NotFoundf(format string, args ...any) error {
	return newClassified(ErrNotFound, format, args...)
}

// Statef returns an ErrState with a message.
func Statef(format string, args ...any) error {
	return newClassified(ErrState, format, args...)
}

// Conflictf returns an ErrConflict with a message.
func Conflictf(format string, args ...any) error {
	return newClassified(ErrConflict, format, args...)
}

// Fencedf returns an ErrFenced with a message.
func Fencedf(format string, args ...any) error {
	return newClassified(ErrFenced, format, args...)
}

// Unavailablef returns an ErrUnavailable with a message.
func Unavailablef(format string, args ...any) error {
	return newClassified(ErrUnavailable, format, args...)
}

// classified is an error whose text is a full sentence for the user and
// whose kind is one of the sentinels.
// A %w in the format keeps the cause: errors.Is and errors.As see both the
// kind and the cause, while ExitCode goes by the outermost kind.
type classified struct {
	kind  error
	msg   string
	cause error
}

func newClassified(kind error, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &classified{kind: kind, msg: err.Error(), cause: errors.Unwrap(err)}
}

func (e *classified) Error() string { return e.msg }
func (e *classified) Unwrap() []error {
	if e.cause == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.cause}
}
