//go:build !teambus_client

package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus/demo"
)

// demoCommand is `teambus demo`: the whole product in one command. It
// opens a bus node in this process, creates a team and runs the lead and
// three teammates as real processes (this binary, re-executed as sidecars
// and as simulated agents), then kills the lead with SIGKILL, lets the
// teammates go into zombie mode, attaches a new lead, kills a teammate's
// agent in the middle of a task and respawns it from its checkpoint.
func demoCommand() *cli.Command {
	return &cli.Command{
		Name:  "demo",
		Usage: "run a whole team on an embedded bus: a lead crash, a resume, a teammate crash, a respawn",
		Description: "Needs no setup: it opens a bus node in a temporary directory, creates team \"demo\" with three\n" +
			"teammates and six tasks, and runs the lead and teammate sidecars beside simulated agents as real\n" +
			"processes. It kills the lead (kill -9), waits for zombie mode, starts a new lead that takes over,\n" +
			"kills a teammate's agent mid-task (kill -9) and respawns it, which continues from the checkpoint.\n" +
			"It narrates with timings and ends with a summary. Exit 0 when every step happened; 1 otherwise,\n" +
			"with the step that failed and the logs of every process (the directory is then kept).",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "keep", Usage: "keep the temporary directory (bus store and process logs)", EnvVars: []string{"TEAMBUS_DEMO_KEEP"}},
			&cli.DurationFlag{Name: "step-time", Usage: "how long one step of a simulated task takes (250ms to 5s)", EnvVars: []string{"TEAMBUS_STEP_TIME"}, Value: 400 * time.Millisecond},
			&cli.DurationFlag{Name: "timeout", Usage: "give up after this long", EnvVars: []string{"TEAMBUS_DEMO_TIMEOUT"}, Value: 90 * time.Second},
		},
		Action: runDemo,
	}
}

func runDemo(c *cli.Context) error {
	if err := exactArgs(c, 0); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("demo: find this program to run its processes: %w", err)
	}
	cfg := demo.Config{Out: c.App.Writer, Exe: exe, Keep: c.Bool("keep"), StepTime: c.Duration("step-time"), Timeout: c.Duration("timeout")}
	if err := cfg.Validate(); err != nil {
		return usageError(c, "%s", strings.Replace(strings.Replace(err.Error(), "step time", "--step-time", 1), "invalid timeout", "invalid --timeout", 1))
	}
	return demo.Run(c.Context, cfg)
}
