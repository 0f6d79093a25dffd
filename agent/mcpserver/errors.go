package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/teamapi"
)

// errNotBound is the answer of a member tool without identity.
var errNotBound = teambus.Invalidf("not bound: this MCP server does not know which team member it acts for; set TEAMBUS_TEAM and TEAMBUS_MEMBER (and TEAMBUS_SESSION) in its environment, or install the hooks with `teambus init claude`, or start it with `teambus mcp --join`")

// errNoTeam is the answer of a read-only tool without a team.
var errNoTeam = teambus.Invalidf("not bound: no team known; set TEAMBUS_TEAM in the MCP server's environment, or install the hooks with `teambus init claude`")

// classPrefix returns the bracketed exit class of err.
func classPrefix(err error) string {
	switch teambus.ExitCode(err) {
	case teambus.ExitPermanent:
		return "[permanent]"
	case teambus.ExitConflict:
		return "[conflict]"
	default:
		return "[transient]"
	}
}

// errorText is the text of a tool error: the class, the error, and what
// to do.
func errorText(err error) string {
	msg := cleanLine(err.Error())
	switch teambus.ExitCode(err) {
	case teambus.ExitPermanent:
		return "[permanent] " + msg
	case teambus.ExitConflict:
		if errors.Is(err, teambus.ErrFenced) {
			return "[conflict] " + msg + ": stop acting as this member"
		}
		return "[conflict] " + msg + ": someone else changed it first; read the state again (task_show, team_status) and decide anew"
	default:
		if errors.Is(err, teamapi.ErrQuota) {
			return "[transient] " + msg // it says when to send again
		}
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return "[transient] " + msg + ": timed out; retry"
		}
		return "[transient] " + msg + ": retry in a moment"
	}
}

// toolError is the result of a failed call.
func toolError(err error) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: errorText(err)}}}
}

// fenced rewrites a fenced error of a session replaced by a newer
// incarnation as the spec words it.
func fenced(err error, id Identity, current string, epoch int64) error {
	if !errors.Is(err, teambus.ErrFenced) || current == "" || current == id.Session {
		return err
	}
	return teambus.Fencedf("this session was replaced by incarnation %d (member %s of team %s is now session %q)", epoch, id.Member, id.Team, clip(current, 80))
}

// prefixed reports whether a tool error text already carries a class.
func prefixed(s string) bool {
	return strings.HasPrefix(s, "[transient]") || strings.HasPrefix(s, "[permanent]") || strings.HasPrefix(s, "[conflict]")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s…", s[:n])
}
