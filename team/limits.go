package team

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
)

// Limits are the size limits of a live team's streams that SetLimits
// changes, in bytes; 0 leaves a limit as it is.
type Limits struct {
	Mailbox int64 `json:"mailbox_max_bytes,omitempty"`
	Events  int64 `json:"events_max_bytes,omitempty"`
}

// StreamLimit is one stream's limit before and after SetLimits, with the
// bytes it holds.
type StreamLimit struct {
	Stream string `json:"stream"`
	Was    int64  `json:"was"`
	Now    int64  `json:"now"`
	Used   uint64 `json:"used"`
}

// LimitsResult is what SetLimits changed.
type LimitsResult struct {
	Team    string       `json:"team"`
	Mailbox *StreamLimit `json:"mailbox,omitempty"`
	Events  *StreamLimit `json:"events,omitempty"`
}

// MinStreamBytes is the smallest limit of a team's mailbox or event log.
const MinStreamBytes = 1 << 20

// SetLimits raises the size limits of team's mailbox and event log on the
// live streams: a full mailbox takes mail again at once. A limit only
// grows: a smaller one would make the store drop old mail to fit, and the
// mailbox is an audit trail (ErrInvalid). The store reserves each limit
// on the node's store limit; a raise past it is refused with a
// *NoRoomError saying so, and changes nothing of that stream. It needs a
// connection that may update streams: the operator's.
func (s *Service) SetLimits(ctx context.Context, team string, l Limits) (*LimitsResult, error) {
	if err := teambus.ValidateID("team", team); err != nil {
		return nil, err
	}
	if l.Mailbox == 0 && l.Events == 0 {
		return nil, teambus.Invalidf("set limits of team %s: no limit given", team)
	}
	for _, v := range []int64{l.Mailbox, l.Events} {
		if v != 0 && v < MinStreamBytes {
			return nil, teambus.Invalidf("set limits of team %s: %s is below the smallest limit, %s", team, bus.Size(v), bus.Size(MinStreamBytes))
		}
	}
	if ok, err := s.store.TeamExists(ctx, team); err != nil {
		return nil, err
	} else if !ok {
		return nil, teambus.NotFoundf("team %s not found: see `teambus team list`", team)
	}
	res := &LimitsResult{Team: team}
	var err error
	if l.Mailbox != 0 {
		if res.Mailbox, err = s.raise(ctx, team, s.Mailbox(team).Stream(), "mailbox", l.Mailbox); err != nil {
			return res, err
		}
	}
	if l.Events != 0 {
		if res.Events, err = s.raise(ctx, team, s.Events(team).Stream(), "event log", l.Events); err != nil {
			return res, err
		}
	}
	return res, nil
}

// raise sets the byte limit of stream to limit when that is no less than
// the current one.
func (s *Service) raise(ctx context.Context, team, stream, what string, limit int64) (*StreamLimit, error) {
	st, err := s.js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, teambus.NotFoundf("team %s has no %s (stream %s): repair or re-create the team", team, what, stream)
	}
	if err != nil {
		return nil, teambus.Unavailablef("read the %s of team %s: %w", what, team, err)
	}
	info := st.CachedInfo()
	cfg := info.Config
	sl := &StreamLimit{Stream: stream, Was: cfg.MaxBytes, Now: cfg.MaxBytes, Used: info.State.Bytes}
	switch {
	case cfg.MaxBytes == limit:
		return sl, nil
	case cfg.MaxBytes > 0 && limit < cfg.MaxBytes:
		return sl, teambus.Invalidf("the %s of team %s is limited to %s and holds %s: a limit only grows (a smaller one would drop old mail to fit); give at least %s", what, team, bus.Size(cfg.MaxBytes), bus.Size(int64(info.State.Bytes)), bus.Size(cfg.MaxBytes))
	}
	cfg.MaxBytes = limit
	if _, err := s.js.UpdateStream(ctx, cfg); err != nil {
		if noRoom(err) {
			return sl, &LimitRoomError{Team: team, What: what, Was: sl.Was, Want: limit, cause: err}
		}
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) {
			return sl, teambus.Invalidf("raise the %s of team %s to %s: the bus refused: %s", what, team, bus.Size(limit), apiErr.Description)
		}
		return sl, teambus.Unavailablef("raise the %s of team %s to %s: %w", what, team, bus.Size(limit), err)
	}
	sl.Now = limit
	s.LogEvent(ctx, team, "limits.changed", "", map[string]any{"command": "team.set", "stream": stream, "was": sl.Was, "now": limit})
	return sl, nil
}

// LimitRoomError is a limit raise the node refused because its store can
// not reserve that much more (its store limit, `teambus bus start
// --max-store`). Nothing changed. It is permanent until the node's
// operator gives the store more room or frees some (teambus.ErrNoSpace).
type LimitRoomError struct {
	Team, What string
	Was, Want  int64
	cause      error
}

func (e *LimitRoomError) Error() string {
	return fmt.Sprintf("the %s of team %s can not grow from %s to %s: the bus node's store limit has no room to reserve it (nothing changed); restart the node with a larger `teambus bus start --max-store`, delete finished teams, or ask for less", e.What, e.Team, bus.Size(e.Was), bus.Size(e.Want))
}

// Unwrap makes the error a teambus.ErrNoSpace and keeps the store's
// refusal.
func (e *LimitRoomError) Unwrap() []error {
	return []error{teambus.NoSpacef("no room"), e.cause}
}
