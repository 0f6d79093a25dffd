//go:build teambus_client

package main

import (
	"os"
	"path/filepath"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
)

// The client build (-tags teambus_client, installed as teambus-client)
// leaves out the commands that run or need the embedded NATS server: the
// node, the web view, the demo and the benchmarks. What hooks, sidecars
// and one-shot commands run is here, and the process starts without the
// server's packages: faster one-shot commands, smaller sidecars. The MCP
// server is left out too (the MCP SDK's packages cost every start a few
// tenths of a millisecond): `teambus-client mcp` runs the full teambus
// beside it, in its place.

// natsServerVersion says the client build embeds no NATS server.
func natsServerVersion() string { return "not linked" }

var (
	busCommand      = fullOnly("bus", "run, inspect and stop the embedded NATS JetStream node")
	serveCommand    = fullOnly("serve", "host the team service beside an external NATS")
	uiCommand       = fullOnly("ui", "serve the read-only web view")
	demoCommand     = fullOnly("demo", "run the demo story")
	agentSimCommand = fullOnly("agent-sim", "a simulated agent (demo)")
	benchCommand    = fullOnly("bench", "measure teambus against standalone peers")
	mcpCommand      = inFull("mcp", "serve the team to an MCP-capable agent over stdio (runs the full teambus beside this binary)")
)

// inFull is a command of the full build that this build hands over to:
// it replaces itself with the teambus binary in its own directory, same
// arguments, same standard input and output.
func inFull(name, usage string) func() *cli.Command {
	return func() *cli.Command {
		return &cli.Command{
			Name:            name,
			Usage:           usage,
			HideHelp:        true,
			SkipFlagParsing: true,
			Action: func(c *cli.Context) error {
				exe, err := os.Executable()
				if err == nil {
					exe, err = filepath.EvalSymlinks(exe)
				}
				if err != nil {
					return teambus.Invalidf("`%s` runs from the full teambus binary: find this binary: %w", name, err)
				}
				full := filepath.Join(filepath.Dir(exe), "teambus")
				if fi, err := os.Stat(full); err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
					return teambus.Invalidf("`%s` runs from the full teambus binary, and there is none beside %s: install it there (go install ./cmd/teambus)", name, exe)
				}
				args := append([]string{full, name}, c.Args().Slice()...)
				if err := syscall.Exec(full, args, os.Environ()); err != nil {
					return teambus.Unavailablef("run %s %s: %w", full, name, err)
				}
				return nil
			},
		}
	}
}

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
