package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/team"
)

func briefCommand() *cli.Command {
	return &cli.Command{
		Name:  "brief",
		Usage: "print the prompt for a fresh agent replacing a member: role, task, checkpoint, recent mail",
		Flags: flags(connFlags(), []cli.Flag{teamFlag(), memberFlag(),
			&cli.IntFlag{Name: "mail", Usage: "recent messages to include", Value: 10, EnvVars: []string{"TEAMBUS_BRIEF_MAIL"}},
			jsonFlag()}),
		Action: teamAction(0, brief),
	}
}

func brief(c *cli.Context, teamID string) error {
	member, err := memberID(c)
	if err != nil {
		return err
	}
	if err := teambus.ValidateMemberID(member); err != nil {
		return err
	}
	return withSession(c, func(s *session) error {
		a := team.Actor{Team: teamID, Member: member}
		if ct, cm, ok := s.conn.MemberOf(); ok && ct == teamID {
			// A member credential asks as itself (the lead may brief anyone).
			a.Member = cm
		}
		cl, err := s.member(a)
		if err != nil {
			return err
		}
		var b team.Brief
		if err := cl.BriefInto(s.ctx, member, c.Int("mail"), &b); err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, b)
		}
		_, err = fmt.Fprint(c.App.Writer, b.Text)
		return err
	})
}
