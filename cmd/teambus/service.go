package main

import (
	"strings"

	"context"
	"log/slog"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/kv"
	mapi "github.com/teambus/teambus/member"
	"github.com/teambus/teambus/team"
)

// session is a connected one-shot command: its context (limited by
// --timeout), the bus connection and the team service on it.
type session struct {
	ctx    context.Context
	cancel context.CancelFunc
	conn   *bus.Conn
	svc    *team.Service
}

// open connects for a one-shot command. The caller defers close.
func open(c *cli.Context) (*session, error) { return openSession(c, false) }

// openSession is open; viaService says the command talks to the team
// service only, so connecting skips the JetStream readiness round trip
// (the service answers "unavailable" itself while JetStream is not ready).
func openSession(c *cli.Context, viaService bool) (*session, error) {
	ctx, cancel, err := withTimeout(c)
	if err != nil {
		return nil, err
	}
	cfg, err := connConfig(c)
	if err != nil {
		cancel()
		return nil, err
	}
	cfg.NoReadyCheck = cfg.NoReadyCheck || viaService
	conn, err := bus.Connect(ctx, cfg)
	if err != nil {
		cancel()
		return nil, err
	}
	if err := operatorOnly(c, conn); err != nil {
		conn.Close()
		cancel()
		return nil, err
	}
	ctx, cancel = watchDenied(c, ctx, cancel, conn)
	r := conn.Replicas()
	return &session{ctx: ctx, cancel: cancel, conn: conn, svc: team.New(conn.JS, team.Config{Mailbox: bus.MailboxConfig{Replicas: r}, KV: kv.Config{Replicas: r}})}, nil
}

func (s *session) close() {
	s.conn.Close()
	s.cancel()
}

// streamConn connects a command that streams or serves for as long as it
// takes: --timeout bounds connecting, not what follows. A member
// credential is refused at once where the command needs the operator's.
// The caller closes the connection.
func streamConn(c *cli.Context) (*bus.Conn, error) {
	conn, err := connect(c)
	if err != nil {
		return nil, err
	}
	if err := operatorOnly(c, conn); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// logConn returns the logger and the streamConn connection of a command
// that runs until stopped (a sidecar, mcp, ui). The caller closes the
// connection.
func logConn(c *cli.Context) (*slog.Logger, *bus.Conn, error) {
	log, err := newLogger(c)
	if err != nil {
		return nil, nil, err
	}
	conn, err := streamConn(c)
	if err != nil {
		return nil, nil, err
	}
	return log, conn, nil
}

// actor returns the member running the command from --team, --member and
// --session (the session may be empty while the member has none).
func actor(c *cli.Context) (team.Actor, error) {
	t, err := teamID(c)
	if err != nil {
		return team.Actor{}, err
	}
	m, err := memberID(c)
	if err != nil {
		return team.Actor{}, err
	}
	a := team.Actor{Team: t, Member: m, Session: c.String("session")}
	return a, a.Validate()
}

// member returns the team service client of the actor: member verbs go
// through the service, with a member's credential or the operator's token
// alike.
func (s *session) member(a team.Actor) (*mapi.Client, error) {
	return mapi.ForConn(s.conn, a.Team, a.Member, a.Session)
}

// memberView returns the team view through the team service when the
// connection is a member credential's (a member reads its own team only);
// ok is false for the operator, who reads the state directly.
func (s *session) memberView(teamID string) (v *team.View, ok bool, err error) {
	ct, cm, isMember := s.conn.MemberOf()
	if !isMember {
		return nil, false, nil
	}
	if ct != teamID {
		return nil, true, teambus.Invalidf("the credential of %s in team %s reaches only team %s, not %s", cm, ct, ct, teamID)
	}
	cl, err := s.member(team.Actor{Team: ct, Member: cm})
	if err != nil {
		return nil, true, err
	}
	v = &team.View{}
	if err := cl.Show(s.ctx, v); err != nil {
		return nil, true, err
	}
	return v, true, nil
}

// memberVerbs are the commands a member credential may run: they go
// through the team service. Everything else reads or changes team state
// directly and needs the operator's credential (the node token).
var memberVerbs = map[string]bool{
	"send": true, "inbox": true, "ack": true, "checkpoint": true, "join": true, "brief": true,
	"task claim": true, "task next": true, "task complete": true, "task fail": true, "task block": true,
	"task release": true, "task reassign": true, "task reopen": true, "task list": true, "task show": true,
	"team show": true, "mcp": true, "replay": true,
}

// operatorOnly refuses, at once and plainly, a command a member credential
// can not run: without it the command would wait for JetStream answers its
// account can never get and end in a timeout or a permissions violation.
func operatorOnly(c *cli.Context, conn *bus.Conn) error {
	ct, cm, ok := conn.MemberOf()
	if !ok {
		return nil
	}
	name := commandPath(c)
	if memberVerbs[name] {
		return nil
	}
	return teambus.Invalidf("`teambus %s` needs the operator's credential (the node token): the credential of %s in team %s reaches only the team service (send, inbox, ack, task, checkpoint, join, brief, team show, replay of its own mail, mcp)", name, cm, ct)
}

// commandPath is the command's name with its parents ("team show").
func commandPath(c *cli.Context) string {
	var names []string
	for _, x := range c.Lineage() {
		if x.Command != nil && x.Command.Name != "" && x.Command.Name != c.App.Name {
			names = append([]string{x.Command.Name}, names...)
		}
	}
	return strings.Join(names, " ")
}
