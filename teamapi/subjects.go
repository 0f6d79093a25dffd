package teamapi

// Accounts and subjects of the team service.
const (
	// MemberAccountPrefix starts the name of a team's member account,
	// TBM_<team>: the account its members' credentials land in. It holds
	// no JetStream, only the import of the team service.
	MemberAccountPrefix = "TBM_"
	// MemberServicePrefix is what a member publishes its requests to, in
	// its member account: tb.<verb>.
	MemberServicePrefix = "tb"
	// ServicePrefix is the subject space of the team service in the data
	// account: tbsvc.<team>.<verb>. The data account exports it; a member
	// account imports the subjects of its own team only.
	ServicePrefix = "tbsvc"
	// ServiceName is the team service's micro name ($SRV discovery).
	ServiceName = "teambus"
)

// MemberAccount is the member account of team.
func MemberAccount(team string) string { return MemberAccountPrefix + team }

// ServiceSubject is the subject of a verb of team's service in the data
// account; verb may be ">" or "*".
func ServiceSubject(team, verb string) string { return ServicePrefix + "." + team + "." + verb }

// MemberServiceSubject is the subject a member requests verb on.
func MemberServiceSubject(verb string) string { return MemberServicePrefix + "." + verb }
