package main

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/spawn"
)

// logsCommand is `teambus logs TEAM MEMBER [--follow]`: the output of a
// member's headless sessions on this machine.
func logsCommand() *cli.Command {
	return &cli.Command{
		Name:      "logs",
		Usage:     "print the output of a member's headless sessions on this machine (teambus spawn --headless)",
		ArgsUsage: "TEAM MEMBER",
		Flags: []cli.Flag{dirFlag(),
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing what is appended, until interrupted"}},
		Action: func(c *cli.Context) error {
			teamID, member, err := teamMemberArgs(c)
			if err != nil {
				return err
			}
			dir, err := stateDir(c)
			if err != nil {
				return err
			}
			path := spawn.LogPath(dir, teamID, member)
			f, err := os.Open(path)
			if errors.Is(err, fs.ErrNotExist) {
				return teambus.NotFoundf("no log of %s of team %s on this machine (%s): a headless session keeps it on the machine it runs on (teambus team show %s names the host)", member, teamID, path, teamID)
			}
			if err != nil {
				return err
			}
			defer f.Close()
			for {
				if _, err := io.Copy(c.App.Writer, f); err != nil {
					return err
				}
				if !c.Bool("follow") {
					return nil
				}
				select {
				case <-c.Context.Done():
					return nil
				case <-time.After(200 * time.Millisecond):
				}
			}
		},
	}
}
