package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus/team"
)

// teamCheckpointCommand is `teambus team checkpoint T [--export DIR]`.
func teamCheckpointCommand() *cli.Command {
	return &cli.Command{
		Name:      "checkpoint",
		Usage:     "record a team checkpoint (a safe point to resume from); --export writes the team to a directory",
		ArgsUsage: "TEAM",
		Description: "Increments the team's checkpoint sequence and logs a checkpoint event in the team's event log.\n" +
			"With --export DIR it then writes DIR/state.json (team, members, tasks), DIR/mailbox.jsonl (every\n" +
			"message in seq order), DIR/events.jsonl (the event log as stored) and the members' Claude Code\n" +
			"transcripts (DIR/transcripts.json, DIR/transcripts/MEMBER/SESSION.jsonl): a layout to commit to git.",
		Flags: flags(connFlags(), []cli.Flag{
			&cli.StringFlag{Name: "export", Usage: "write state.json, mailbox.jsonl, events.jsonl and the transcripts into this directory"},
			&cli.StringFlag{Name: "label", Usage: "label of the checkpoint event (default: team-checkpoint-N)"},
			jsonFlag(),
		}),
		Action: teamArgAction(teamCheckpoint),
	}
}

func teamCheckpoint(c *cli.Context, s *session, id string) error {
	dir := c.String("export")
	t, err := s.svc.CheckpointTeam(s.ctx, id, c.String("label"))
	if err != nil {
		return err
	}
	out := struct {
		Team          string       `json:"team"`
		CheckpointSeq int64        `json:"checkpoint_seq"`
		Export        *team.Export `json:"export"`
	}{Team: id, CheckpointSeq: t.CheckpointSeq}
	if dir != "" {
		// Exporting reads the whole mailbox and log: --timeout bounds the
		// connection, not the export.
		if out.Export, err = s.svc.ExportCheckpoint(c.Context, id, dir); err != nil {
			return err
		}
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, out)
	}
	fmt.Fprintf(c.App.Writer, "team %s checkpoint %d recorded\n", id, t.CheckpointSeq)
	if e := out.Export; e != nil {
		fmt.Fprintf(c.App.Writer, "exported to %s: %s, %s (%d messages), %s (%d events), %s (%d transcripts)\n", e.Dir,
			team.StateFile, team.MailboxFile, e.Messages, team.EventsFile, e.Events, team.TranscriptsFile, e.Transcripts)
	}
	return nil
}
