package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
)

// newApp assembles the command line. The command list is written out here,
// one constructor per command file; prepare then gives every command the
// same help and usage-error handling.
func newApp(stdout, stderr io.Writer) *cli.App {
	return newAppWith(stdout, stderr, commands)
}

// commands builds every command of the binary.
func commands() []*cli.Command {
	return []*cli.Command{
		busCommand(), serveCommand(),
		teamCommand(),
		taskCommand(),
		sendCommand(),
		inboxCommand(),
		ackCommand(),
		replayCommand(),
		eventsCommand(),
		checkpointCommand(),
		leadCommand(),
		teammateCommand(),
		joinCommand(),
		initCommand(),
		briefCommand(), hookCommand(), mcpCommand(), uiCommand(),
		demoCommand(), agentSimCommand(),
		benchCommand(),
		versionCommand(),
		helpCommand(),
	}
}

// hookCommands is all a hook run needs: Claude Code starts `teambus hook
// <Event>` several times a turn, and building and preparing the ~60
// other commands cost ~3 ms of each run (bench row hook.posttoolbatch).
func hookCommands() []*cli.Command { return []*cli.Command{hookCommand()} }

// newAppWith is the app with the commands cmds builds.
func newAppWith(stdout, stderr io.Writer, cmds func() []*cli.Command) *cli.App {
	app := &cli.App{
		Name:  "teambus",
		Usage: "keep a team of agent sessions alive across crashes, timeouts and restarts",
		Description: "teambus runs an embedded NATS JetStream node (teambus bus start), a sidecar beside each\n" +
			"agent session (teambus lead, teambus teammate) and the commands agents and hooks call.\n" +
			"Exit codes: 0 ok, 1 transient (retry may succeed), 2 permanent (bad input, not found,\n" +
			"illegal transition), 3 conflict (lost a race, fenced incarnation).",
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
	cmds := commands
	if len(args) > 2 && args[1] == "hook" {
		cmds = hookCommands
	}
	app := newAppWith(stdout, stderr, cmds)
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

// runApp reorders args so flags may follow positionals, turns any help
// request into one urfave answers (`teambus help team create`,
// `teambus team create alpha --help`) and runs the app.
func runApp(ctx context.Context, app *cli.App, args []string) error {
	if len(args) == 0 {
		args = []string{app.Name}
	}
	inv := parseInvocation(app, args)
	if len(inv.path) > 0 && inv.path[0] == "help" {
		inv = parseInvocation(app, append([]string{inv.prog}, inv.pos...))
		inv.help = true
	}
	if inv.help {
		if leaf := inv.leaf(); len(inv.pos) > 0 && (leaf == nil || len(leaf.Subcommands) > 0) {
			return unknownCommand(inv.path, inv.pos[0], app.Commands, leaf)
		}
		return app.RunContext(ctx, append(append([]string{inv.prog}, inv.path...), "--help"))
	}
	return app.RunContext(ctx, inv.args())
}

// prepare walks the tree and gives every command our own help flag (urfave's
// shared HelpFlag and help command are package variables it writes to, which
// races when two apps run in one process), the usage-error handler, and an
// action for command groups. It may run again after commands were added.
func prepare(app *cli.App) {
	app.HideHelp = true
	app.HideHelpCommand = true
	app.HideVersion = true
	if !hasFlagName(app.Flags, "help") {
		app.Flags = append(app.Flags, helpFlag())
	}
	app.OnUsageError = onUsageError
	app.ExitErrHandler = func(*cli.Context, error) {} // run prints errors and picks the exit code
	app.Action = func(c *cli.Context) error {
		if c.Args().Present() {
			return unknownCommand(nil, c.Args().First(), app.Commands, nil)
		}
		return cli.ShowAppHelp(c)
	}
	walkCommands(app.Commands, nil, func(parents []string, c *cli.Command) {
		if len(parents) > 0 {
			c.HelpName = strings.Join(append([]string{app.Name}, append(parents, c.Name)...), " ")
		}
		c.HideHelp = true
		c.HideHelpCommand = true
		if !hasFlagName(c.Flags, "help") {
			c.Flags = append(c.Flags, helpFlag())
		}
		c.OnUsageError = onUsageError
		requireFlags(c)
		if len(c.Subcommands) > 0 && c.Action == nil {
			cmd := c
			c.Action = func(c *cli.Context) error {
				if c.Args().Present() {
					return unknownCommand(append(parents, cmd.Name), c.Args().First(), cmd.Subcommands, cmd)
				}
				return cli.ShowSubcommandHelp(c)
			}
		}
	})
}

// requireFlags takes over the flags of c marked Required: urfave would
// print the whole help and return an unclassified error (exit 1). They are
// checked before the action instead: one line, exit 2.
func requireFlags(c *cli.Command) {
	var required []cli.Flag
	for _, f := range c.Flags {
		if r, ok := f.(cli.RequiredFlag); ok && r.IsRequired() {
			if fv := reflect.ValueOf(f); fv.Kind() == reflect.Pointer {
				if field := fv.Elem().FieldByName("Required"); field.IsValid() && field.CanSet() && field.Kind() == reflect.Bool {
					field.SetBool(false)
					required = append(required, f)
				}
			}
		}
	}
	if len(required) == 0 {
		return
	}
	before := c.Before
	c.Before = func(ctx *cli.Context) error {
		for _, f := range required {
			name := f.Names()[0]
			if ctx.IsSet(name) {
				continue
			}
			hint := ""
			if d, ok := f.(cli.DocGenerationFlag); ok && len(d.GetEnvVars()) > 0 {
				hint = " (or " + strings.Join(d.GetEnvVars(), ", ") + ")"
			}
			return usageError(ctx, "missing --%s%s", name, hint)
		}
		if before != nil {
			return before(ctx)
		}
		return nil
	}
}

// helpFlag is -h/--help. It is handled by runApp before urfave sees it.
func helpFlag() cli.Flag {
	return &cli.BoolFlag{Name: "help", Aliases: []string{"h"}, Usage: "show help"}
}

// helpCommand is `teambus help [COMMAND...]`; runApp turns it into
// `teambus COMMAND... --help`.
func helpCommand() *cli.Command {
	return &cli.Command{
		Name:      "help",
		Usage:     "show the commands, or the help of one command",
		ArgsUsage: "[COMMAND...]",
		Action:    cli.ShowAppHelp,
	}
}

// onUsageError turns a flag parse error of urfave (unknown flag, missing
// value, bad value, bad environment variable) into one line, exit 2.
func onUsageError(c *cli.Context, err error, _ bool) error {
	return usageError(c, "%s", flagErrorText(err.Error()))
}

// usageError returns an ErrInvalid (exit 2) naming the command and its help.
func usageError(c *cli.Context, format string, args ...any) error {
	name := "teambus"
	if c != nil && c.Command != nil && c.Command.HelpName != "" {
		name = c.Command.HelpName
	}
	msg := fmt.Sprintf(format, args...)
	if sub := strings.TrimPrefix(name, "teambus"); sub != "" {
		msg = strings.TrimSpace(sub) + ": " + msg
	}
	return teambus.Invalidf("%s (see `%s --help`)", msg, name)
}

// unknownCommand is the error for a command name that does not exist under
// path.
func unknownCommand(path []string, name string, cmds []*cli.Command, parent *cli.Command) error {
	var names []string
	for _, c := range cmds {
		if !c.Hidden {
			names = append(names, c.Name)
		}
	}
	where, help := "command", "teambus --help"
	if parent != nil {
		where = "subcommand of " + strings.Join(path, " ")
		help = "teambus " + strings.Join(path, " ") + " --help"
	}
	return teambus.Invalidf("unknown %s %q: one of %s (see `%s`)", where, name, strings.Join(names, ", "), help)
}

// flagErrorText rewrites the Go flag package's "-name" into "--name" for
// long flags, as users type them.
func flagErrorText(s string) string {
	return goFlagRE.ReplaceAllString(s, "${1}--${2}")
}

// goFlagRE finds a long flag name in the Go flag package's errors: "flag
// provided but not defined: -x", "flag needs an argument: -x", "invalid
// value "v" for flag -x: ...", "invalid boolean value "v" for -x: ...".
var goFlagRE = regexp.MustCompile(`(defined: |argument: |for flag |for )-([A-Za-z0-9][A-Za-z0-9_-]+)`)

// errorLine is err as one line for stderr.
func errorLine(ctx context.Context, err error) string {
	msg := strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
	switch {
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		msg = "interrupted: " + msg
	case errors.Is(err, context.DeadlineExceeded) && !strings.Contains(msg, "--timeout"):
		msg += " (timed out: is the bus reachable? raise --timeout for slow links)"
	}
	return msg
}

// exitCode maps err to the exit codes of the specification. An error that
// carries its own code (cli.Exit) keeps it.
func exitCode(err error) int {
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		if code := ec.ExitCode(); code >= teambus.ExitOK && code <= teambus.ExitConflict {
			return code
		}
	}
	return teambus.ExitCode(err)
}
