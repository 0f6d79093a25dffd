//go:build !teambus_client

package main

import (
	"time"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/demo"
	"github.com/teambus/teambus/team"
)

// agentSimCommand is `teambus agent-sim`, a hidden command: a simulated
// agent session for `teambus demo` and for trying the sidecars by hand. It
// talks to the bus like a real agent's hooks would, through the team
// service: a teammate claims tasks, works through their steps with a
// checkpoint after each, reports to the lead and completes them; the lead
// reads and acks its inbox.
func agentSimCommand() *cli.Command {
	return &cli.Command{
		Name:   "agent-sim",
		Usage:  "simulate an agent session: claim, checkpoint, report and complete tasks (used by teambus demo)",
		Hidden: true,
		Description: "A teammate waits until its sidecar registered --session, then loops: claim a task of its\n" +
			"own quantum or of none (never another specialist's), work through its steps (\"(N steps)\" in the\n" +
			"description, else --steps), skipping the steps its checkpoint lists as done, checkpoint after each,\n" +
			"send a report to the lead and complete the task. It exits 0 when the team has no open task left.\n" +
			"The lead (--role lead) waits until --session is the lead session, then reads and acks the lead\n" +
			"inbox every 500ms until it is stopped.",
		Flags: flags(connFlags(), memberFlags(), []cli.Flag{
			&cli.StringFlag{Name: "role", Usage: "teammate or lead", EnvVars: []string{"TEAMBUS_AGENT_ROLE"}, Value: "teammate"},
			&cli.DurationFlag{Name: "step-time", Usage: "how long one step of a task takes", EnvVars: []string{"TEAMBUS_STEP_TIME"}, Value: 400 * time.Millisecond},
			&cli.IntFlag{Name: "steps", Usage: "steps of a task whose description does not say \"(N steps)\"", EnvVars: []string{"TEAMBUS_AGENT_STEPS"}, Value: 4},
			&cli.DurationFlag{Name: "register-wait", Usage: "how long to wait for the sidecar to register --session", EnvVars: []string{"TEAMBUS_AGENT_REGISTER_WAIT"}, Value: 20 * time.Second},
		}),
		Action: agentSim,
	}
}

func agentSim(c *cli.Context) error {
	if err := exactArgs(c, 0); err != nil {
		return err
	}
	role := c.String("role")
	if role != "teammate" && role != "lead" {
		return usageError(c, "invalid --role %q: teammate or lead", role)
	}
	if role == "lead" && !c.IsSet("member") {
		if err := c.Set("member", teambus.Lead); err != nil {
			return err
		}
	}
	a, err := actor(c)
	if err != nil {
		return err
	}
	if _, err := sessionID(c); err != nil {
		return err
	}
	if (role == "lead") != a.IsLead() {
		return usageError(c, "--role %s does not match --member %s", role, a.Member)
	}
	cfg := demo.AgentConfig{Actor: a, Out: c.App.Writer, StepTime: c.Duration("step-time"), Steps: c.Int("steps"), RegisterWait: c.Duration("register-wait")}
	if cfg.OpTimeout, err = timeout(c); err != nil {
		return err
	}
	if cfg.StepTime < 0 || cfg.Steps < 1 || cfg.Steps > 100 || cfg.RegisterWait <= 0 {
		return usageError(c, "invalid --step-time %s, --steps %d or --register-wait %s: step time not negative, 1 to 100 steps, a positive wait", cfg.StepTime, cfg.Steps, cfg.RegisterWait)
	}
	// A long-running process: --timeout bounds the connection and each
	// request, not the run.
	conn, err := connect(c)
	if err != nil {
		return err
	}
	defer conn.Close()
	cfg.Service = team.New(conn.JS, team.Config{})
	return demo.RunAgent(c.Context, cfg)
}
