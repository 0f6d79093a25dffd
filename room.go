package teambus

import "errors"

// ErrFull is a write refused for want of room: a team's mailbox or event
// log at its size limit. Nothing was stored, and the same write fails
// until the limit is raised or room is made, so a retry does not help:
// it is permanent (exit 2). The message names the fix.
var ErrFull = errors.New("no room")

// ErrNoSpace is a write the bus node could not store because its own
// store is out of room: the disk is full, or the node's store limit is
// reserved. It is the operator's problem, not the caller's, and
// permanent until the operator acts (exit 2). Every ErrNoSpace is also an
// ErrFull.
var ErrNoSpace = errors.New("bus store out of space")

// Fullf returns an ErrFull with a message.
func Fullf(format string, args ...any) error {
	return newClassified(ErrFull, format, args...)
}

// NoSpacef returns an ErrNoSpace (and ErrFull) with a message.
func NoSpacef(format string, args ...any) error {
	return newClassified(errNoSpace, format, args...)
}

// errNoSpace is the kind of a NoSpacef error: both sentinels.
var errNoSpace error = noSpaceKind{}

type noSpaceKind struct{}

func (noSpaceKind) Error() string   { return ErrNoSpace.Error() }
func (noSpaceKind) Unwrap() []error { return []error{ErrNoSpace, ErrFull} }
