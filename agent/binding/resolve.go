package binding

import (
	"errors"
	"fmt"

	"github.com/teambus/teambus"
)

// Identity is who a process acts as.
type Identity struct {
	Team    string
	Member  string
	Session string
	Epoch   int64
	Role    string
	// ClaudePID is the agent process the binding belongs to; 0 when the
	// identity came from the environment alone.
	ClaudePID int
}

// Resolve finds the identity of a process whose ancestor is a bound Claude
// process (`teambus mcp`, a command from the Bash tool): TEAMBUS_TEAM,
// TEAMBUS_MEMBER and TEAMBUS_SESSION when all are set, else the binding of
// the Claude pid (CLAUDE_PID or the first non-shell ancestor), checked
// against its start time. ok is false when there is none; an error is a
// binding that exists but can not be used.
func Resolve(stateDir string, getenv func(string) string) (Identity, bool, error) {
	env := Identity{Team: getenv("TEAMBUS_TEAM"), Member: getenv("TEAMBUS_MEMBER"), Session: getenv("TEAMBUS_SESSION")}
	if env.Team != "" && env.Member != "" && env.Session != "" {
		return env, true, nil
	}
	pid, err := ClaudePID(getenv)
	if err != nil {
		return Identity{}, false, nil
	}
	b, err := Load(stateDir, pid)
	if errors.Is(err, ErrNoBinding) {
		return Identity{}, false, nil
	}
	if err != nil {
		return Identity{}, false, err
	}
	if !b.Alive() {
		return Identity{}, false, nil
	}
	if b.Fenced {
		return Identity{}, false, teambus.Fencedf("session %s of %s was replaced by a newer incarnation", b.Session, b.Member)
	}
	if (env.Team != "" && env.Team != b.Team) || (env.Member != "" && env.Member != b.Member) {
		return Identity{}, false, fmt.Errorf("TEAMBUS_TEAM/TEAMBUS_MEMBER (%s/%s) differ from the binding of process %d (%s/%s)", env.Team, env.Member, pid, b.Team, b.Member)
	}
	return Identity{Team: b.Team, Member: b.Member, Session: b.Session, Epoch: b.Epoch, Role: b.Role, ClaudePID: pid}, true, nil
}

// SessionID is the session id of a bound Claude process: cc-<claude
// session id>-p<pid> (§12.1.3).
func SessionID(claudeSession string, pid int) string {
	return fmt.Sprintf("cc-%s-p%d", claudeSession, pid)
}
