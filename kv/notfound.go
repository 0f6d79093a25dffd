package kv

import (
	"fmt"

	"github.com/teambus/teambus"
)

// NotFoundError is a record of a team that is not there: Kind is "task"
// (the only kind so far), ID its id. It is a teambus.ErrNotFound; a
// caller may add where to look, in its own terms.
type NotFoundError struct {
	Team, Kind, ID string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("team %s has no %s %s", e.Team, e.Kind, e.ID)
}

// Unwrap makes the error a teambus.ErrNotFound.
func (e *NotFoundError) Unwrap() error { return teambus.ErrNotFound }
