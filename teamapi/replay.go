//go:build !teambus_agent

package teamapi

import (
	"context"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/mailbox"
)

// ReplayOwn calls fn for the caller's own mail (to it, from it,
// broadcasts) that matches f, oldest first, paging through the service's
// replay and applying f here. Follow is not offered through the service.
func ReplayOwn(ctx context.Context, api API, a Actor, f mailbox.ReplayFilter, fn func(teambus.Message) error) error {
	if err := f.Validate(); err != nil {
		return err
	}
	if f.Follow {
		return teambus.Invalidf("following the mailbox as it grows needs the operator's credential (the node token), not the credential of %s in team %s", a.Member, a.Team)
	}
	// Without a filter of its own a page need hold no more than the limit.
	pageMax := ReplayMax
	if f.Limit > 0 && f.From == "" && f.To == "" && f.Type == "" && f.SinceTime.IsZero() {
		pageMax = min(f.Limit, pageMax)
	}
	since, n := f.SinceSeq, 0
	for {
		page, err := api.Replay(ctx, ReplayRequest{Actor: a, SinceSeq: since, Limit: pageMax})
		if err != nil {
			return err
		}
		for _, m := range page.Messages {
			if f.UntilSeq > 0 && m.Seq > f.UntilSeq || !f.UntilTime.IsZero() && m.TS.After(f.UntilTime) {
				return nil
			}
			if !replayMatch(f, m) {
				continue
			}
			if err := fn(m); err != nil {
				return err
			}
			n++
			if f.Limit > 0 && n >= f.Limit {
				return nil
			}
		}
		if page.Next == 0 || page.Next <= since {
			return nil
		}
		since = page.Next
	}
}

// replayMatch applies the filters the mailbox applies by subject or start.
func replayMatch(f mailbox.ReplayFilter, m teambus.Message) bool {
	switch {
	case f.From != "" && m.From != f.From,
		f.To != "" && m.To != f.To,
		f.Type != "" && m.Type != f.Type,
		!f.SinceTime.IsZero() && m.TS.Before(f.SinceTime),
		m.Held && !f.IncludeHeld:
		return false
	}
	return true
}
