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
// Nothing here does I/O but read the io.Reader it is given. The bus
// package stores events in a team's event stream and replays them; the
// command line reads and writes JSONL files with this package.
package eventlog
