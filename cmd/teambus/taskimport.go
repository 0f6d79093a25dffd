package main

import (
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/team"
)

// taskImport is `teambus task add --from FILE`: many tasks from a JSON
// Lines file (- reads stdin), checked whole before anything is written.
func taskImport(c *cli.Context) error {
	if err := exactArgs(c, 0); err != nil {
		return usageError(c, "--from takes the tasks from the file: no ID argument")
	}
	for _, f := range []string{"desc", "dep", "priority", "quantum"} {
		if c.IsSet(f) {
			return usageError(c, "--%s with --from: give it per task in the file", f)
		}
	}
	teamID, err := teamID(c)
	if err != nil {
		return err
	}
	path := c.String("from")
	var r io.Reader = c.App.Reader
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return teambus.Invalidf("task import: %w", errorCause(err))
		}
		defer f.Close()
		r = f
	}
	tasks, err := team.ParseImport(r)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	s, err := open(c)
	if err != nil {
		return err
	}
	defer s.close()
	// The import as a whole may outlast --timeout: it bounds each request
	// (the store's and the batch publishes' own), not the run.
	var progress func(done, total int)
	if tty, ok := c.App.ErrWriter.(*os.File); ok && isTerminal(tty) {
		progress = func(done, total int) {
			fmt.Fprintf(tty, "\rwriting tasks: %d/%d", done, total)
			if done == total {
				fmt.Fprintln(tty)
			}
		}
	}
	res, err := s.svc.ImportTasks(c.Context, teamID, tasks, progress)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, res)
	}
	fmt.Fprintf(c.App.Writer, "imported %d task(s) into team %s (%d already there)\n", res.Added, teamID, res.Existing)
	return nil
}

// isTerminal reports whether f is a terminal (a character device).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
