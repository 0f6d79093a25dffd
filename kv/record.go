package kv

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/teambus/teambus"
)

// Decoding per record (issue 12 item 8).
//
// A team's state bucket holds one record per key: "team", "member.<id>",
// "task.<id>" and "activity.<member>". Every record is decoded on its own
// (DecodeRecord). One that does not decode - garbage written by hand or by
// a bug, a record whose id is not its key's, a status no version of
// teambus writes - is a damaged record: a snapshot leaves it out of its
// maps and lists it in Snapshot.Damaged with its key, revision and the
// reason, so whatever does not need it goes on working. Whatever needs it
// is told it is damaged (ErrDamaged, an ErrState: exit 2) with the hint to
// run `teambus team repair T`. A damaged team record is the exception: the
// team's status and policy are in it, so nothing of that team can be read
// until it is repaired; other teams are not affected.
//
// Store.Repair puts a damaged record back to the newest earlier revision
// of its key that decodes, or deletes it when there is none, each with
// compare-and-set on the damaged revision (repair.go).

// ErrDamaged marks a record of a team's state that does not decode. The
// errors that carry it are ErrState (exit 2): retrying does not help,
// `teambus team repair T` does.
var ErrDamaged = errors.New("damaged")

// DamagedRecord is a record of a team's state bucket that does not decode.
type DamagedRecord struct {
	Key      string `json:"key"`
	Revision uint64 `json:"revision"`
	// Reason is why it does not decode: one sanitized line.
	Reason string `json:"reason"`
}

// Record is one decoded record of a state bucket: exactly one field is
// set, or none for a key teambus does not know (a newer version's).
type Record struct {
	Team     *teambus.Team
	Member   *teambus.Member
	Task     *teambus.Task
	Activity *time.Time
}

// maxReason bounds the reason of a damaged record, in bytes.
const maxReason = 200

// DecodeRecord decodes value stored under key in the state bucket of
// team. It fails, with a one-line reason, when the value is not the JSON
// of the key's record, when the record's id is not the one its key names
// (or not a valid id), or when its status is not one teambus writes.
func DecodeRecord(team, key string, value []byte) (Record, error) {
	var r Record
	switch {
	case key == keyTeam:
		var t teambus.Team
		if err := unmarshal(value, &t); err != nil {
			return r, err
		}
		if t.ID != team {
			return r, fmt.Errorf("team record names team %q, not %s", clip(t.ID), team)
		}
		if !teamStatus(t.Status) {
			return r, fmt.Errorf("unknown team status %q", clip(string(t.Status)))
		}
		for _, d := range teambus.PolicyDurations {
			if v := *d.Get(&t.Policy); v <= 0 {
				return r, fmt.Errorf("policy %s is %s, not a positive duration", d.Name, v)
			}
		}
		r.Team = &t
	case strings.HasPrefix(key, preMember):
		id := strings.TrimPrefix(key, preMember)
		var m teambus.Member
		if err := unmarshal(value, &m); err != nil {
			return r, err
		}
		if m.ID != id {
			return r, fmt.Errorf("member record names member %q, not %s", clip(m.ID), clip(id))
		}
		if err := teambus.ValidateMemberID(m.ID); err != nil {
			return r, err
		}
		if !memberStatus(m.Status) {
			return r, fmt.Errorf("unknown member status %q", clip(string(m.Status)))
		}
		if m.Epoch < 0 {
			return r, fmt.Errorf("negative epoch %d", m.Epoch)
		}
		r.Member = &m
	case strings.HasPrefix(key, preTask):
		id := strings.TrimPrefix(key, preTask)
		var t teambus.Task
		if err := unmarshal(value, &t); err != nil {
			return r, err
		}
		if t.ID != id {
			return r, fmt.Errorf("task record names task %q, not %s", clip(t.ID), clip(id))
		}
		if !validID(t.ID) {
			return r, fmt.Errorf("invalid task id %q", clip(t.ID))
		}
		if !taskStatus(t.Status) {
			return r, fmt.Errorf("unknown task status %q", clip(string(t.Status)))
		}
		for _, d := range t.Dependencies {
			if !validID(d) {
				return r, fmt.Errorf("invalid dependency id %q", clip(d))
			}
		}
		if t.AssignedTo != "" && !validID(t.AssignedTo) {
			return r, fmt.Errorf("invalid assigned member id %q", clip(t.AssignedTo))
		}
		r.Task = &t
	case strings.HasPrefix(key, preActivity):
		var at time.Time
		if err := unmarshal(value, &at); err != nil {
			return r, err
		}
		r.Activity = &at
	}
	return r, nil
}

