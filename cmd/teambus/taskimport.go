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
	teamID, err := teamID(c)
	if err != nil {
		return err
	}
	path := c.String("from")
	var tasks []team.ImportTask
	if err := readFrom(c, "task", []string{"desc", "dep", "priority", "quantum"}, func(r io.Reader) (err error) {
		tasks, err = team.ParseImport(r)
		return err
	}); err != nil {
		return err
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

// readFrom parses the file of --from (- is stdin) with parse, for a
// command that takes many items of kind (task, message) from it; the
// flags perItem, given per item in the file, are refused beside --from.
// An error names the file.
func readFrom(c *cli.Context, kind string, perItem []string, parse func(io.Reader) error) error {
	for _, f := range perItem {
		if c.IsSet(f) {
			return usageError(c, "--%s with --from: give it per %s in the file", f, kind)
		}
	}
	path := c.String("from")
	var r io.Reader = c.App.Reader
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return teambus.Invalidf("--from %s: %w", path, errorCause(err))
		}
		defer f.Close()
		r = f
	}
	if err := parse(r); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
