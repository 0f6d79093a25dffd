// Package eventlog is the team event log, apart from the domain:
// the envelope every line carries (event.go: Event, the event types, the
// canonical encoding, Parse and Decoder), a JSON Lines reader that never
// gives up on the content (jsonl.go: Reader, Damaged), the resume analysis
// (analyze.go: Analyzer, AnalyzeJSONL) and the JSON scanner under both
// (jsonscan.go). The scanner is hand-written because the maintained
// tokenizers (jsontext, in go-json-experiment and behind GOEXPERIMENT=jsonv2)
// keep under 70% of its speed on a million lines; jscan's doc comment has
// the measurement.
//
// The envelope, the reader and the analysis do no I/O but read the
// io.Reader they are given; the command line reads and writes JSONL files
// with them.
//
// # The event stream
//
// Every team has an event stream, TBE_<team> (events.go: Events), in that
// envelope ({v, ts, sid, seq, type, feature, agent, pane_id, data}):
// subjects tb.<team>.evt.<sid token>.<type token>, where the sid token is
// a hash of the sid and the type token the type with dots as dashes (a
// hash for types outside the rule), so user text never forms a subject;
// file storage, DiscardNew with an explicit MaxBytes, and a dedupe window
// on the message id ev/<hash of sid>/<seq>. An event without a seq gets
// the session's next one: the last event of the session (a direct get,
// last by subject over the session's wildcard) plus one, published with
// an expected-last-subject-sequence on that wildcard, retried when
// another writer won. Imported lines are stored exactly as written, so
// Export returns them byte for byte; Import checks the stream itself as
// well as the dedupe window, so importing a file twice stores it once.
// Replay reads through an ordered consumer (bus.ReadOrdered, constant
// memory), filtering type and session on the server and agent and times
// on the client. The stream's declaration and the refusals it shares with
// the mailbox are bus.TeamStream's.
package eventlog
