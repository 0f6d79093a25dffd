package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

func joinCommand() *cli.Command {
	return &cli.Command{
		Name:   "join",
		Usage:  "register a new incarnation of a member without a sidecar (epoch up; the old session is fenced)",
		Flags:  flags(connFlags(), memberFlags(), []cli.Flag{jsonFlag()}),
		Action: teamAction(0, join),
	}
}

func join(c *cli.Context, teamID string) error {
	member, err := memberID(c)
	if err != nil {
		return err
	}
	sess, err := sessionID(c)
	if err != nil {
		return err
	}
	return withMember(c, team.Actor{Team: teamID, Member: member, Session: sess}, func(s *session, cl *teamapi.Client) error {
		m, err := cl.JoinSession(s.ctx)
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, m)
		}
		fmt.Fprintf(c.App.Writer, "%s registered: epoch %d, session %s\n", member, m.Epoch, sess)
		return nil
	})
}
