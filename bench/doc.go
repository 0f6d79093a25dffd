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
//     process that appends one JSONL line and fsyncs (the teambus binary
//     re-executed with the hidden bench-jsonl-once command, so both
//     one-shot rows pay the same process start-up).
//   - teambus on an embedded node with sync always (fsync before every
//     acknowledgement, the default): pipelined sends (Mailbox.SendAsync,
//     a window of 256 unacknowledged publishes), sends one at a time
//     (Mailbox.Send and team.Service.Send), one-shot `teambus send`
//     processes, inbox read + ack, claims by 8 contending members, resume
//     of large teams, failure detection by real sidecar processes, the
//     memory of the node and of a sidecar, and the CPU the node spends on
//     1,000 heartbeating members. Sends are also measured on a node with
//     sync interval, as separate rows.
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
