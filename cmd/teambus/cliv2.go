package main

// What teambus adds to urfave/cli v2 is package cliapp's (flags after
// positionals, help, one-line usage errors, required flags, examples),
// shared with the lean agent build.

import (
	"context"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus/internal/cliapp"
)

func runApp(ctx context.Context, app *cli.App, args []string) error {
	return cliapp.Run(ctx, app, args)
}

// prepare gives every command of app the same help and usage-error
// handling (cliapp.Prepare) and its examples.
func prepare(app *cli.App) {
	cliapp.Prepare(app, cliapp.Config{
		Version:  func(w io.Writer) error { return printVersion(w, false) },
		Examples: examples,
	})
}

func helpCommand() *cli.Command { return cliapp.HelpCommand() }

func usageError(c *cli.Context, format string, args ...any) error {
	return cliapp.UsageError(c, format, args...)
}

var (
	parseInvocation = cliapp.ParseInvocation
	walkCommands    = cliapp.WalkCommands
	hasFlagName     = cliapp.HasFlagName
	flagTakesValue  = cliapp.FlagTakesValue
	flagErrorText   = cliapp.FlagErrorText
	isFlagToken     = cliapp.IsFlagToken
	unknownCommand  = cliapp.UnknownCommand
	printJSON       = cliapp.PrintJSON
	exitCode        = cliapp.ExitCode
)

const examplesHeader = cliapp.ExamplesHeader
