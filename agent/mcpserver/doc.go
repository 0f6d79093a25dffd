// Package mcpserver is `teambus mcp`: a Model Context Protocol server (on
// the official Go SDK, github.com/modelcontextprotocol/go-sdk) that makes
// any MCP-capable agent — Claude Code, Codex, Cursor, OpenCode — a team
// member. The agent sends, reads and acks mail, claims and finishes tasks,
// checkpoints, and a lead manages the team, through typed tools whose
// schemas the SDK infers from the In/Out structs of tools.go.
//
// Identity is resolved lazily at every call (Config.Resolve): the server
// may start before the agent's session is bound (a Claude Code MCP server
// starts before SessionStart runs), and a session replaced by a newer
// incarnation is refused ([conflict]) on its next call. Without identity
// only whoami and, when the team is known, the read-only tools work; the
// member tools say how to bind. The lead tools are listed only for member
// lead; when identity becomes bound after start the server adds them and
// the SDK sends notifications/tools/list_changed.
//
// Ack after write (ackwrite.go): inbox with ack:true never acks inside the
// handler. It leases the mail (an inbox read in lease mode: in flight,
// invisible to other readers, held by tokens), and the transport wrapper acks it only when the Write of
// that call's JSON-RPC response returned without error. A cancelled call,
// a failed write, an error result or a closed connection releases the
// mail (Nak) so the next reader gets it at once. inbox with ack:false is a
// peek (an inbox read in peek mode): the mail is read and released in one
// step, in one request, before the handler returns; nothing is held.
//
// inbox builds its own result (addResult): the SDK validates its
// arguments and advertises the output schema inferred from InboxOut as
// for every tool, but does not encode the result and decode it again to
// validate it. On a stdio connection (mcp.IOTransport) the result is
// encoded once, ahead, and the transport wrapper splices it into the
// response line in place of a placeholder (ackwrite.go): the line is the
// one the SDK would write, without its three further passes over ~120
// KiB of JSON for 50 messages.
//
// Errors: every failure is a tool error (isError) whose text starts with
// the teambus exit class — [transient] (retry), [permanent] (fix the
// input), [conflict] (lost a race, or this session was replaced) — and
// says what to do.
//
// The tools call one teamapi.API (Config.API), each request acting as
// the identity: a teamapi.Client over the request/reply team service (the
// one path for a member credential, whose account has no JetStream, and
// for the operator whenever a service answers), or team.Service.API() on
// the team state (the operator's bus without a team service). Either way
// an inbox lease is acked or released by token, so ack after write holds
// the same. The member API offers no task add, resume, probe or
// whole-mailbox replay: Config.Direct (a team.Service, operator only)
// serves them and the record reads, and without it they are refused
// ([permanent]) or, for replay, limited to the caller's own mail. The
// server holds no consumer and no lock while idle: a lease lives only
// from an inbox call to the write of its response.
package mcpserver
