package main

// This file is everything teambus adds to urfave/cli v2 to make it behave
// like the rest of the tool; the design card names v2, so we stay on it and
// keep the workarounds here, each for one limit of v2:
//
//   - Flags after positionals (runApp, invocation): v2 stops parsing flags
//     at the first positional argument, so `teambus ack 12 --member tm2`
//     would treat --member as an argument. The line is re-ordered, flags
//     first, using the command tree's own flag definitions.
//   - Help (prepare, helpFlag, helpCommand): v2's HelpFlag and help command
//     are package variables it writes to, which races when two apps run in
//     one process (tests); every command gets its own -h/--help instead, and
//     `teambus help X` becomes `teambus X --help`.
//   - Usage errors (onUsageError, flagErrorText): v2 prints the whole help
//     and exits 1 on a bad flag; we print one line naming the flag as typed
//     (--name, not the Go flag package's -name) and exit 2.
//   - Required flags (requireFlags): v2 checks Required flags by printing
//     the help and returning an unclassified error (exit 1); they are
//     checked before the action instead: one line, exit 2, naming the
//     environment variable that also sets it.
//   - Examples (prepare): v2 has no examples section; they are appended to
//     each command's description from the examples table.

import (
	"context"
	"reflect"
	"regexp"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"
)

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
	if !hasFlagName(app.Flags, "version") {
		app.Flags = append(app.Flags, &cli.BoolFlag{Name: "version", Usage: "print the version and exit"})
	}
	app.Action = func(c *cli.Context) error {
		if c.Bool("version") {
			return printVersion(c.App.Writer, false)
		}
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
		c.Flags = cacheFlagNames(c.Flags)
		addExamples(strings.Join(append(append([]string{}, parents...), c.Name), " "), c)
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

// flagErrorText rewrites the Go flag package's "-name" into "--name" for
// long flags, as users type them.
func flagErrorText(s string) string {
	return goFlagRE().ReplaceAllString(s, "${1}--${2}")
}

// goFlagRE finds a long flag name in the Go flag package's errors: "flag
// provided but not defined: -x", "flag needs an argument: -x", "invalid
// value "v" for flag -x: ...", "invalid boolean value "v" for -x: ...".
var goFlagRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(defined: |argument: |for flag |for )-([A-Za-z0-9][A-Za-z0-9_-]+)`)
})

// invocation is a command line split the way people type it: the command
// path, the flags (with their values) and the positional arguments, in any
// order. urfave/cli v2 stops parsing flags at the first positional argument;
// args rebuilds the line with every flag ahead of the positionals so that
// `teambus ack 12 13 --member tm2` parses like `teambus ack --member tm2 12 13`.
type invocation struct {
	prog  string
	root  []cli.Flag     // the flags of the app
	path  []string       // command names as typed, root excluded
	cmds  []*cli.Command // the commands of path; the last is the leaf
	flags []flagToken    // flag tokens in the order typed
	pos   []string       // positional arguments, including those after "--"
	raw   []string       // tokens after a SkipFlagParsing command, untouched
	help  bool           // -h or --help was among the flags
	// dangling is set when the last token is a flag that needs a value.
	dangling bool
}

// flagToken is one flag as typed: "--x=v", or "--x" followed by its value.
type flagToken struct {
	name   string
	tokens []string
}

// parseInvocation splits args (args[0] is the program name) using the flag
// definitions of app's command tree. A token is a flag when it starts with
// "-", is not "-" alone and is not a negative number; a flag that takes a
// value and has no "=value" consumes the next token whatever it looks like
// (so `--priority -1` works). "--" ends the flags: what follows is
// positional. Command names are recognised until the first positional.
func parseInvocation(app *cli.App, args []string) invocation {
	inv := invocation{}
	if len(args) == 0 {
		return inv
	}
	inv.prog, inv.root = args[0], app.Flags
	kinds := flagKinds(app)
	subs := app.Commands
	scope := [][]cli.Flag{app.Flags}
	for i := 1; i < len(args); i++ {
		t := args[i]
		switch {
		case t == "--":
			inv.pos = append(inv.pos, args[i+1:]...)
			return inv
		case isFlagToken(t):
			name, inline := splitFlag(t)
			tok := flagToken{name: name, tokens: []string{t}}
			if !inline && takesValue(name, scope, kinds) {
				if i+1 == len(args) {
					inv.dangling = true
				} else {
					i++
					tok.tokens = append(tok.tokens, args[i])
				}
			}
			if name == "help" || name == "h" {
				inv.help = true
			}
			inv.flags = append(inv.flags, tok)
		default:
			if len(inv.pos) == 0 {
				if cmd := findCommand(subs, t); cmd != nil {
					inv.path = append(inv.path, t)
					inv.cmds = append(inv.cmds, cmd)
					subs = cmd.Subcommands
					scope = append(scope, cmd.Flags)
					if cmd.SkipFlagParsing {
						inv.raw = append([]string{}, args[i+1:]...)
						return inv
					}
					continue
				}
			}
			inv.pos = append(inv.pos, t)
		}
	}
	return inv
}

// args rebuilds the command line: each flag right after the deepest
// command of the path that defines it (the leaf when none does, so that
// urfave reports it as unknown there), then "--" and the positionals. A
// dangling flag goes last, without the positionals, so that urfave reports
// its missing value instead of taking "--" for it.
func (inv invocation) args() []string {
	out := []string{inv.prog}
	levels := make([][]string, len(inv.cmds)+1)
	fl := inv.flags
	if inv.dangling {
		fl = fl[:len(fl)-1]
	}
	for _, f := range fl {
		lvl := len(inv.cmds)
		for l := len(inv.cmds); l >= 0; l-- {
			if l == 0 && hasFlagName(inv.root, f.name) || l > 0 && hasFlagName(inv.cmds[l-1].Flags, f.name) {
				lvl = l
				break
			}
		}
		levels[lvl] = append(levels[lvl], f.tokens...)
	}
	out = append(out, levels[0]...)
	for l, name := range inv.path {
		out = append(out, name)
		out = append(out, levels[l+1]...)
	}
	if inv.dangling {
		return append(out, inv.flags[len(inv.flags)-1].tokens...)
	}
	if len(inv.pos) > 0 {
		out = append(out, "--")
		out = append(out, inv.pos...)
	}
	return append(out, inv.raw...)
}

// leaf returns the last command of the path, nil for the root.
func (inv invocation) leaf() *cli.Command {
	if len(inv.cmds) == 0 {
		return nil
	}
	return inv.cmds[len(inv.cmds)-1]
}

// isFlagToken reports whether t is a flag: "-x", "--x", "--x=v", but not
// "-", a negative number such as "-1" or "-0.5", or a negative duration.
func isFlagToken(t string) bool {
	if len(t) < 2 || t[0] != '-' {
		return false
	}
	if c := t[1]; c >= '0' && c <= '9' || c == '.' {
		return false
	}
	return true
}

// splitFlag returns the name of a flag token and whether it carries its
// value inline ("--x=v").
func splitFlag(t string) (name string, inline bool) {
	name = strings.TrimPrefix(strings.TrimPrefix(t, "-"), "-")
	if i := strings.IndexByte(name, '='); i >= 0 {
		return name[:i], true
	}
	return name, false
}

// takesValue reports whether the flag name consumes the next token. The
// commands on the path so far decide; a flag defined only deeper (typed
// before its command name) is looked up in the whole tree, where a name has
// one kind (TestApp_FlagKinds checks it). Unknown flags take no value.
func takesValue(name string, scope [][]cli.Flag, kinds map[string]bool) bool {
	for l := len(scope) - 1; l >= 0; l-- {
		for _, f := range scope[l] {
			if hasName(f, name) {
				return flagTakesValue(f)
			}
		}
	}
	return kinds[name]
}

// flagKinds maps every flag name and alias in app's tree to whether it
// takes a value.
func flagKinds(app *cli.App) map[string]bool {
	kinds := map[string]bool{}
	add := func(flags []cli.Flag) {
		for _, f := range flags {
			for _, n := range f.Names() {
				kinds[n] = flagTakesValue(f)
			}
		}
	}
	add(app.Flags)
	walkCommands(app.Commands, nil, func(_ []string, c *cli.Command) { add(c.Flags) })
	return kinds
}

// flagTakesValue reports whether f takes a value: every kind but bool.
func flagTakesValue(f cli.Flag) bool {
	if d, ok := f.(cli.DocGenerationFlag); ok {
		return d.TakesValue()
	}
	return false
}

func hasName(f cli.Flag, name string) bool {
	for _, n := range f.Names() {
		if n == name {
			return true
		}
	}
	return false
}

func hasFlagName(flags []cli.Flag, name string) bool {
	for _, f := range flags {
		if hasName(f, name) {
			return true
		}
	}
	return false
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// walkCommands calls fn for every command of the tree, depth first, with
// the names of its ancestors.
func walkCommands(cmds []*cli.Command, parents []string, fn func(parents []string, c *cli.Command)) {
	for _, c := range cmds {
		fn(parents, c)
		walkCommands(c.Subcommands, append(append([]string{}, parents...), c.Name), fn)
	}
}

// examplesHeader starts the examples in a command's description.
const examplesHeader = "EXAMPLES:\n"

// addExamples appends the examples of the command at path to its
// description, once.
func addExamples(path string, c *cli.Command) {
	ex := examples[path]
	if len(ex) == 0 || strings.Contains(c.Description, examplesHeader) {
		return
	}
	var b strings.Builder
	if c.Description != "" {
		b.WriteString(c.Description)
		b.WriteString("\n\n")
	}
	b.WriteString(examplesHeader)
	for _, e := range ex {
		b.WriteString("   $ ")
		b.WriteString(e)
		b.WriteString("\n")
	}
	c.Description = strings.TrimRight(b.String(), "\n")
}

// cacheFlagNames makes the Names of the flags of fs computed once.
// urfave/cli runs a regexp in every Names call, and before each action it
// asks for every flag whether it is set, which looks each one up by
// calling Names on the flags in turn: hundreds of regexps for a command
// with twenty flags, 0.2 ms of every one-shot command (bench oneshot, 200
// runs a side). The wrappers embed the flag, so every interface urfave
// asks for (help, env vars, required, actions) is the flag's own; urfave
// asserts a concrete flag type only for shell completion and for bool
// flags' DisableDefaultText, neither used here. Help reads the same.
func cacheFlagNames(fs []cli.Flag) []cli.Flag {
	for i, f := range fs {
		switch f := f.(type) {
		case *cli.StringFlag:
			fs[i] = &stringFlag{f, f.Names()}
		case *cli.BoolFlag:
			fs[i] = &boolFlag{f, f.Names()}
		case *cli.IntFlag:
			fs[i] = &intFlag{f, f.Names()}
		case *cli.Int64Flag:
			fs[i] = &int64Flag{f, f.Names()}
		case *cli.DurationFlag:
			fs[i] = &durationFlag{f, f.Names()}
		case *cli.StringSliceFlag:
			fs[i] = &stringSliceFlag{f, f.Names()}
		}
	}
	return fs
}

type stringFlag struct {
	*cli.StringFlag
	names []string
}

func (f *stringFlag) Names() []string { return f.names }

type boolFlag struct {
	*cli.BoolFlag
	names []string
}

func (f *boolFlag) Names() []string { return f.names }

type intFlag struct {
	*cli.IntFlag
	names []string
}

func (f *intFlag) Names() []string { return f.names }

type int64Flag struct {
	*cli.Int64Flag
	names []string
}

func (f *int64Flag) Names() []string { return f.names }

type durationFlag struct {
	*cli.DurationFlag
	names []string
}

func (f *durationFlag) Names() []string { return f.names }

type stringSliceFlag struct {
	*cli.StringSliceFlag
	names []string
}

func (f *stringSliceFlag) Names() []string { return f.names }
