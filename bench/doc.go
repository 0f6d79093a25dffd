// Package bench measures teambus beside the file-based approaches it
// replaces and beside the disk's own limit, in one process on one
// directory, and reports every teambus figure as a ratio to its peer.
//
// # What runs
//
//   - The limit: a 4 KiB write + fsync loop on one file.
//   - The peers: a JSONL file appended with an fsync per line (the fd kept
//     open); an inbox kept as one JSON array, read, changed and written
//     back atomically (temporary file, fsync, rename, fsync of the
//     directory) at 100, 1,000 and 10,000 messages; a state.json with
//     flock for claims; the same state.json read for a resume; a one-shot
//     process that appends one JSONL line and fsyncs: bench/peers/jsonl, a
//     standalone program with its own small main and only the standard
//     library, as a user would write it, built once per run with `go build`
//     from the source embedded here (without a go command its rows say
//     "skipped: no go toolchain to build the peer"). It is never the
//     teambus binary re-executed: a ratio against a peer is honest only if
//     the peer is what a user would otherwise run.
//   - teambus on an embedded node with sync always (fsync before every
//     acknowledgement, the default): pipelined sends (Mailbox.SendAsync,
//     a window of 256 unacknowledged publishes), sends one at a time
//     (Mailbox.Send and team.Service.Send), one-shot `teambus send`
//     processes, the Claude Code hooks as Claude runs them (`teambus hook
//     PostToolBatch` of a bound member with an empty inbox, interleaved
//     with the JSONL peer; `teambus hook SessionStart` of a new session:
//     binding, registration, sidecar spawn, the sidecar killed after each
//     run), the transcript sync inside `teambus hook PostToolBatch` of a
//     session whose 10 MB transcript grows by 20 KB per run (and the bytes
//     its team's transcript stream then holds, against the transcript's
//     size), tool calls through a running `teambus mcp` over stdio (send,
//     beside team.Service.Send of the same message from this process;
//     inbox returning 50 waiting messages), inbox read + ack, claims by 8
//     contending members, resume of large teams, failure detection by real
//     sidecar processes, the automatic respawn of a crashed member (the
//     real Claude Code, headless, against a fake Messages API on loopback,
//     spawned on a `teambus host`, killed -9 mid-task: from the kill to the
//     respawned session's first model request; skipped without Claude
//     Code), 1,000 teams of 10 created by 4 concurrent
//     creators on a node with default flags and `team list --json` of
//     them, the memory of the node (idle, per idle team: the lower of two
//     readings 10 s and 30 s after the creates) and of a sidecar, and the
//     CPU the node spends on 1,000 heartbeating members. Sends are also
//     measured on a node with sync interval, as separate rows.
//
// # Honesty rules
//
// Nothing measured on the teambus path turns off the per-message fsync
// unless the row says "sync interval". Setup that is not measured (filling
// a mailbox with a million messages for the resume rows) runs on a node
// with sync interval, which is then closed and reopened with sync always
// on the same store before anything is timed.
//
// Targets are checked and reported, never enforced: a run fails only when
// a measurement can not run at all.
package bench
