package teamapi

import "github.com/teambus/teambus"

// Actor is who a request acts as: a member of a team, or the lead
// (Member == teambus.Lead), in a session. Every request embeds it. Over
// the wire the service sets Team from the subject and, for a member's
// credential, Member from the credential: a request naming another
// member is refused. Only the operator (the node token) names the member
// it acts for.
type Actor struct {
	Team    string `json:"team,omitempty"`
	Member  string `json:"member,omitempty"`
	Session string `json:"session,omitempty"`
	// Operator is set by the service, never read from a request: the
	// caller holds the node token and may read any member's brief.
	Operator bool `json:"-"`
}

// Caller is the actor of a request: every request type has it by
// embedding Actor.
func (a *Actor) Caller() *Actor { return a }

// Validate checks the actor's ids.
func (a Actor) Validate() error {
	if a.Team == "" {
		return teambus.Invalidf("no team given")
	}
	if err := teambus.ValidateID("team", a.Team); err != nil {
		return err
	}
	if a.Member == "" {
		return teambus.Invalidf("no member given (the lead is %q)", teambus.Lead)
	}
	if a.Member != teambus.Lead {
		if err := teambus.ValidateMemberID(a.Member); err != nil {
			return err
		}
	}
	if a.Session != "" {
		return teambus.ValidateSession(a.Session)
	}
	return nil
}

// IsLead reports whether the actor is the lead.
func (a Actor) IsLead() bool { return a.Member == teambus.Lead }
