//go:build !teambus_client

package main

import (
	"github.com/nats-io/nats.go"
	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/node"
)

// serveCommand is `teambus serve`: the team service beside an external
// NATS deployment (the embedded node hosts its own).
func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run the team service (the member API) against a NATS deployment, in the foreground",
		Description: "Members reach their team only through the team service. `teambus bus start` hosts it;\n" +
			"against an external NATS (--server) run `teambus serve` with the operator's credential\n" +
			"(--creds FILE or TEAMBUS_TOKEN; never a token in argv). Every instance joins one queue\n" +
			"group: start more to scale out. The deployment must give members the account layout of\n" +
			"the README (a member account per team importing tbsvc.<team>.> as tb.> with shared\n" +
			"request info).",
		Flags:  flags(connFlags(), logFlags()),
		Action: serve,
	}
}

func serve(c *cli.Context) error {
	if err := exactArgs(c, 0); err != nil {
		return err
	}
	log, err := newLogger(c)
	if err != nil {
		return err
	}
	cfg, err := connConfig(c)
	if err != nil {
		return err
	}
	cfg.Name = "teambus-service"
	conn, err := bus.Connect(c.Context, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, _, ok := conn.MemberOf(); ok {
		return teambus.Invalidf("a member credential can not run the team service: use the operator's credential")
	}
	s, err := node.Open(c.Context, conn.NC, node.Config{Logger: log})
	if err != nil {
		return err
	}
	log.Info("team service ready", "url", conn.NC.ConnectedUrlRedacted())
	select {
	case <-c.Context.Done():
	case <-closed(conn):
	}
	err = s.Close()
	log.Info("team service stopped")
	return err
}

// closed is closed when the connection is closed for good.
func closed(conn *bus.Conn) <-chan struct{} {
	ch := make(chan struct{})
	conn.NC.SetClosedHandler(func(*nats.Conn) { close(ch) })
	return ch
}
