package cliapp

// This file is everything teambus adds to urfave/cli v2 to make it behave
// like the rest of the tool; the design card names v2, so we stay on it and
// keep the workarounds here, each for one limit of v2:
//
//   - Flags after positionals (Run, Invocation): v2 stops parsing flags
//     at the first positional argument, so `teambus ack 12 --member tm2`
//     would treat --member as an argument. The line is re-ordered, flags
//     first, using the command tree's own flag definitions.
//   - Help (Prepare, helpFlag, HelpCommand): v2's HelpFlag and help command
//     are package variables it writes to, which races when two apps run in
//     one process (tests); every command gets its own -h/--help instead, and
//     `teambus help X` becomes `teambus X --help`.
//   - Usage errors (onUsageError, FlagErrorText): v2 prints the whole help
//     and exits 1 on a bad flag; we print one line naming the flag as typed
//     (--name, not the Go flag package's -name) and exit 2.
//   - Required flags (requireFlags): v2 checks Required flags by printing
//     the help and returning an unclassified error (exit 1); they are
//     checked before the action instead: one line, exit 2, naming the
//     environment variable that also sets it.
//   - Examples (Prepare): v2 has no examples section; they are appended to
//     each command's description from the examples table.

import (
	"context"
	"reflect"
	"regexp"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"
)

// Run reorders args so flags may follow positionals, turns any help
// request into one urfave answers (`teambus help team create`,
// `teambus team create alpha --help`) and runs the app.
func Run(ctx context.Context, app *cli.App, args []string) error {
	if len(args) == 0 {
		args = []string{app.Name}
	}
	inv := ParseInvocation(app, args)
	if len(inv.Path) > 0 && inv.Path[0] == "help" {
		inv = ParseInvocation(app, append([]string{inv.Prog}, inv.Pos...))
		inv.Help = true
	}
	if inv.Help {
		if leaf := inv.leaf(); len(inv.Pos) > 0 && (leaf == nil || len(leaf.Subcommands) > 0) {
			return UnknownCommand(inv.Path, inv.Pos[0], app.Commands, leaf)
		}
		return app.RunContext(ctx, append(append([]string{inv.Prog}, inv.Path...), "--help"))
	}
	return app.RunContext(ctx, inv.Args())
}

