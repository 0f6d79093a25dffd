package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/relay"
	"github.com/teambus/teambus/team"
)

// sidecarConn connects a long-running sidecar (logConn): the connection
// stays up (and reconnects) for as long as it runs. What the service can
// not do without failing an operation (an event it could not log) goes to
// the logger. The caller closes the connection.
func sidecarConn(c *cli.Context) (*slog.Logger, *bus.Conn, *team.Service, error) {
	log, conn, err := logConn(c)
	if err != nil {
		return nil, nil, nil, err
	}
	return log, conn, team.New(conn.JS, team.Config{Logger: log}), nil
}

// sidecarRun is the preamble of the sidecar commands: no arguments, the
// team, the member (the teammate's; the lead is "lead"), the session, the
// logger and a connection kept open while run runs.
func sidecarRun(c *cli.Context, withMember bool, run func(a team.Actor, log *slog.Logger, svc *team.Service) error) error {
	if err := exactArgs(c, 0); err != nil {
		return err
	}
	a := team.Actor{Member: teambus.Lead}
	var err error
	if a.Team, err = teamID(c); err != nil {
		return err
	}
	if withMember {
		if a.Member, err = memberID(c); err != nil {
			return err
		}
	}
	if a.Session, err = sessionID(c); err != nil {
		return err
	}
	log, conn, svc, err := sidecarConn(c)
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := serveRelay(c.Context, conn, a, log)
	defer stop()
	return run(a, log, svc)
}

// serveRelay serves the relay of the sidecar's member (package relay)
// until stop is called: the member's one-shot commands then go through
// this sidecar instead of connecting themselves. A sidecar without the
// operator's token, or with TEAMBUS_NO_RELAY set, serves none; a relay
// that can not listen is logged and left out.
func serveRelay(ctx context.Context, conn *bus.Conn, a team.Actor, log *slog.Logger) (stop func()) {
	nc := conn.NC
	if nc.Opts.Token == "" || os.Getenv(relay.DisableEnv) != "" {
		return func() {}
	}
	ln, err := relay.Listen(relay.Path(nc.ConnectedUrl(), a.Team, a.Member))
	if err != nil {
		log.Warn("no relay for one-shot commands: they connect themselves", "err", err)
		return func() {}
	}
	log.Debug("relay listening", "socket", ln.Addr().String())
	srv := &relay.Server{NC: nc, Team: a.Team, Member: a.Member, Log: log,
		Connect: func(ctx context.Context, user, password string) (*nats.Conn, error) {
			c, err := bus.Connect(ctx, bus.ConnectConfig{Server: nc.ConnectedUrl(), User: user, Pass: password,
				InboxPrefix: bus.MemberInboxPrefix(a.Team, a.Member), Name: "teambus relay", Timeout: conn.Timeout, NoReadyCheck: true})
			if err != nil {
				return nil, err
			}
			return c.NC, nil
		}}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ctx, ln); err != nil {
			log.Warn("relay stopped: one-shot commands connect themselves", "err", err)
		}
	}()
	return func() {
		cancel()
		<-done
		srv.Close()
	}
}

// adoptFlag is --adopt of the sidecars: attach to the incarnation a
// SessionStart hook registered for --session (exit 3 when the member's or
// the team's lead session differs) instead of registering a new one.
func adoptFlag() cli.Flag {
	return &cli.BoolFlag{Name: "adopt", Usage: "attach to the incarnation already registered for --session instead of registering a new one (exit 3 if it is not current)", EnvVars: []string{"TEAMBUS_ADOPT"}}
}
