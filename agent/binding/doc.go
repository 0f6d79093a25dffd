// Package binding owns the identity of an agent session: which team member
// a Claude Code process acts for.
//
// A SessionStart hook binds the Claude process — identified by its pid and
// its start time (field 22 of /proc/<pid>/stat), so a reused pid is never
// the same agent — to a member by writing a binding file,
// $TEAMBUS_DIR/agents/<hostname>/<claude pid>.json, mode 0600, with
// write-to-temp and rename. Every later hook, `teambus mcp` (a child of the
// Claude process) and every `teambus` command run from Claude's Bash tool
// find it through Resolve: the Claude pid is $CLAUDE_PID (Claude Code ≥
// 2.1.214), else the first ancestor that is not a shell.
//
// Updates of a binding are read-modify-write under the flock of
// <pid>.lock (Update); the same lock serialises the hooks' mail drains, so
// concurrent PostToolUse hooks never deliver the same mail twice. A waiter
// (`teambus hook wait`) holds <pid>.wait.lock for its whole life: one per
// process. Bindings of dead processes are removed by Cleanup, which any
// SessionStart runs.
package binding
