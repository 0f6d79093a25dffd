package main

import (
	"encoding/json"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

func checkpointCommand() *cli.Command {
	return &cli.Command{
		Name:  "checkpoint",
		Usage: "record progress on your task so a fresh agent can continue it without redoing work",
		Flags: flags(connFlags(), memberFlags(), []cli.Flag{
			&cli.StringSliceFlag{Name: "done", Usage: "a step completed, repeatable"},
			&cli.StringSliceFlag{Name: "remaining", Usage: "a step remaining, repeatable"},
			&cli.StringFlag{Name: "last-action", Usage: "the last thing you did"},
			&cli.StringSliceFlag{Name: "file", Usage: "a file you changed, repeatable"},
			&cli.StringFlag{Name: "data", Usage: "free-form JSON"},
			&cli.StringFlag{Name: "task", Usage: "the task (default: the one you hold)"},
			jsonFlag(),
		}),
		Action: actorAction(0, checkpoint),
	}
}

func checkpoint(c *cli.Context, a team.Actor) error {
	spec := teamapi.CheckpointRequest{Done: c.StringSlice("done"), Remaining: c.StringSlice("remaining"),
		LastAction: c.String("last-action"), Files: c.StringSlice("file"), Task: c.String("task")}
	if spec.Task != "" {
		if err := teambus.ValidateID("task", spec.Task); err != nil {
			return err
		}
	}
	if d := c.String("data"); d != "" {
		if err := teambus.ValidateData([]byte(d)); err != nil {
			return err
		}
		spec.Data = json.RawMessage(d)
	}
	// The caps, before any connection: exit 2 names the field and the cap.
	if err := teambus.ValidateCheckpoint(spec.Done, spec.Remaining, spec.LastAction, spec.Files, spec.Data); err != nil {
		return err
	}
	return withMember(c, a, func(s *session, cl *teamapi.Client) error {
		t, err := cl.Record(s.ctx, spec)
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, t.Checkpoint)
		}
		fmt.Fprintf(c.App.Writer, "checkpoint #%d saved with task %s\n", t.Checkpoint.Seq, t.ID)
		return nil
	})
}
