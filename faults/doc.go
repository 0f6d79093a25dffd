// Package faults is the fault suite that proves nothing is lost: a
// Jepsen-style history checker (the package's only code) and, in its
// tests, the fault scenarios — kill -9 and SIGSTOP of the bus, of senders, consumers and sidecars, a full disk, corrupted and
// truncated store files, clock skew, claim races, configuration invariants
// and resource leaks across restarts.
//
// # The checker
//
// Every send carries a unique id, sender:seq (MsgID), as its message id,
// so it travels as the Nats-Msg-Id a retry reuses. A History records each
// attempt of a send (Invoke) and how it ended: acknowledged (Ack, with the
// stream sequence and the server's duplicate flag), definitely failed
// (Fail) or ambiguous (Unknown: a timeout or a lost connection). Readers
// record every message they see (Read): a Stored read is one copy found by
// a scan of the whole stream, a Delivered read is one delivery to a
// consumer. After the faults stop and a full drain, Check reports
//
//   - lost: acknowledged but never read, classified per (sender, mailbox)
//     as lost-prefix, lost-middle or lost-postfix;
//   - duplicate-stored: one id stored at two stream sequences (a failed
//     dedupe), kept apart from redelivered: one stored copy delivered more
//     than once, which is allowed (at-least-once) and only counted;
//   - unexpected: read but never attempted; failed-read: read although every
//     attempt definitely failed; misrouted; corrupt: read with a payload
//     other than the one sent; reordered: a FIFO violation per (sender,
//     mailbox) between a send acknowledged before the next was attempted;
//     acked-copy-missing: the acknowledged sequence was never read;
//   - recovered: an ambiguous send that turned up (allowed).
//
// A result is valid when every invalid category is empty. The checker's own
// tests feed it broken histories, and a real bus the tests sabotage, and
// fail if it calls any of them valid.
//
// # The scenarios
//
// The tests of this package run the scenarios. The fast tier runs with
// every `go test`; TEAMBUS_SOAK=1 runs the soak tier: more cycles, longer
// loops, 1,000 claim rounds and a combined mix of faults. docs/testing.md
// lists the scenarios and their pass criteria.
package faults
