//go:build teambus_client

package main

import (
	"fmt"
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
				full, err := fullBeside()
				if err != nil {
					return teambus.Invalidf("`%s` runs from the full teambus binary: %w", name, err)
				}
				return execFull(full, name, c.Args().Slice())
			},
		}
	}
}

// fullOnly is a command of the full build. A session bound by the hooks
// runs this build as its `teambus` (the SessionStart hook puts it first
// on the session's PATH), so the command is handed over to the full build
// beside it when there is one; otherwise the error says where to find it.
func fullOnly(name, usage string) func() *cli.Command {
	return func() *cli.Command {
		return &cli.Command{
			Name:            name,
			Usage:           usage + " (full build only)",
			HideHelp:        true,
			SkipFlagParsing: true,
			Action: func(c *cli.Context) error {
				full, err := fullBeside()
				if err != nil {
					return teambus.Invalidf("`%s` is not in this client build (teambus-client): run it with the full teambus binary (go install ./cmd/teambus)", name)
				}
				return execFull(full, name, c.Args().Slice())
			},
		}
	}
}

// fullBeside is the full teambus binary in the directory of this one
// (symbolic links resolved).
func fullBeside() (string, error) {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return "", fmt.Errorf("find this binary: %w", err)
	}
	full := filepath.Join(filepath.Dir(exe), "teambus")
	if full == exe {
		return "", fmt.Errorf("%s is the client build itself", exe)
	}
	if fi, err := os.Stat(full); err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("there is no full teambus binary beside %s: install it there (go install ./cmd/teambus)", exe)
	}
	return full, nil
}

// execFull replaces this process with the full build running the command.
func execFull(full, name string, args []string) error {
	argv := append([]string{full, name}, args...)
	if err := syscall.Exec(full, argv, os.Environ()); err != nil {
		return teambus.Unavailablef("run %s %s: %w", full, name, err)
	}
	return nil
}
