// Package initclaude is `teambus init claude`: which hook handlers teambus
// installs, how they are merged into a Claude Code settings file and taken
// out again, the optional MCP entry, CLAUDE.md block and skill, the plugin
// layout, and the installer that puts them together (installer.go,
// installcheck.go): Install, Check and Remove take an InstallOptions (the
// scope, the identity, the choices, and where the user is) and return a
// Result to report. They find Claude Code and its version, plan and apply
// the changes, register the MCP server through `claude mcp`, and ask the
// bus whether the team and member exist through the Bus the caller passes.
// It knows nothing about flags or the connection; cmd/teambus/init.go reads
// the flags into InstallOptions and prints the Result.
//
// # Credentials
//
// An install with an identity gives the sessions the member's (or the
// lead's) credential, never the node token (creds.go): it issues or reuses
// the file CredsPath(CredsDir, team, member) through the operator's Bus
// before any handler is written, and the handlers carry `--creds PATH` with
// the identity where the identity is baked; elsewhere the sessions take
// TEAMBUS_CREDS from their environment. A run without the operator's
// connection reuses a file the operator handed out once ConnectCreds
// succeeds. Check reports per location which credential the handlers use
// (CredUse) and makes every way a session would hold the token a problem
// with exit 2 and its fix. Remove keeps the credential unless Revoke.
// InstallOptions.TokenHandlers writes the handlers of old (the bus location
// baked, the token read from the bus directory).
//
// # Handlers
//
// Handlers returns the table of handlers for an Options value: one matcher
// group per event, exec form (`"command": "<bin>", "args": ["hook", …]`) or,
// with ShellForm, `"command": "exec '<bin>' hook <Event> …"`. The identity
// (`--team T --member M`) is in the args only when Options.Team is set; the
// caller decides where it may be baked, with the credential file
// (`--creds PATH`) or, for token handlers, the bus location (`--bus`).
// Arguments the hook command must accept, beyond `hook <Event> [--team T
// --member M]`:
//
//   - `--budget 1s` on every handler whose timeout is below 10 s (PostCompact,
//     Notification, StopFailure, SessionEnd: 5 s), so the budget stays at most
//     1/5 of the timeout; the hook's default budget (2 s) fits the others.
//   - `--autonomous` on the Stop handler with Options.Autonomous (teammates).
//   - `--wake=directed` on the `hook wait` handler with WakeDirected.
//
// # Ownership and merge
//
// A handler is teambus's when its type is "command" and either its command's
// base name is `teambus` and args[0] is "hook" (exec form), or its command
// matches ^(exec )?'?[^ ]*teambus'? hook (shell form). teambus never edits a
// user's matcher group except to take its own handlers out of it; its own
// handlers go in groups of their own appended to each event array.
//
// Merge works on raw JSON: the file must be strict JSON (json.Valid: no
// comments, no trailing commas), is split into an ordered list of members
// whose values are kept as the bytes they were written as, and only the
// containers teambus changes (the top-level object, "hooks", the event
// arrays it edits, a user group it took a handler out of) are written again,
// with 2-space indentation in the layout of JSON.stringify(v, null, 2), the
// layout Claude Code itself writes. A settings file written by Claude Code
// therefore keeps every byte that is not teambus's, and Merge of its own
// output is the identity. Merge also takes teambus handlers out of events it
// no longer installs (a PostToolUse fallback after an upgrade), not only
// from the events it manages now: two generations of teambus handlers
// would otherwise both fire.
//
// Event arrays that are null are dropped wherever they are (Claude Code
// expects arrays); an empty array is dropped only in an event
// teambus edits, so a user's untouched "[]" keeps its bytes.
//
// # Files
//
// Every write is a temporary file in the same directory, fsync, rename and
// a directory fsync; a symbolic link is written through (the link stays). The
// first write of an existing file keeps its original bytes in
// "<file>.teambus.bak". Remove gives back the backup's exact bytes when the
// file without teambus's parts means the same JSON as the backup, deletes a
// file teambus created (no backup, nothing left but {}), and otherwise keeps
// every non-teambus value byte for byte.
package initclaude
