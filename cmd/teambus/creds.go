package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/teambus/teambus/node/credstore"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
)

// teamCredsCommand is `teambus team creds T --member M`: issue (or revoke)
// the credential of one member.
func teamCredsCommand() *cli.Command {
	return &cli.Command{
		Name:      "creds",
		Usage:     "issue a member's own credential: it reaches only its team's mail, its own inbox and its team's state",
		ArgsUsage: "TEAM",
		Description: "Issues the credential of --member (or of the lead with --member lead) and writes it to --out,\n" +
			"mode 0600, or prints it. The member then runs its commands with --creds FILE (or TEAMBUS_CREDS)\n" +
			"instead of the node token. The credential may send mail as the member within the team, read and\n" +
			"ack the member's own inbox, and read and write the team's task state and heartbeats; everything\n" +
			"else is refused by the bus: other teams, other members' inboxes, reading the mailbox stream,\n" +
			"creating or deleting streams and consumers. Issuing again replaces the password. --revoke\n" +
			"removes the credential and closes the connections that use it. Needs the operator's token.",
		Flags: flags(connFlags(), []cli.Flag{
			&cli.StringFlag{Name: "member", Usage: "member id (lead for the lead)", EnvVars: []string{"TEAMBUS_MEMBER"}},
			&cli.StringFlag{Name: "out", Usage: "write the credential to this file (mode 0600) instead of printing it"},
			&cli.BoolFlag{Name: "revoke", Usage: "revoke the member's credential instead of issuing one"},
			jsonFlag(),
		}),
		Action: teamCreds,
	}
}

func teamCreds(c *cli.Context) error {
	teamID, err := teamArg(c)
	if err != nil {
		return err
	}
	member := c.String("member")
	if member == "" {
		return usageError(c, "missing --member (the member whose credential to issue; lead for the lead)")
	}
	if member != teambus.Lead {
		if err := teambus.ValidateMemberID(member); err != nil {
			return err
		}
	}
	return withSession(c, func(s *session) error {
		if c.Bool("revoke") {
			if err := credstore.RevokeCreds(s.ctx, s.conn, teamID, member); err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "revoked the credential of %s in team %s\n", member, teamID)
			return nil
		}
		t, err := s.svc.Team(s.ctx, teamID)
		if err != nil {
			return err
		}
		if member != teambus.Lead {
			if _, err := s.svc.Member(s.ctx, t.ID, member); err != nil {
				return err
			}
		}
		cr, err := credstore.IssueCreds(s.ctx, s.conn, teamID, member, credsServers(c))
		if err != nil {
			return err
		}
		out := c.String("out")
		if out == "" {
			return printJSON(c.App.Writer, cr)
		}
		if abs, err := filepath.Abs(out); err == nil {
			out = abs
		}
		if err := bus.WriteCreds(out, cr); err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, map[string]string{"team": teamID, "member": member, "user": cr.User, "inbox_prefix": cr.InboxPrefix, "file": out})
		}
		fmt.Fprintf(c.App.Writer, "wrote the credential of %s in team %s to %s (user %s): pass --creds %s\n", member, teamID, out, cr.User, out)
		return nil
	})
}

// credsServers are the bus URLs a credential names: --server (without the
// user and password a URL may carry: the operator's, not the member's),
// else the local node's URL.
func credsServers(c *cli.Context) []string {
	if s := c.String("server"); s != "" {
		out := splitList([]string{s})
		for i, v := range out {
			if u, err := url.Parse(v); err == nil && u.User != nil {
				u.User = nil
				out[i] = u.String()
			}
		}
		return out
	}
	dir, err := stateDir(c)
	if err != nil {
		return nil
	}
	if d, err := bus.ReadDiscovery(dir); err == nil {
		return []string{d.URL}
	}
	return nil
}

// flagCreds returns the member credential of --creds, nil when --creds is
// not given or is a NATS credentials file.
func flagCreds(c *cli.Context) (*bus.Creds, error) {
	path := c.String("creds")
	if path == "" {
		return nil, nil
	}
	// --team and --member both default from the file: read it once a run.
	key := "creds:" + path
	if cr, ok := c.App.Metadata[key].(*bus.Creds); ok {
		return cr, nil
	}
	cr, ok, err := bus.ReadCreds(path)
	if err != nil || !ok {
		return nil, err
	}
	if c.App.Metadata == nil {
		c.App.Metadata = map[string]any{}
	}
	c.App.Metadata[key] = cr
	return cr, nil
}

// credsID is the default of --team or --member from a member credential:
// an agent that has its credential file needs neither flag. A flag that
// names another team or member than the credential is refused, as the bus
// would refuse every request.
func credsID(c *cli.Context, name, id string) (string, error) {
	cr, err := flagCreds(c)
	if err != nil || cr == nil {
		return id, err
	}
	own := cr.Team
	if name == "member" {
		own = cr.Member
	}
	if id == "" {
		return own, nil
	}
	if id != own {
		return "", usageError(c, "--%s %s: the credential %s is for member %s of team %s only", name, id, c.String("creds"), cr.Member, cr.Team)
	}
	return id, nil
}

// explainDenied turns the timeout of a request the bus refused for lack of
// permission into the permission error (exit 2).
func explainDenied(app *cli.App, err error) error {
	if err == nil || app.Metadata == nil {
		return err
	}
	conn, _ := app.Metadata[metaConn].(*bus.Conn)
	denied := conn.Denied()
	if denied == nil || errors.Is(err, teambus.ErrInvalid) {
		return err
	}
	who := "this credential"
	if cr := conn.Creds(); cr != nil {
		who = fmt.Sprintf("the credential of %s in team %s", cr.Member, cr.Team)
	}
	msg := strings.TrimPrefix(denied.Error(), "nats: ")
	return teambus.Invalidf("permission denied: %s (%s may only send as its member, read its own inbox and its team's state)", msg, who)
}

// watchDenied remembers conn for explainDenied and returns ctx cancelled
// at the first request the bus refuses for lack of permission: NATS never
// answers it, so the command stops at the refusal instead of at its
// timeout. The returned cancel replaces cancel.
func watchDenied(c *cli.Context, ctx context.Context, cancel context.CancelFunc, conn *bus.Conn) (context.Context, context.CancelFunc) {
	keepConn(c, conn)
	dctx, dcancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-conn.DeniedC():
			dcancel()
		case <-dctx.Done():
		}
	}()
	return dctx, func() {
		dcancel()
		cancel()
	}
}

// metaConn is the App.Metadata key of the connection a command opened.
const metaConn = "teambus.conn"

// keepConn remembers the command's connection for explainDenied.
func keepConn(c *cli.Context, conn *bus.Conn) {
	if c.App.Metadata == nil {
		c.App.Metadata = map[string]any{}
	}
	c.App.Metadata[metaConn] = conn
}

// splitList splits comma separated values of a repeatable flag and drops
// empty ones.
func splitList(values []string) []string {
	var out []string
	for _, v := range values {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}
