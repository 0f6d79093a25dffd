package main

import (
	"fmt"
	"log/slog"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus/lead"
	"github.com/teambus/teambus/team"
)

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
