// Package nodetest starts real embedded bus nodes for tests: NewServer
// gives a JetStream node with the team service on a random loopback port
// in a temporary directory, closed when the test ends; NewBareServer the
// same node without the team service; Connect opens an in-process
// connection to a node. bustest.CheckFor polls for a condition instead of
// sleeping.
//
// There are no mocks of NATS here or anywhere in teambus: a node starts in
// a few milliseconds.
package nodetest
