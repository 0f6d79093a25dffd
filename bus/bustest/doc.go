// Package bustest holds the test helpers of the client side that need no
// node: CheckFor polls for a condition instead of sleeping, Binary builds
// cmd/teambus once for tests that run it as a process. Nodes for tests
// come from package nodetest (NewServer, NewBareServer, Connect).
package bustest
