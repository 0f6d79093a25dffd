package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/relay"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// session is a connected one-shot command: its context (limited by
// --timeout), the bus connection and the team service on it.
type session struct {
	ctx    context.Context
	cancel context.CancelFunc
	conn   *bus.Conn
	svc    *team.Service
	// relay, instead of conn, carries a member's requests through its
	// sidecar's connection (relaySession).
	relay *relay.Conn
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
	return &session{ctx: ctx, cancel: cancel, conn: conn, svc: team.New(conn.JS, team.Config{Mailbox: mailbox.MailboxConfig{Replicas: r}, KV: kv.Config{Replicas: r}})}, nil
}

func (s *session) close() {
	if s.conn != nil {
		s.conn.Close()
	}
	if s.relay != nil {
		s.relay.Close()
	}
	s.cancel()
}

// relayDialTimeout bounds reaching a sidecar's relay; past it the command
// connects itself.
const relayDialTimeout = relay.DialTimeout

// relaySession returns a session whose requests go through the relay of
// the actor's sidecar (package relay), or nil when there is none to use:
// the relay turned off (TEAMBUS_NO_RELAY), a NATS .creds file, no sidecar
// listening, or one that refused. The command then connects itself.
func relaySession(c *cli.Context, a team.Actor) (*session, *teamapi.Client) {
	if os.Getenv(relay.DisableEnv) != "" {
		return nil, nil
	}
	cfg, err := connConfig(c)
	if err != nil {
		return nil, nil
	}
	cr, err := flagCreds(c)
	if err != nil {
		return nil, nil
	}
	server, auth, ok := relayAuth(cfg, cr)
	if !ok {
		return nil, nil
	}
	ctx, cancel, err := withTimeout(c)
	if err != nil {
		return nil, nil
	}
	dctx, dcancel := context.WithTimeout(ctx, relayDialTimeout)
	rc, err := relay.Dial(dctx, server, a.Team, a.Member, auth)
	dcancel()
	if err != nil {
		cancel()
		return nil, nil
	}
	cl, err := teamapi.NewWith(rc, teamapi.Config{Team: a.Team, Member: a.Member, Session: a.Session, Operator: auth.Token != ""})
	if err != nil {
		rc.Close()
		cancel()
		return nil, nil
	}
	return &session{ctx: ctx, cancel: cancel, relay: rc}, cl
}

