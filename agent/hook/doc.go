// Package hook is `teambus hook <Event>`: the Claude Code hook handlers
// that make a session a durable team member.
//
// Every hook is a short-lived process that reads one JSON payload from
// stdin, writes at most one JSON envelope to stdout and exits 0. Any
// internal error is fail-open: exit 0, empty stdout, empty stderr and one
// JSON line in $TEAMBUS_DIR/logs/hooks.log. The whole hook runs within a
// budget (2 s by default); the bus connection gets 300 ms and a failed
// connection is remembered in the binding for 30 s.
//
// Delivery (the hook drain): lease up to 50 messages of the member's inbox
// without Nak, render oldest first up to --max-context characters, write
// the envelope in one write, close stdout, and only then ack — each ack
// with its own deadline, and only while the hook is at least 500 ms inside
// its budget; what was not acked is released and comes back marked as a
// possible repeat. Nothing is acked that was not written.
//
// SessionStart binds the Claude process (package binding), registers the
// member (a teammate joins, the lead runs the resume validation), spawns
// the sidecar with --adopt in its own session with its own log, and
// injects who the session is, its brief and its mail. `hook wait` is the
// asyncRewake waiter that wakes an idle session when mail arrives.
//
// Where Claude Code 2.1.330 behaves otherwise than its documentation says,
// the code follows what was observed and says so beside it.
package hook
