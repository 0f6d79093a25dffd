package main

import (
	"fmt"
	"log/slog"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teammate"
)

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
