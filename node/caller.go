package node

import (
	"encoding/json"
	"strings"

	"github.com/nats-io/nats.go/micro"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/teamapi"
)

// RequestInfoHeader is the header the server sets on a request that
// crossed a service import with shared request info. It is looked up by
// this exact key: other casings are the caller's own headers.
const RequestInfoHeader = "Nats-Request-Info"

// caller is who sent a request: a member of team through its credential,
// or the operator (who names the member in the request).
type caller struct {
	team     string
	member   string // set for a member credential
	operator bool
}

// requestInfo is the part of Nats-Request-Info the service reads.
type requestInfo struct {
	Acc  string `json:"acc"`
	User string `json:"user"`
}

// identify decides who sent a request to subject tbsvc.<team>.<verb>.
func identify(subject string, h micro.Headers) (caller, error) {
	t := strings.Split(subject, ".")
	if len(t) != 3 || t[0] != teamapi.ServicePrefix {
		return caller{}, teambus.Invalidf("not a team service subject")
	}
	teamID := t[1]
	if err := teambus.ValidateID("team", teamID); err != nil {
		return caller{}, err
	}
	vals, ok := h[RequestInfoHeader]
	if !ok {
		// Published inside the data account: only the operator can.
		return caller{team: teamID, operator: true}, nil
	}
	if len(vals) != 1 {
		return caller{}, teamapi.Refusedf("ambiguous request info")
	}
	var ri requestInfo
	if err := json.Unmarshal([]byte(vals[0]), &ri); err != nil {
		return caller{}, teamapi.Refusedf("unreadable request info")
	}
	if ri.Acc != teamapi.MemberAccount(teamID) {
		return caller{}, teamapi.Refusedf("account is not the member account of team %s", teamID)
	}
	ut, um, ok := strings.Cut(ri.User, ".")
	if !ok || ut != teamID {
		return caller{}, teamapi.Refusedf("user is not a member of team %s", teamID)
	}
	if um != teambus.Lead {
		if err := teambus.ValidateMemberID(um); err != nil {
			return caller{}, teamapi.Refusedf("user is not a member of team %s", teamID)
		}
	}
	return caller{team: teamID, member: um}, nil
}

// actor sets the actor of a request: the credential's member, or the
// member the operator names. Team is always the subject's.
func (c caller) actor(a *teamapi.Actor) error {
	if c.operator {
		a.Operator = true
	} else if a.Member != "" && a.Member != c.member {
		return teamapi.Refusedf("the credential of %s can act only as %s, not as %s", c.member, c.member, a.Member)
	} else {
		a.Member = c.member
	}
	a.Team = c.team
	return a.Validate()
}
