package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

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
					return s.lead(id, sess).Resume(s.ctx, teamapi.ResumeRequest{Actor: team.Actor{Team: id, Member: teambus.Lead, Session: sess}, Force: c.Bool("force")})
				})
			},
		},
		{
			Name: "probe", Usage: "check whether a new lead session can resume a team now, and if not why and when (read-only)", ArgsUsage: "TEAM",
			Flags: flags(connFlags(), []cli.Flag{jsonFlag()}),
			Action: func(c *cli.Context) error {
				return teamReport(c, func(s *session, id string) (*team.Report, error) {
					return s.lead(id, "").Probe(s.ctx, teamapi.ProbeRequest{Actor: team.Actor{Team: id, Member: teambus.Lead}})
				})
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
