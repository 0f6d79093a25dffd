//go:build teambus_client

package main

import (
	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
)

// The client build (-tags teambus_client, installed as teambus-client)
// leaves out the commands that run or need the embedded NATS server: the
// node, the web view, the demo and the benchmarks. What agents, hooks and
// sidecars run is all here, and the process starts without the server's
// packages: faster one-shot commands, smaller sidecars.

// natsServerVersion says the client build embeds no NATS server.
func natsServerVersion() string { return "not linked" }

var (
	busCommand      = fullOnly("bus", "run, inspect and stop the embedded NATS JetStream node")
	serveCommand    = fullOnly("serve", "host the team service beside an external NATS")
	uiCommand       = fullOnly("ui", "serve the read-only web view")
	demoCommand     = fullOnly("demo", "run the demo story")
	agentSimCommand = fullOnly("agent-sim", "a simulated agent (demo)")
	benchCommand    = fullOnly("bench", "measure teambus against standalone peers")
)

// fullOnly is a command of the full build: here it says where to find it.
func fullOnly(name, usage string) func() *cli.Command {
	return func() *cli.Command {
		return &cli.Command{
			Name:            name,
			Usage:           usage + " (full build only)",
			HideHelp:        true,
			SkipFlagParsing: true,
			Action: func(*cli.Context) error {
				return teambus.Invalidf("`%s` is not in this client build (teambus-client): run it with the full teambus binary (go install ./cmd/teambus)", name)
			},
		}
	}
}
