//go:build !teambus_client

package main

// linkedServer says whether this binary embeds the NATS server: the full
// build does (bus start, serve, ui, demo, agent-sim, bench).
const linkedServer = true
