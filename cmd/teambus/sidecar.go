package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/lead"
	"github.com/teambus/teambus/relay"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
	"github.com/teambus/teambus/teammate"
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

func leadCommand() *cli.Command {
	return &cli.Command{
		Name:  "lead",
		Usage: "run the lead sidecar beside the lead's agent session (foreground)",
		Description: "Attaches as the team's lead (the resume validation sequence), heartbeats, probes silent or\n" +
			"stuck teammates and confirms crashes, requeues their tasks with checkpoints, escalates past the\n" +
			"crash limit. With --pid it stops heartbeating when the lead agent exits. When it stops cleanly (SIGTERM,\n" +
			"SIGINT) or sees its agent exit, it releases the team: the next lead session resumes it at once.",
		Flags: flags(connFlags(), logFlags(), []cli.Flag{teamFlag(), sessionFlag(),
			&cli.BoolFlag{Name: "force", Usage: "take over from a lead that is not stale yet", EnvVars: []string{"TEAMBUS_FORCE"}},
			&cli.IntFlag{Name: "pid", Usage: "the lead agent's process id to watch", EnvVars: []string{"TEAMBUS_PID"}},
			adoptFlag(),
		}),
		Action: runLead,
	}
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

func runLead(c *cli.Context) error {
	return sidecarRun(c, false, func(a team.Actor, log *slog.Logger, svc *team.Service) error {
		return runLeadSidecar(c, a.Team, a.Session, log, svc)
	})
}

func runLeadSidecar(c *cli.Context, teamID, session string, log *slog.Logger, svc *team.Service) error {
	sc, err := lead.New(svc.SidecarAPI(), lead.Config{Team: teamID, Session: session, Force: c.Bool("force"), PID: c.Int("pid"), Adopt: c.Bool("adopt"), Logger: log,
		OnAttach: func(r *team.Report) {
			fmt.Fprintf(c.App.Writer, "lead attached to team %s: %s, lead epoch %d, %d%% done (took %s)\n", r.Team, r.Decision, r.LeadEpoch, r.Progress, r.Took)
			for _, w := range r.Warnings {
				fmt.Fprintf(c.App.Writer, "warning: %s\n", w)
			}
		}})
	if err != nil {
		return err
	}
	return sc.Run(c.Context)
}

func teammateCommand() *cli.Command {
	return &cli.Command{
		Name:  "teammate",
		Usage: "run the teammate sidecar beside a teammate's agent session (foreground)",
		Description: "Registers a new incarnation of the member, heartbeats, answers status checks and shutdown\n" +
			"requests, enters zombie mode when the lead is gone, and with --pid reports a crash at once\n" +
			"when the agent exits holding a task. SIGTERM is a clean shutdown.",
		Flags: flags(connFlags(), logFlags(), memberFlags(), []cli.Flag{
			&cli.IntFlag{Name: "pid", Usage: "the agent's process id to watch", EnvVars: []string{"TEAMBUS_PID"}},
			&cli.StringFlag{Name: "workdir", Usage: "the agent's working tree (automatic checkpoints list its changed files)", EnvVars: []string{"TEAMBUS_WORKDIR"}},
			adoptFlag(),
		}),
		Action: runTeammate,
	}
}

func runTeammate(c *cli.Context) error {
	return sidecarRun(c, true, func(a team.Actor, log *slog.Logger, svc *team.Service) error {
		return runTeammateSidecar(c, a.Team, a.Member, a.Session, log, svc)
	})
}

func runTeammateSidecar(c *cli.Context, teamID, member, session string, log *slog.Logger, svc *team.Service) error {
	sc, err := teammate.New(svc.SidecarAPI(), teammate.Config{Team: teamID, Member: member, Session: session, PID: c.Int("pid"), WorkDir: c.String("workdir"), Adopt: c.Bool("adopt"), Logger: log})
	if err != nil {
		return err
	}
	out, err := sc.Run(c.Context)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "teammate %s (epoch %d) stopped: %s\n", member, sc.Epoch(), out)
	return nil
}

// adoptFlag is --adopt of the sidecars: attach to the incarnation a
// SessionStart hook registered for --session (exit 3 when the member's or
// the team's lead session differs) instead of registering a new one.
func adoptFlag() cli.Flag {
	return &cli.BoolFlag{Name: "adopt", Usage: "attach to the incarnation already registered for --session instead of registering a new one (exit 3 if it is not current)", EnvVars: []string{"TEAMBUS_ADOPT"}}
}

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

