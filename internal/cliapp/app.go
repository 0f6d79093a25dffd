package cliapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
)

// Config is what Prepare needs of the binary: how it prints its version
// (the root's --version) and the examples of each command, by path
// ("team create").
type Config struct {
	Version  func(w io.Writer) error
	Examples map[string][]string
}

// UsageError returns an ErrInvalid (exit 2) naming the command and its help.
func UsageError(c *cli.Context, format string, args ...any) error {
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

// UnknownCommand is the error for a command name that does not exist under
// path.
func UnknownCommand(path []string, name string, cmds []*cli.Command, parent *cli.Command) error {
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

// ExactArgs checks that the command got n positional arguments.
func ExactArgs(c *cli.Context, n int) error {
	if got := c.NArg(); got != n {
		return argCountError(c, fmt.Sprintf("%d", n), got)
	}
	return nil
}

// MinArgs checks that the command got at least n positional arguments.
func MinArgs(c *cli.Context, n int) error {
	if got := c.NArg(); got < n {
		return argCountError(c, fmt.Sprintf("at least %d", n), got)
	}
	return nil
}

func argCountError(c *cli.Context, want string, got int) error {
	if want == "0" {
		return UsageError(c, "unexpected argument %q: takes no arguments", c.Args().First())
	}
	if got == 0 {
		return UsageError(c, "missing argument: expected %s (%s)", want, c.Command.ArgsUsage)
	}
	return UsageError(c, "expected %s argument(s) (%s), got %d", want, c.Command.ArgsUsage, got)
}

// ErrorText is err as one line for stderr, without the "teambus: "
// prefix; the full build appends the hints of its own errors.
func ErrorText(ctx context.Context, err error) string {
	msg := strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
	switch {
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		msg = "interrupted: " + msg
	case errors.Is(err, context.DeadlineExceeded) && !strings.Contains(msg, "--timeout"):
		msg += " (timed out: is the bus reachable? raise --timeout for slow links)"
	}
	return msg
}

// ExitCode maps err to the exit codes of the specification. An error that
// carries its own code (cli.Exit) keeps it.
func ExitCode(err error) int {
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		if code := ec.ExitCode(); code >= teambus.ExitOK && code <= teambus.ExitConflict {
			return code
		}
	}
	return teambus.ExitCode(err)
}

// PrintJSON writes v as indented JSON (one object).
func PrintJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}
