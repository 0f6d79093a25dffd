//go:build !teambus_client

package main

import "github.com/nats-io/nats-server/v2/server"

// natsServerVersion is the version of the NATS server this binary embeds:
// the full build does (bus start, serve, ui, demo, agent-sim, bench).
func natsServerVersion() string { return server.VERSION }
