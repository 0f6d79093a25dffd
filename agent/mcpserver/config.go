package mcpserver

import (
	"context"
	"log/slog"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// Identity is who the agent acts as: member Member of team Team in
// session Session. Team without Member is enough for the read-only tools.
type Identity struct {
	Team    string
	Member  string
	Session string
}

// Bound reports whether the identity names a member.
func (id Identity) Bound() bool { return id.Team != "" && id.Member != "" }

// Actor is the identity as a team actor.
func (id Identity) Actor() team.Actor {
	return team.Actor{Team: id.Team, Member: id.Member, Session: id.Session}
}

// ToolSet selects the tools a server lists.
type ToolSet string

// Tool sets: all (member tools, and the lead tools for the lead), member
// (no lead tools), readonly (only the tools that change nothing).
const (
	ToolsAll      ToolSet = "all"
	ToolsMember   ToolSet = "member"
	ToolsReadOnly ToolSet = "readonly"
)

// Config configures a Server.
type Config struct {
	// API runs the member calls, every request acting as the identity: a
	// teamapi.Client over the team service (a member's credential, or the
	// operator's token), or team.Service.API() on the team state.
	API teamapi.API
	// Direct, if set, is the team state (the operator's connection): it
	// serves what the member API does not offer (task_add, team_resume,
	// team_probe, the replay of the whole mailbox) and the reads of the
	// records. Without it those lead calls are refused and replay returns
	// the caller's own mail.
	Direct *team.Service
	// Resolve returns the identity of the agent. It is called at every
	// tool call (and tools/list), so identity bound after start is seen;
	// a zero Identity with a nil error means not bound yet.
	Resolve func(ctx context.Context) (Identity, error)
	// Version is the teambus version the server reports.
	Version string
	// Tools is the tool set; empty means all.
	Tools ToolSet
	// Logger receives the server's logs (never stdout); nil discards.
	Logger *slog.Logger
	// CallTimeout, if positive, limits every tool call (inbox gets its
	// wait_seconds on top).
	CallTimeout time.Duration
	// OnAck, if set, is called after the mail of an inbox(ack:true) call was
	// acked (acked seqs) or released (nil) following its response's write.
	OnAck func(acked []uint64, err error)
	// Spawner, if set, offers the lead the member_spawn tool.
	Spawner MemberSpawner
}

// Validate checks the config.
func (c *Config) Validate() error {
	if c.API == nil {
		return teambus.Invalidf("mcp server: no member API")
	}
	if c.Resolve == nil {
		return teambus.Invalidf("mcp server: no identity resolver")
	}
	switch c.Tools {
	case "":
		c.Tools = ToolsAll
	case ToolsAll, ToolsMember, ToolsReadOnly:
	default:
		return teambus.Invalidf("invalid --tools %q: all, member or readonly", c.Tools)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	return nil
}

// StaticIdentity returns a resolver of a fixed identity.
func StaticIdentity(id Identity) func(context.Context) (Identity, error) {
	return func(context.Context) (Identity, error) { return id, nil }
}
