package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/team"
)

// teamSetCommand is `teambus team set`: raise a live team's limits.
func teamSetCommand() *cli.Command {
	return &cli.Command{
		Name:      "set",
		Usage:     "raise a live team's size limits (operator): a full mailbox takes mail again at once",
		ArgsUsage: "TEAM",
		Description: "Raises the limits `team create` set, on the team's live streams; members, mail and state are\n" +
			"untouched. A limit only grows: a smaller one would drop old mail to fit. The bus reserves each limit\n" +
			"on its --max-store: a raise past it is refused and changes nothing.",
		Flags: flags(connFlags(), []cli.Flag{
			&cli.StringFlag{Name: "mailbox-max-bytes", Usage: "new size limit of the team's mailbox, e.g. 64MiB"},
			&cli.StringFlag{Name: "events-max-bytes", Usage: "new size limit of the team's event log, e.g. 32MiB"},
			jsonFlag(),
		}),
		Action: teamArgAction(teamSet),
	}
}

func teamSet(c *cli.Context, s *session, id string) error {
	var l team.Limits
	var err error
	if l.Mailbox, err = parseSize("--mailbox-max-bytes", c.String("mailbox-max-bytes")); err != nil {
		return err
	}
	if l.Events, err = parseSize("--events-max-bytes", c.String("events-max-bytes")); err != nil {
		return err
	}
	if l.Mailbox == 0 && l.Events == 0 {
		return teambus.Invalidf("`teambus team set %s` needs --mailbox-max-bytes or --events-max-bytes", id)
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"--mailbox-max-bytes", l.Mailbox}, {"--events-max-bytes", l.Events}} {
		if f.v != 0 && f.v < team.MinStreamBytes {
			return teambus.Invalidf("invalid %s %s: at least %s", f.name, c.String(f.name[2:]), bus.Size(team.MinStreamBytes))
		}
	}
	res, err := s.svc.SetLimits(s.ctx, id, l)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, res)
	}
	for _, sl := range []struct {
		what string
		l    *team.StreamLimit
	}{{"mailbox", res.Mailbox}, {"event log", res.Events}} {
		switch {
		case sl.l == nil:
		case sl.l.Was == sl.l.Now:
			fmt.Fprintf(c.App.Writer, "team %s: %s already limited to %s (holds %s)\n", id, sl.what, bus.Size(sl.l.Now), bus.Size(int64(sl.l.Used)))
		default:
			fmt.Fprintf(c.App.Writer, "team %s: %s raised from %s to %s (holds %s)\n", id, sl.what, bus.Size(sl.l.Was), bus.Size(sl.l.Now), bus.Size(int64(sl.l.Used)))
		}
	}
	return nil
}
