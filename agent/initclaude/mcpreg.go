package initclaude

import (
	"encoding/json"
	"path/filepath"
	"slices"
)

// MCPArgs are the arguments of the teambus MCP server that `claude mcp add`
// registers for o: the identity and the credential file (or, for token
// handlers, the bus location) baked in as the hooks' are, so the server acts for the same member even before (or
// without) the session's hook binding.
func MCPArgs(o Options) []string {
	args := []string{"mcp"}
	if o.Team != "" {
		args = append(args, "--team", o.Team, "--member", o.Member)
		if o.Bus != "" {
			args = append(args, "--bus", o.Bus)
		}
		if o.Creds != "" {
			args = append(args, "--creds", o.Creds)
		}
	}
	return args
}

// ClaudeJSON is Claude Code's own state file, where `claude mcp add` keeps
// the servers of the local scope (per project) and the user scope:
// ~/.claude.json, or .claude.json in $CLAUDE_CONFIG_DIR.
func ClaudeJSON(env Env) string {
	if env.Home != "" && env.ClaudeDir == filepath.Join(env.Home, ".claude") {
		return filepath.Join(env.Home, ".claude.json")
	}
	return filepath.Join(env.ClaudeDir, ".claude.json")
}

// Registration is the MCP server named teambus as Claude Code registered it.
type Registration struct {
	Command string   `json:"command"`
	Args    []string `json:"args"`
	// Project is the project it is registered for (local scope).
	Project string `json:"project,omitempty"`
}

// Owned reports whether teambus registered it: its command is teambus
// (or the client build) running mcp.
func (r Registration) Owned() bool {
	b := filepath.Base(r.Command)
	return (b == "teambus" || b == ClientBinary) && len(r.Args) > 0 && r.Args[0] == "mcp"
}

// Same reports whether r runs bin with args.
func (r Registration) Same(bin string, args []string) bool {
	return r.Command == bin && slices.Equal(r.Args, args)
}

// FindRegistration returns the teambus server of data (the contents of
// ClaudeJSON) at scope: user, or local for the first of projects that
// has one. ok is false when there is none (or data is not JSON).
func FindRegistration(data []byte, scope Scope, projects ...string) (Registration, bool) {
	type servers struct {
		MCPServers map[string]Registration `json:"mcpServers"`
	}
	var doc struct {
		servers
		Projects map[string]servers `json:"projects"`
	}
	if len(data) == 0 || json.Unmarshal(data, &doc) != nil {
		return Registration{}, false
	}
	if scope == ScopeUser {
		r, ok := doc.MCPServers["teambus"]
		return r, ok
	}
	for _, p := range projects {
		if r, ok := doc.Projects[p].MCPServers["teambus"]; ok {
			r.Project = p
			return r, true
		}
	}
	return Registration{}, false
}
