// Command jsonl is the one-shot peer of `teambus bench`: what a user would
// run instead of a teambus command to record one message durably. It opens
// FILE for appending (creating it), appends one JSON line holding a message
// whose body is --size bytes, fsyncs and exits.
//
// It imports only the standard library and has its own small main, so its
// start-up is that of a small Go program, not of the teambus binary: the
// bench builds it once per run with `go build`.
//
//	jsonl [--size N] FILE
package main
