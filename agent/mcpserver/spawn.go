package mcpserver

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MemberSpawner starts a member's agent session for the lead's
// member_spawn tool (package spawn implements it: spawn.LeadSpawner).
// Without one the tool is not offered.
type MemberSpawner interface {
	SpawnMember(ctx context.Context, teamID string, in MemberSpawnIn) (MemberSpawnOut, error)
}

// MemberSpawnIn is the input of member_spawn.
type MemberSpawnIn struct {
	Member string   `json:"member" jsonschema:"the member to start"`
	Cwd    string   `json:"cwd,omitempty" jsonschema:"its working directory, absolute (default: where teambus mcp runs)"`
	Tmux   bool     `json:"tmux,omitempty" jsonschema:"run it in a tmux window (teambus attach TEAM MEMBER) instead of headless"`
	Prompt string   `json:"prompt,omitempty" jsonschema:"first prompt of a fresh session (default: its brief)"`
	On     string   `json:"on,omitempty" jsonschema:"the teambus host to run it on (default: its last host if alive, else here)"`
	Args   []string `json:"args,omitempty" jsonschema:"arguments for claude, e.g. [\"--allowedTools\", \"Bash\"]"`
	Force  bool     `json:"force,omitempty" jsonschema:"start it even though it runs (the running session is fenced)"`
	Fresh  bool     `json:"fresh,omitempty" jsonschema:"a new conversation even when its transcript could be resumed"`
}

// MemberSpawnOut is what member_spawn started.
type MemberSpawnOut struct {
	Member  string `json:"member"`
	Host    string `json:"host,omitempty" jsonschema:"the teambus host that runs it; empty: the machine of this server"`
	Machine string `json:"machine"`
	Mode    string `json:"mode" jsonschema:"headless or tmux"`
	PID     int    `json:"pid"`
	From    string `json:"from" jsonschema:"prompt (fresh), transcript (resumed its conversation) or brief"`
	Session string `json:"session,omitempty" jsonschema:"the Claude session resumed"`
	Note    string `json:"note,omitempty" jsonschema:"why no transcript was resumed"`
	Reclaim string `json:"reclaim,omitempty" jsonschema:"the task its crash requeued, given back to it when it registers"`
}

// addSpawnTool registers member_spawn for the lead when a spawner is
// configured.
func (s *Server) addSpawnTool() {
	if s.cfg.Spawner == nil {
		return
	}
	add(s, action("member_spawn", "Lead: start a member's agent session (Claude Code with the teambus hooks, headless unless tmux) here or on a teambus host. A crashed member resumes its conversation from its transcript when one was synced, else starts from its brief; its requeued task comes back to it. Refused while the member runs ([conflict]; force replaces it) or is paused past its crash budget.", false), needMember, s.memberSpawn)
}

func (s *Server) memberSpawn(ctx context.Context, _ *mcp.CallToolRequest, id Identity, in MemberSpawnIn) (MemberSpawnOut, string, error) {
	if err := s.leadCheck(ctx, id); err != nil {
		return MemberSpawnOut{}, "", err
	}
	out, err := s.cfg.Spawner.SpawnMember(ctx, id.Team, in)
	if err != nil {
		return MemberSpawnOut{}, "", err
	}
	where := "on this machine (" + out.Machine + ")"
	if out.Host != "" {
		where = "on host " + out.Host
	}
	text := fmt.Sprintf("spawned %s %s: pid %d, %s, from %s", out.Member, where, out.PID, out.Mode, out.From)
	if out.Note != "" {
		text += "; no transcript resumed: " + cleanLine(out.Note)
	}
	if out.Reclaim != "" {
		text += "; task " + out.Reclaim + " goes back to it when it registers"
	}
	return out, text, nil
}
