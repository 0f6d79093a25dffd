// Package bustest starts real embedded bus nodes for tests: NewServer
// gives a JetStream node on a random loopback port in a temporary
// directory, closed when the test ends; Connect opens an in-process
// connection to it; CheckFor polls for a condition instead of sleeping.
//
// There are no mocks of NATS here or anywhere in teambus: a node starts in
// a few milliseconds.
package bustest
