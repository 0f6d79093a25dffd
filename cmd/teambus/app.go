package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/internal/cliapp"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/team"
)

// newApp assembles the command line. The command list is written out here,
// one constructor per command file; prepare then gives every command the
// same help and usage-error handling.
func newApp(stdout, stderr io.Writer) *cli.App {
	return newAppWith(stdout, stderr, commands)
}

// topLevel is every top-level command with its constructor, in the order
// help lists them. The command list is written out here, one constructor
// per command file.
var topLevel = []struct {
	name  string
	build func() *cli.Command
}{
	{"bus", busCommand}, {"serve", serveCommand},
	{"team", teamCommand},
	{"task", taskCommand},
	{"send", sendCommand},
	{"inbox", inboxCommand},
	{"ack", ackCommand},
	{"replay", replayCommand},
	{"events", eventsCommand},
	{"checkpoint", checkpointCommand},
	{"lead", leadCommand},
	{"teammate", teammateCommand},
	{"join", joinCommand},
	{"spawn", spawnCommand}, {"host", hostCommand}, {"logs", logsCommand}, {"attach", attachCommand},
	{"init", initCommand},
	{"brief", briefCommand}, {"hook", hookCommand}, {"mcp", mcpCommand}, {"ui", uiCommand},
	{"demo", demoCommand}, {"agent-sim", agentSimCommand},
	{"bench", benchCommand},
	{"version", versionCommand},
	{"help", helpCommand},
}

// commands builds every command of the binary.
func commands() []*cli.Command {
	out := make([]*cli.Command, 0, len(topLevel))
	for _, c := range topLevel {
		out = append(out, c.build())
	}
	return out
}

// commandsFor returns what a run of args needs: only the command it names
// when it names one and asks for no help — Claude Code runs `teambus hook`
// several times a turn and agents run one-shot commands all the time, and
// building and preparing the ~60 commands costs ~3 ms of each run — and
// every command otherwise (help, --version, a mistyped name, no command),
// so help and the suggestions for a typo list them all.
func commandsFor(args []string) func() []*cli.Command {
	if len(args) < 2 {
		return commands
	}
	for _, a := range args[1:] {
		if a == "-h" || a == "--help" || a == "-help" {
			return commands
		}
		if a == "--" {
			break
		}
	}
	for _, c := range topLevel {
		if c.name == args[1] && c.name != "help" {
			build := c.build
			return func() []*cli.Command { return []*cli.Command{build()} }
		}
	}
	return commands
}

// newAppWith is the app with the commands cmds builds.
func newAppWith(stdout, stderr io.Writer, cmds func() []*cli.Command) *cli.App {
	app := &cli.App{
		Name:  "teambus",
		Usage: "keep a team of agent sessions alive across crashes, timeouts and restarts",
		Description: "teambus runs an embedded NATS JetStream node (teambus bus start), a sidecar beside each\n" +
			"agent session (teambus lead, teambus teammate) and the commands agents and hooks call.\n" +
			"Exit codes: 0 ok, 1 transient (retry may succeed), 2 permanent (bad input, not found,\n" +
			"illegal transition), 3 conflict (lost a race, fenced incarnation). Nothing to do is 0:\n" +
			"`bus stop` with no node running exits 0 (\"no bus node was running\").",
		Writer:    stdout,
		ErrWriter: stderr,
		Commands:  cmds(),

		// Values of repeatable flags (--done "a, b") are kept whole; a
		// command that wants a comma list splits it itself.
		DisableSliceFlagSeparator: true,
	}
	prepare(app)
	return app
}

// run runs the command line args (args[0] is the program name) and returns
// the exit code. Errors are printed as one line on stderr.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	app := newAppWith(stdout, stderr, commandsFor(args))
	app.Reader = stdin
	return exit(ctx, explainDenied(app, runApp(ctx, app, args)), stderr)
}

// exit prints err, if any, as one line on stderr and returns its exit code.
func exit(ctx context.Context, err error, stderr io.Writer) int {
	if err == nil {
		return teambus.ExitOK
	}
	if msg := errorLine(ctx, err); msg != "" { // cli.Exit("", code) prints nothing
		fmt.Fprintf(stderr, "teambus: %s\n", msg)
	}
	return exitCode(err)
}

// errorLine is err as one line for stderr.
func errorLine(ctx context.Context, err error) string {
	return cliapp.ErrorText(ctx, err) + cliHint(err)
}

// cliHint names the flags and commands that get out of an error whose
// text, a library's, names none.
func cliHint(err error) string {
	var (
		noRoom *team.NoRoomError
		live   *team.LiveSidecarsError
		held   *team.LeadHeldError
		open   *team.UnfinishedTasksError
		nf     *kv.NotFoundError
		noLead *team.NoLeadError
		stale  *team.StaleLeadError
		creds  *bus.DamagedCredsError
	)
	switch {
	case errors.As(err, &noRoom):
		return " (`teambus team delete` frees a finished team's room; or raise `teambus bus start --max-store`, or create the team with smaller --mailbox-max-bytes/--events-max-bytes)"
	case errors.As(err, &live), errors.As(err, &held), errors.As(err, &open):
		return " (use --force)"
	case errors.As(err, &noLead) && noLead.Other != "":
		return ": start its lead with `teambus lead --team " + noLead.Team + " --session " + noLead.Session + "`, or use --force"
	case errors.As(err, &noLead):
		return ": start one with `teambus lead --team " + noLead.Team + " --session " + noLead.Session + "`"
	case errors.As(err, &stale):
		return ": attach with `teambus team resume " + stale.Team + " --session " + stale.Session + "`"
	case errors.As(err, &creds):
		return ": `teambus team creds " + creds.Team + " --member " + creds.Member + "`"
	case errors.As(err, &nf) && nf.Kind == "task":
		return ": see `teambus task list --team " + nf.Team + "`"
	}
	return ""
}
