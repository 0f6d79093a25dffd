package main

import (
	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// The preambles of the command actions. Every command checks its
// arguments first and its identity flags next, so a bad invocation fails
// plainly (exit 2) before anything connects; these helpers keep that
// order in one place.

// teamAction is the action of a command that takes n arguments and acts
// on the team of --team: fn runs once both are checked.
func teamAction(n int, fn func(c *cli.Context, teamID string) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		if err := exactArgs(c, n); err != nil {
			return err
		}
		id, err := teamID(c)
		if err != nil {
			return err
		}
		return fn(c, id)
	}
}

// actorAction is the action of a member's command that takes n
// arguments: fn runs with the member (--team, --member, --session) once
// both are checked.
func actorAction(n int, fn func(c *cli.Context, a team.Actor) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		if err := exactArgs(c, n); err != nil {
			return err
		}
		a, err := actor(c)
		if err != nil {
			return err
		}
		return fn(c, a)
	}
}

// teamArgAction is the action of a command whose one argument is a team
// id: fn runs on a session opened once the id is checked.
func teamArgAction(fn func(c *cli.Context, s *session, teamID string) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		id, err := teamArg(c)
		if err != nil {
			return err
		}
		return withSession(c, func(s *session) error { return fn(c, s, id) })
	}
}

// teamArg checks that the command got one argument, a team id, and
// returns it.
func teamArg(c *cli.Context) (string, error) {
	if err := exactArgs(c, 1); err != nil {
		return "", err
	}
	id := c.Args().First()
	return id, teambus.ValidateID("team", id)
}

// teamMemberArgs checks that the command got two arguments, a team id
// and a member id, and returns them.
func teamMemberArgs(c *cli.Context) (teamID, member string, err error) {
	if err := exactArgs(c, 2); err != nil {
		return "", "", err
	}
	teamID, member = c.Args().Get(0), c.Args().Get(1)
	if err := teambus.ValidateID("team", teamID); err != nil {
		return "", "", err
	}
	return teamID, member, teambus.ValidateMemberID(member)
}

// withSession opens a session for a one-shot command, runs fn on it and
// closes it.
func withSession(c *cli.Context, fn func(*session) error) error {
	s, err := open(c)
	if err != nil {
		return err
	}
	defer s.close()
	return fn(s)
}

// withMember opens a session and runs fn with the actor's client of the
// team service (connectMember).
func withMember(c *cli.Context, a team.Actor, fn func(*session, *teamapi.Client) error) error {
	s, cl, err := connectMember(c, a)
	if err != nil {
		return err
	}
	defer s.close()
	return fn(s, cl)
}
