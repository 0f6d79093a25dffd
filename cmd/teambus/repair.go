package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/kv"
)

// teamRepairCommand is `teambus team repair`.
func teamRepairCommand() *cli.Command {
	return &cli.Command{
		Name:      "repair",
		Usage:     "repair the damaged records of a team's state (operator): shows the plan; --apply restores each from its history, or deletes it",
		ArgsUsage: "TEAM",
		Description: "A record of the team's state that does not decode is left out of every command (`team show` lists it).\n" +
			"repair puts it back to the newest earlier revision of its key that decodes, or deletes it when there is\n" +
			"none, each with compare-and-set on the damaged revision, and logs state.repaired in the team's event log.\n" +
			"Without --apply it only shows what it would do. Running it again once nothing is damaged does nothing.",
		Flags: flags(connFlags(), []cli.Flag{
			&cli.BoolFlag{Name: "apply", Usage: "carry the repair out (default: show the plan only)", EnvVars: []string{"TEAMBUS_APPLY"}},
			jsonFlag(),
		}),
		Action: teamArgAction(teamRepair),
	}
}

// repairReport is `team repair --json`.
type repairReport struct {
	Team    string          `json:"team"`
	Applied bool            `json:"applied"`
	Steps   []kv.RepairStep `json:"steps"`
}

func teamRepair(c *cli.Context, s *session, id string) error {
	apply := c.Bool("apply")
	steps, err := s.svc.Repair(s.ctx, id, apply)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		if err := printJSON(c.App.Writer, repairReport{Team: id, Applied: apply, Steps: steps}); err != nil {
			return err
		}
	} else {
		printRepair(c.App.Writer, id, apply, steps)
	}
	for _, st := range steps {
		if st.Action == kv.RepairRefuse {
			return teambus.Statef("the record of team %s has no earlier revision that decodes, and repair does not delete a team: export what you need and delete the team with `teambus team delete %s`", id, id)
		}
	}
	return nil
}

func printRepair(w io.Writer, teamID string, apply bool, steps []kv.RepairStep) {
	if len(steps) == 0 {
		fmt.Fprintf(w, "team %s: no damaged records, nothing to do\n", teamID)
		return
	}
	fmt.Fprintf(w, "team %s: %d damaged record(s)\n", teamID, len(steps))
	written := 0
	for _, st := range steps {
		what := fmt.Sprintf("%s (revision %d: %s)", teambus.OneLine(st.Key, 80), st.Revision, teambus.OneLine(st.Reason, 200))
		var do string
		switch {
		case st.Action == kv.RepairNone:
			do = "decodes by now or is gone, nothing to do"
		case st.Action == kv.RepairRefuse:
			do = "no earlier revision decodes; left as it is"
		case st.Action == kv.RepairRestore && st.Applied:
			do = fmt.Sprintf("restored revision %d as revision %d", st.From, st.NewRevision)
		case st.Action == kv.RepairRestore:
			do = fmt.Sprintf("would restore revision %d", st.From)
		case st.Applied:
			do = "deleted: no earlier revision decodes"
		default:
			do = "would delete: no earlier revision decodes"
		}
		if st.Applied {
			written++
		}
		fmt.Fprintf(w, "  %s: %s\n", what, do)
	}
	switch {
	case !apply:
		fmt.Fprintf(w, "dry run, nothing changed: apply with `teambus team repair %s --apply`\n", teamID)
	case written > 0:
		fmt.Fprintf(w, "repaired %d record(s); logged as %s in the team's event log\n", written, eventlog.EvStateRepaired)
	}
}