// validID is teambus.ValidateID without the regular expression and the
// error: a snapshot checks every id of every task record.
func validID(id string) bool {
	if len(id) < 1 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || i > 0 && (c == '_' || c == '-') {
			continue
		}
		return false
	}
	return true
}

// unmarshal decodes a record's JSON; "null" and anything but an object
// (a time for activity) are refused.
func unmarshal(value []byte, v any) error {
	if len(value) == 0 {
		return errors.New("empty value")
	}
	if err := json.Unmarshal(value, v); err != nil {
		return fmt.Errorf("not a record: %w", err)
	}
	if string(value) == "null" {
		return errors.New("not a record: null")
	}
	return nil
}

func teamStatus(s teambus.TeamStatus) bool {
	switch s {
	case teambus.TeamPending, teambus.TeamActive, teambus.TeamConsolidating, teambus.TeamComplete, teambus.TeamAborted:
		return true
	}
	return false
}

func memberStatus(s teambus.MemberStatus) bool {
	switch s {
	case teambus.MemberSpawned, teambus.MemberIdle, teambus.MemberInProgress, teambus.MemberBlocked, teambus.MemberComplete,
		teambus.MemberZombie, teambus.MemberOffline, teambus.MemberCrashed, teambus.MemberPaused, teambus.MemberShutdown:
		return true
	}
	return false
}

func taskStatus(s teambus.TaskStatus) bool {
	for _, st := range teambus.TaskStatuses {
		if s == st {
			return true
		}
	}
	return false
}

// clip shortens record text quoted in a reason.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	n := 64
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// reason turns a decode error into a damaged record's reason: one line,
// no control characters, at most maxReason bytes.
func reason(err error) string {
	s := teambus.SanitizeLine(strings.Join(strings.Fields(err.Error()), " "))
	if len(s) > maxReason {
		n := maxReason
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "…"
	}
	return s
}

// damagedError is the error of a command that needs a damaged record.
func damagedError(team, what string, d DamagedRecord) error {
	return teambus.Statef("%s of team %s is %w (revision %d: %s): see `teambus team show %s`, repair it with `teambus team repair %s` (operator)",
		what, team, ErrDamaged, d.Revision, d.Reason, team, team)
}

// damagedTeamError is the error of every read of a team whose team record
// is damaged.
func damagedTeamError(team string, d DamagedRecord) error {
	return teambus.Statef("the record of team %s is %w (revision %d: %s): nothing of the team can be read until it is repaired with `teambus team repair %s` (operator)",
		team, ErrDamaged, d.Revision, d.Reason, team)
}

// Damage returns the damaged record stored under key, if the snapshot
// found that key damaged.
func (s *Snapshot) Damage(key string) (DamagedRecord, bool) {
	i := sort.Search(len(s.Damaged), func(i int) bool { return s.Damaged[i].Key >= key })
	if i < len(s.Damaged) && s.Damaged[i].Key == key {
		return s.Damaged[i], true
	}
	return DamagedRecord{}, false
}

// describeKey names the record of key for a message: "task t1",
// "member tm1", "the activity record of tm1".
func describeKey(key string) string {
	switch {
	case strings.HasPrefix(key, preTask):
		return "task " + strings.TrimPrefix(key, preTask)
	case strings.HasPrefix(key, preMember):
		return "member " + strings.TrimPrefix(key, preMember)
	case strings.HasPrefix(key, preActivity):
		return "the activity record of " + strings.TrimPrefix(key, preActivity)
	}
	return "record " + key
}
