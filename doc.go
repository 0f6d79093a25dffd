// Package teambus holds the domain of teambus: teams, members, tasks,
// messages and team policy, the id rules, the sentinel errors, and the
// pure state transitions (claim, complete, unblock dependents, crash
// policy). One file per concept: team.go, member.go, task.go, message.go,
// policy.go, checkpoint.go, id.go, text.go, errors.go.
//
// Nothing in this package does I/O and it imports no other package of
// teambus: everything else imports it. The eventlog package holds the
// team event log (envelope, JSON Lines reader, resume analysis),
// the node package runs the embedded NATS node and the team service, the
// bus package is the client side (mailbox, event stream, replay), the kv
// package stores these records in JetStream KV with compare-and-set on
// every write, the lead and teammate packages run the sidecars, and
// cmd/teambus is the command line.
//
// Errors are classified by the sentinel errors of errors.go; the command
// line maps them to its exit codes (0 ok, 1 transient,
// 2 permanent, 3 conflict).
package teambus
