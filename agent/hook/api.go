package hook

import (
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
