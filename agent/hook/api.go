package hook

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// apiOf is the member API a hook acts through on conn: with a member's
// (or the lead's) credential the team service, as that member (the
// credential must be the bound identity's); with the node token the team
// state itself, with no service hop.
func apiOf(conn *bus.Conn, teamID, member string) (teamapi.API, error) {
	if _, _, ok := conn.MemberOf(); ok {
		return teamapi.ForConn(conn, teamID, member, "")
	}
	return team.New(conn.JS, team.Config{}).API(), nil
}

// lease is mail leased from the member's inbox (teamapi.LeaseInbox).
type lease = teamapi.Lease

// leaseInbox leases up to max messages of the member's inbox, waiting up
// to wait for one when there is none.
func leaseInbox(ctx context.Context, api teamapi.API, a teamapi.Actor, max int, wait time.Duration) (*lease, error) {
	return teamapi.LeaseInbox(ctx, api, a, max, wait)
}

// decoded is a reply of the member API that is a value of package team
// locally and its JSON over the wire (a brief, a team view).
func decoded[T any](v any, err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case *T:
		return x, nil
	case json.RawMessage:
		var out T
		if err := json.Unmarshal(x, &out); err != nil {
			return nil, teambus.Unavailablef("decode the team service's answer: %w", err)
		}
		return &out, nil
	}
	return nil, fmt.Errorf("unexpected answer %T", v)
}