// Prepare walks the tree and gives every command our own help flag (urfave's
// shared HelpFlag and help command are package variables it writes to, which
// races when two apps run in one process), the usage-error handler, and an
// action for command groups. It may run again after commands were added.
func Prepare(app *cli.App, cfg Config) {
	app.HideHelp = true
	app.HideHelpCommand = true
	app.HideVersion = true
	if !HasFlagName(app.Flags, "help") {
		app.Flags = append(app.Flags, helpFlag())
	}
	app.OnUsageError = onUsageError
	app.ExitErrHandler = func(*cli.Context, error) {} // run prints errors and picks the exit code
	if !HasFlagName(app.Flags, "version") {
		app.Flags = append(app.Flags, &cli.BoolFlag{Name: "version", Usage: "print the version and exit"})
	}
	app.Action = func(c *cli.Context) error {
		if c.Bool("version") {
			return cfg.Version(c.App.Writer)
		}
		if c.Args().Present() {
			return UnknownCommand(nil, c.Args().First(), app.Commands, nil)
		}
		return cli.ShowAppHelp(c)
	}
	WalkCommands(app.Commands, nil, func(parents []string, c *cli.Command) {
		if len(parents) > 0 {
			c.HelpName = strings.Join(append([]string{app.Name}, append(parents, c.Name)...), " ")
		}
		c.HideHelp = true
		c.HideHelpCommand = true
		if !HasFlagName(c.Flags, "help") {
			c.Flags = append(c.Flags, helpFlag())
		}
		c.OnUsageError = onUsageError
		requireFlags(c)
		c.Flags = cacheFlagNames(c.Flags)
		addExamples(cfg.Examples[strings.Join(append(append([]string{}, parents...), c.Name), " ")], c)
		if len(c.Subcommands) > 0 && c.Action == nil {
			cmd := c
			c.Action = func(c *cli.Context) error {
				if c.Args().Present() {
					return UnknownCommand(append(parents, cmd.Name), c.Args().First(), cmd.Subcommands, cmd)
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
			return UsageError(ctx, "missing --%s%s", name, hint)
		}
		if before != nil {
			return before(ctx)
		}
		return nil
	}
}

// helpFlag is -h/--help. It is handled by Run before urfave sees it.
func helpFlag() cli.Flag {
	return &cli.BoolFlag{Name: "help", Aliases: []string{"h"}, Usage: "show help"}
}

// HelpCommand is `teambus help [COMMAND...]`; Run turns it into
// `teambus COMMAND... --help`.
func HelpCommand() *cli.Command {
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
	return UsageError(c, "%s", FlagErrorText(err.Error()))
}

// FlagErrorText rewrites the Go flag package's "-name" into "--name" for
// long flags, as users type them.
func FlagErrorText(s string) string {
	return goFlagRE().ReplaceAllString(s, "${1}--${2}")
}

// goFlagRE finds a long flag name in the Go flag package's errors: "flag
// provided but not defined: -x", "flag needs an argument: -x", "invalid
// value "v" for flag -x: ...", "invalid boolean value "v" for -x: ...".
var goFlagRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(defined: |argument: |for flag |for )-([A-Za-z0-9][A-Za-z0-9_-]+)`)
})

// Invocation is a command line split the way people type it: the command
// path, the flags (with their values) and the positional arguments, in any
// order. urfave/cli v2 stops parsing flags at the first positional argument;
// Args rebuilds the line with every flag ahead of the positionals so that
// `teambus ack 12 13 --member tm2` parses like `teambus ack --member tm2 12 13`.
type Invocation struct {
	Prog  string
	root  []cli.Flag     // the flags of the app
	Path  []string       // command names as typed, root excluded
	cmds  []*cli.Command // the commands of path; the last is the leaf
	Flags []FlagToken    // flag tokens in the order typed
	Pos   []string       // positional arguments, including those after "--"
	raw   []string       // tokens after a SkipFlagParsing command, untouched
	Help  bool           // -h or --help was among the flags
	// dangling is set when the last token is a flag that needs a value.
	dangling bool
}

// FlagToken is one flag as typed: "--x=v", or "--x" followed by its value.
type FlagToken struct {
	Name   string
	Tokens []string
}

// ParseInvocation splits args (args[0] is the program name) using the flag
// definitions of app's command tree. A token is a flag when it starts with
// "-", is not "-" alone and is not a negative number; a flag that takes a
// value and has no "=value" consumes the next token whatever it looks like
// (so `--priority -1` works). "--" ends the flags: what follows is
// positional. Command names are recognised until the first positional.
func ParseInvocation(app *cli.App, args []string) Invocation {
	inv := Invocation{}
	if len(args) == 0 {
		return inv
	}
	inv.Prog, inv.root = args[0], app.Flags
	kinds := flagKinds(app)
	subs := app.Commands
	scope := [][]cli.Flag{app.Flags}
	for i := 1; i < len(args); i++ {
		t := args[i]
		switch {
		case t == "--":
			inv.Pos = append(inv.Pos, args[i+1:]...)
			return inv
		case IsFlagToken(t):
			name, inline := splitFlag(t)
			tok := FlagToken{Name: name, Tokens: []string{t}}
			if !inline && takesValue(name, scope, kinds) {
				if i+1 == len(args) {
					inv.dangling = true
				} else {
					i++
					tok.Tokens = append(tok.Tokens, args[i])
				}
			}
			if name == "help" || name == "h" {
				inv.Help = true
			}
			inv.Flags = append(inv.Flags, tok)
		default:
			if len(inv.Pos) == 0 {
				if cmd := findCommand(subs, t); cmd != nil {
					inv.Path = append(inv.Path, t)
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
			inv.Pos = append(inv.Pos, t)
		}
	}
	return inv
}

// Args rebuilds the command line: each flag right after the deepest
// command of the path that defines it (the leaf when none does, so that
// urfave reports it as unknown there), then "--" and the positionals. A
// dangling flag goes last, without the positionals, so that urfave reports
// its missing value instead of taking "--" for it.
func (inv Invocation) Args() []string {
	out := []string{inv.Prog}
	levels := make([][]string, len(inv.cmds)+1)
	fl := inv.Flags
	if inv.dangling {
		fl = fl[:len(fl)-1]
	}
	for _, f := range fl {
		lvl := len(inv.cmds)
		for l := len(inv.cmds); l >= 0; l-- {
			if l == 0 && HasFlagName(inv.root, f.Name) || l > 0 && HasFlagName(inv.cmds[l-1].Flags, f.Name) {
				lvl = l
				break
			}
		}
		levels[lvl] = append(levels[lvl], f.Tokens...)
	}
	out = append(out, levels[0]...)
	for l, name := range inv.Path {
		out = append(out, name)
		out = append(out, levels[l+1]...)
	}
	if inv.dangling {
		return append(out, inv.Flags[len(inv.Flags)-1].Tokens...)
	}
	if len(inv.Pos) > 0 {
		out = append(out, "--")
		out = append(out, inv.Pos...)
	}
	return append(out, inv.raw...)
}

// leaf returns the last command of the path, nil for the root.
func (inv Invocation) leaf() *cli.Command {
	if len(inv.cmds) == 0 {
		return nil
	}
	return inv.cmds[len(inv.cmds)-1]
}

// IsFlagToken reports whether t is a flag: "-x", "--x", "--x=v", but not
// "-", a negative number such as "-1" or "-0.5", or a negative duration.
func IsFlagToken(t string) bool {
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
				return FlagTakesValue(f)
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
				kinds[n] = FlagTakesValue(f)
			}
		}
	}
	add(app.Flags)
	WalkCommands(app.Commands, nil, func(_ []string, c *cli.Command) { add(c.Flags) })
	return kinds
}

// FlagTakesValue reports whether f takes a value: every kind but bool.
func FlagTakesValue(f cli.Flag) bool {
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

func HasFlagName(flags []cli.Flag, name string) bool {
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

// WalkCommands calls fn for every command of the tree, depth first, with
// the names of its ancestors.
func WalkCommands(cmds []*cli.Command, parents []string, fn func(parents []string, c *cli.Command)) {
	for _, c := range cmds {
		fn(parents, c)
		WalkCommands(c.Subcommands, append(append([]string{}, parents...), c.Name), fn)
	}
}

// ExamplesHeader starts the examples in a command's description.
const ExamplesHeader = "EXAMPLES:\n"

// addExamples appends the examples ex to the description of c, once.
func addExamples(ex []string, c *cli.Command) {
	if len(ex) == 0 || strings.Contains(c.Description, ExamplesHeader) {
		return
	}
	var b strings.Builder
	if c.Description != "" {
		b.WriteString(c.Description)
		b.WriteString("\n\n")
	}
	b.WriteString(ExamplesHeader)
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