// relayAuth is the bus and the secret a command would connect with, as
// bus.Connect would pick them: the member credential cr of --creds, a user
// and password, a token, or the node directory's discovery file.
func relayAuth(cfg bus.ConnectConfig, cr *bus.Creds) (server string, auth relay.Auth, ok bool) {
	switch {
	case cfg.Creds != "":
		if cr == nil { // a NATS .creds file
			return "", auth, false
		}
		server = cfg.Server
		if server == "" && len(cr.Servers) > 0 {
			server = cr.Servers[0]
		}
		return server, relay.Auth{User: cr.User, Password: cr.Password}, server != ""
	case cfg.User != "" && cfg.Pass != "":
		return cfg.Server, relay.Auth{User: cfg.User, Password: cfg.Pass}, cfg.Server != ""
	case cfg.Server != "":
		return cfg.Server, relay.Auth{Token: cfg.Token}, cfg.Token != ""
	}
	d, err := bus.ReadDiscovery(cfg.Dir)
	if err != nil || d.Token == "" {
		return "", auth, false
	}
	return d.URL, relay.Auth{Token: d.Token}, true
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

// member returns the team service client of the actor on the session's
// connection: member verbs go through the service, with a member's
// credential or the operator's token alike (connectAPI without a probe).
func (s *session) member(a team.Actor) (*teamapi.Client, error) {
	return serviceClient(s.ctx, s.conn, a)
}

// connectMember is the one way a one-shot member command reaches the member
// API: through the relay of the actor's sidecar when one answers (once a
// request is written there, its outcome is final: the command does not
// send it again on a connection of its own), else on a connection of its
// own, as connectAPI picks. The caller closes the session.
func connectMember(c *cli.Context, a team.Actor) (*session, *teamapi.Client, error) {
	if s, cl := relaySession(c, a); s != nil {
		return s, cl, nil
	}
	s, err := openSession(c, true)
	if err != nil {
		return nil, nil, err
	}
	cl, err := s.member(a)
	if err != nil {
		s.close()
		return nil, nil, err
	}
	return s, cl, nil
}

// connectAPI picks the member API on a bus connection, for the actor a
// (zero: any, as each request names it):
//   - a member credential: the team service as that member (a
//     teamapi.Client over NATS); it has no JetStream, so nothing else;
//   - the operator's token: the team service too (a teamapi.Client with
//     the operator's subjects). With probe > 0 the service is looked for
//     first, and when no team service runs on the bus (an external NATS
//     without `teambus serve`) the team state itself serves
//     (team.Service.API, svc).
//
// The relay of a member's sidecar is tried before a connection is opened
// at all (connectMember).
func connectAPI(ctx context.Context, conn *bus.Conn, svc *team.Service, a team.Actor, probe time.Duration, log *slog.Logger) (teamapi.API, error) {
	if ct, cm, ok := conn.MemberOf(); ok && a.Team == "" && a.Member == "" {
		a.Team, a.Member = ct, cm
	}
	if _, _, member := conn.MemberOf(); member || probe <= 0 {
		return teamapi.ForConn(conn, a.Team, a.Member, a.Session)
	}
	ping, err := micro.ControlSubject(micro.PingVerb, teamapi.ServiceName, "")
	if err != nil {
		return nil, fmt.Errorf("team service ping subject: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, probe)
	defer cancel()
	_, err = conn.NC.RequestWithContext(pctx, ping, nil)
	switch {
	case err == nil:
		return teamapi.ForConn(conn, a.Team, a.Member, a.Session)
	case errors.Is(err, nats.ErrNoResponders):
		log.Info("no team service on the bus: the tools use the team state directly")
		return svc.API(), nil
	}
	return nil, teambus.Unavailablef("mcp: look for the team service: %w", err)
}

// serviceClient is connectAPI without a probe: always a teamapi.Client.
func serviceClient(ctx context.Context, conn *bus.Conn, a team.Actor) (*teamapi.Client, error) {
	api, err := connectAPI(ctx, conn, nil, a, 0, nil)
	if err != nil {
		return nil, err
	}
	return api.(*teamapi.Client), nil
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
	if err := cl.ShowInto(s.ctx, v); err != nil {
		return nil, true, err
	}
	return v, true, nil
}

// memberCommands are the commands a member credential may run, each with
// the verb of the team service it goes through (mcp: all of them).
// Everything else reads or changes team state directly and needs the
// operator's credential (the node token).
var memberCommands = map[string]string{
	"send": teamapi.VerbSend, "inbox": teamapi.VerbInbox, "ack": teamapi.VerbAck,
	"checkpoint": teamapi.VerbCheckpoint, "join": teamapi.VerbJoin, "brief": teamapi.VerbBrief,
	"replay": teamapi.VerbReplay, "team show": teamapi.VerbShow, "task list": teamapi.VerbShow,
	"task show": teamapi.VerbShow, "task claim": teamapi.VerbTask, "task next": teamapi.VerbTask,
	"task complete": teamapi.VerbTask, "task fail": teamapi.VerbTask, "task block": teamapi.VerbTask,
	"task release": teamapi.VerbTask, "task reassign": teamapi.VerbTask, "task reopen": teamapi.VerbTask,
	"mcp": "",
	// The lead's credential: refused by the service for any other.
	"task add": teamapi.VerbTask, "team resume": teamapi.VerbResume, "team probe": teamapi.VerbProbe,
	"events export": teamapi.VerbEvents,
}

// lead is the member API for the lead of teamID in session: the team
// service as the lead on the lead's credential (the service refuses any
// other member's), the team state itself with the node token.
func (s *session) lead(teamID, session string) teamapi.API {
	if _, _, ok := s.conn.MemberOf(); ok {
		if cl, err := teamapi.ForConn(s.conn, teamID, teambus.Lead, session); err == nil {
			return cl
		}
		// A credential of another team: its own client, which says so.
		ct, cm, _ := s.conn.MemberOf()
		cl, _ := teamapi.New(s.conn.NC, teamapi.Config{Team: ct, Member: cm, Session: session})
		return cl
	}
	return s.svc.API()
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
	if _, ok := memberCommands[name]; ok {
		return nil
	}
	return teambus.Invalidf("`teambus %s` needs the operator's credential (the node token): the credential of %s in team %s reaches only the team service (send, inbox, ack, task, checkpoint, join, brief, team show, replay of its own mail, mcp; and for the lead task add, team resume, team probe)", name, cm, ct)
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
