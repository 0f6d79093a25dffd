// Package teambus holds the domain of teambus: teams, members, tasks,
// messages, events and team policy, the id rules, and the pure state
// transitions (claim, complete, unblock dependents, crash policy), and
// the event log of seed 004: the envelope (event.go), a JSON Lines reader
// that never gives up on the content (jsonl.go) and the resume analysis
// (analyze.go).
//
// Nothing in this package does I/O. The bus package runs the embedded NATS
// node and the mailbox, the kv package stores these records in JetStream KV
// with compare-and-set on every write, the lead and teammate packages run the
// sidecars, and cmd/teambus is the command line.
//
// Errors are classified by the sentinel errors of errors.go; the command
// line maps them to the exit codes of the specification (0 ok, 1 transient,
// 2 permanent, 3 conflict).
package teambus