// resumeCommands are `team resume`, `team probe`, `team review` and the
// team lifecycle commands.
func resumeCommands() []*cli.Command {
	return []*cli.Command{
		{
			Name: "resume", Usage: "attach a lead session to a team: validate, take over if allowed, summarize", ArgsUsage: "TEAM",
			Flags: flags(connFlags(), []cli.Flag{sessionFlag(),
				&cli.BoolFlag{Name: "force", Usage: "take over from a lead that is not stale yet", EnvVars: []string{"TEAMBUS_FORCE"}}, jsonFlag()}),
			Action: func(c *cli.Context) error {
				return teamReport(c, func(s *session, id string) (*team.Report, error) {
					sess, err := sessionID(c)
					if err != nil {
						return nil, err
					}
					return s.svc.Resume(s.ctx, id, sess, c.Bool("force"), false)
				})
			},
		},
		{
			Name: "probe", Usage: "check whether a new lead session can resume a team now, and if not why and when (read-only)", ArgsUsage: "TEAM",
			Flags: flags(connFlags(), []cli.Flag{jsonFlag()}),
			Action: func(c *cli.Context) error {
				return teamReport(c, func(s *session, id string) (*team.Report, error) { return s.svc.Probe(s.ctx, id) })
			},
		},
		{
			Name: "review", Usage: "review a finished team (read-only)", ArgsUsage: "TEAM",
			Flags: flags(connFlags(), []cli.Flag{jsonFlag()}),
			Action: teamArgAction(func(c *cli.Context, s *session, id string) error {
				v, err := s.svc.Show(s.ctx, id)
				if err != nil {
					return err
				}
				if c.Bool("json") {
					return printJSON(c.App.Writer, v)
				}
				if !v.Team.Closed() {
					fmt.Fprintf(c.App.Writer, "note: team %s is %s, not finished; this is its current state\n", v.Team.ID, v.Team.Status)
				}
				return printView(c.App.Writer, v)
			}),
		},
		transitionCommand("consolidate", "mark the team consolidating (the lead's final phase: merge, build, commit)", teambus.TeamConsolidating),
		transitionCommand("complete", "mark the team complete (refused while tasks are unfinished, unless --force); sidecars shut down; its streams, buckets and credentials stay for review until `team delete`", teambus.TeamComplete),
		transitionCommand("abort", "abort the team (emergency); sidecars shut down; frees nothing: its streams, buckets and credentials stay for review until `team delete`", teambus.TeamAborted),
		{
			Name: "facts", Usage: "register facts files whose sha256 is checked at every resume", ArgsUsage: "TEAM FILE...",
			Flags: connFlags(),
			Action: func(c *cli.Context) error {
				if err := minArgs(c, 2); err != nil {
					return err
				}
				id := c.Args().First()
				if err := teambus.ValidateID("team", id); err != nil {
					return err
				}
				return withSession(c, func(s *session) error {
					facts, err := s.svc.RegisterFacts(s.ctx, id, c.Args().Tail())
					if err != nil {
						return err
					}
					for p, sum := range facts {
						fmt.Fprintf(c.App.Writer, "%s  %s\n", sum, p)
					}
					return nil
				})
			},
		},
	}
}

func transitionCommand(name, usage string, to teambus.TeamStatus) *cli.Command {
	var extra []cli.Flag
	if to == teambus.TeamComplete {
		extra = append(extra, &cli.BoolFlag{Name: "force", Usage: "complete even with unfinished tasks", EnvVars: []string{"TEAMBUS_FORCE"}})
	}
	if to == teambus.TeamConsolidating {
		extra = append(extra, &cli.StringFlag{Name: "worktree", Usage: "the working tree being consolidated (default: the current directory)", EnvVars: []string{"TEAMBUS_WORKTREE"}})
	}
	return &cli.Command{
		Name: name, Usage: usage, ArgsUsage: "TEAM", Flags: flags(connFlags(), extra),
		Action: teamArgAction(func(c *cli.Context, s *session, id string) error {
			wt := c.String("worktree")
			if to == teambus.TeamConsolidating && wt == "" {
				wt, _ = os.Getwd()
			}
			t, err := s.svc.TransitionChecked(s.ctx, id, to, wt, c.Bool("force"))
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "team %s is %s\n", t.ID, t.Status)
			return nil
		}),
	}
}

func teamReport(c *cli.Context, fn func(*session, string) (*team.Report, error)) error {
	return teamArgAction(func(c *cli.Context, s *session, id string) error {
		r, err := fn(s, id)
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, r)
		}
		return printReport(c, r)
	})(c)
}

func printReport(c *cli.Context, r *team.Report) error {
	w := c.App.Writer
	if r.Decision == team.DecisionAlreadyLead {
		fmt.Fprintf(w, "team %s: already the lead (session %s, epoch %d): nothing changed\n", r.Team, r.LeadSession, r.LeadEpoch)
	}
	fmt.Fprintf(w, "team %s: %s — %s (lead epoch %d, session %s, took %s)\n", r.Team, r.Status, r.Decision, r.LeadEpoch, dash(r.LeadSession), r.Took)
	if r.OldLead != "" {
		fmt.Fprintf(w, "took over from lead session %s (fenced)\n", r.OldLead)
	}
	if r.Why != "" {
		// Probe: what a `team resume --session NEW` meets now.
		verdict := "a new lead session can not resume now"
		if r.Decision == team.DecisionResumable {
			verdict = "a new lead session can resume now"
		}
		fmt.Fprintf(w, "%s: %s\n", verdict, r.Why)
	}
	if r.LeadTimeoutDetectedAt != nil {
		fmt.Fprintf(w, "teammates detected the lead gone at %s\n", formatTime(*r.LeadTimeoutDetectedAt))
	}
	fmt.Fprintf(w, "progress %d%%:", r.Progress)
	for _, st := range teambus.TaskStatuses {
		if n := r.Tasks[string(st)]; n > 0 {
			fmt.Fprintf(w, " %d %s", n, st)
		}
	}
	fmt.Fprintln(w)
	for _, m := range r.Members {
		task := "-"
		if m.Task != nil {
			task = *m.Task
		}
		fmt.Fprintf(w, "  %-12s %-8s %-12s task %s\n", m.ID, m.State, m.Status, task)
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	if len(r.MailboxTail) > 0 {
		fmt.Fprintln(w, "last messages:")
		for _, m := range r.MailboxTail {
			printMessage(w, m)
		}
	}
	return nil
}
