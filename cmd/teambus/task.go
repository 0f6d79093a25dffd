package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// teamTasks returns the team's tasks in the order `task list` prints
// them: through the team service for a member credential.
func teamTasks(s *session, teamID string) ([]*teambus.Task, error) {
	if v, isMember, err := s.memberView(teamID); err != nil || isMember {
		if err != nil {
			return nil, err
		}
		return v.Tasks, nil
	}
	snap, err := s.svc.Snapshot(s.ctx, teamID)
	if err != nil {
		return nil, err
	}
	tasks := make([]*teambus.Task, 0, len(snap.Tasks))
	for _, id := range snap.TaskIDs() {
		tasks = append(tasks, snap.Tasks[id])
	}
	return tasks, nil
}

// taskOp runs a member's task operation through the team service.
func taskOp(s *session, a team.Actor, req teamapi.TaskRequest) (*teambus.Task, bool, error) {
	cl, err := s.member(a)
	if err != nil {
		return nil, false, err
	}
	return cl.Do(s.ctx, req)
}

// taskCommand is `teambus task`.
func taskCommand() *cli.Command {
	member := func(name, usage, args string, extra []cli.Flag, act func(*cli.Context, *session, team.Actor) (*teambus.Task, string, error)) *cli.Command {
		return &cli.Command{
			Name: name, Usage: usage, ArgsUsage: args,
			Flags:  flags(connFlags(), memberFlags(), extra, []cli.Flag{jsonFlag()}),
			Action: memberTaskAction(args, act),
		}
	}
	return &cli.Command{
		Name:  "task",
		Usage: "add, list, claim and finish tasks",
		Subcommands: []*cli.Command{
			{
				Name: "add", Usage: "add a task (pending until its dependencies are complete), or many with --from FILE", ArgsUsage: "ID",
				Flags: flags(connFlags(), []cli.Flag{teamFlag(),
					&cli.StringFlag{Name: "desc", Usage: "what the task is"},
					&cli.StringSliceFlag{Name: "dep", Usage: "a task this one depends on, repeatable"},
					&cli.IntFlag{Name: "priority", Usage: "higher runs first among equals"},
					&cli.StringFlag{Name: "quantum", Usage: "the area of work; members of the same quantum prefer it"},
					&cli.StringFlag{Name: "from", Usage: "add the tasks of this JSON Lines `FILE` (- for stdin), one {\"id\",\"desc\",\"deps\",\"priority\",\"quantum\"} a line; checked whole before anything is written"},
					jsonFlag()}),
				Action: func(c *cli.Context) error {
					if c.IsSet("from") {
						return taskImport(c)
					}
					return teamAction(1, taskAdd)(c)
				},
			},
			{
				Name: "list", Usage: "list the team's tasks", Flags: flags(connFlags(), []cli.Flag{teamFlag(),
					&cli.StringFlag{Name: "status", Usage: "only tasks with this status"}, jsonFlag()}),
				Action: teamAction(0, taskList),
			},
			{
				Name: "show", Usage: "show one task with its checkpoint", ArgsUsage: "ID",
				Flags: flags(connFlags(), []cli.Flag{teamFlag(), jsonFlag()}), Action: teamAction(1, taskShow),
			},
			member("claim", "claim a task (exactly one of concurrent claimers wins; the others exit 3)", "ID", nil,
				func(c *cli.Context, s *session, a team.Actor) (*teambus.Task, string, error) {
					t, _, err := taskOp(s, a, teamapi.TaskRequest{Op: teamapi.TaskClaim, ID: c.Args().First()})
					return t, "claimed", err
				}),
			member("next", "claim the best available task: the one that unblocks the most work, then priority, then age", "", nil,
				func(c *cli.Context, s *session, a team.Actor) (*teambus.Task, string, error) {
					t, _, err := taskOp(s, a, teamapi.TaskRequest{Op: teamapi.TaskNext})
					return t, "claimed", err
				}),
			member("complete", "complete your task; tasks waiting on it become available", "ID",
				[]cli.Flag{&cli.StringFlag{Name: "commit", Usage: "git commit sha of the work"}},
				func(c *cli.Context, s *session, a team.Actor) (*teambus.Task, string, error) {
					t, changed, err := taskOp(s, a, teamapi.TaskRequest{Op: teamapi.TaskComplete, ID: c.Args().First(), Commit: c.String("commit")})
					if !changed {
						return t, "already completed", err
					}
					return t, "completed", err
				}),
			member("fail", "record a failed attempt: back to the queue, or paused after max-attempts", "ID",
				[]cli.Flag{&cli.StringFlag{Name: "reason", Usage: "what went wrong"}},
				func(c *cli.Context, s *session, a team.Actor) (*teambus.Task, string, error) {
					t, _, err := taskOp(s, a, teamapi.TaskRequest{Op: teamapi.TaskFail, ID: c.Args().First(), Reason: c.String("reason")})
					return t, "failed", err
				}),
			member("block", "mark your task blocked on another task or a reason", "ID",
				[]cli.Flag{&cli.StringFlag{Name: "on", Usage: "the task it waits on"}, &cli.StringFlag{Name: "reason", Usage: "what it waits for"}},
				func(c *cli.Context, s *session, a team.Actor) (*teambus.Task, string, error) {
					t, _, err := taskOp(s, a, teamapi.TaskRequest{Op: teamapi.TaskBlock, ID: c.Args().First(), On: c.String("on"), Reason: c.String("reason")})
					return t, "blocked", err
				}),
			member("release", "give your task back to the queue, keeping its checkpoint", "ID", nil,
				func(c *cli.Context, s *session, a team.Actor) (*teambus.Task, string, error) {
					t, _, err := taskOp(s, a, teamapi.TaskRequest{Op: teamapi.TaskRelease, ID: c.Args().First()})
					return t, "released", err
				}),
			member("reassign", "hand a task to another member (the lead, or the task's holder)", "ID",
				[]cli.Flag{&cli.StringFlag{Name: "to", Usage: "the member to hand it to", Required: true}},
				func(c *cli.Context, s *session, a team.Actor) (*teambus.Task, string, error) {
					t, _, err := taskOp(s, a, teamapi.TaskRequest{Op: teamapi.TaskReassign, ID: c.Args().First(), To: c.String("to")})
					return t, "reassigned", err
				}),
			member("reopen", "return a finished task to the queue (lead only; refused when a dependent is complete)", "ID", nil,
				func(c *cli.Context, s *session, a team.Actor) (*teambus.Task, string, error) {
					t, _, err := taskOp(s, a, teamapi.TaskRequest{Op: teamapi.TaskReopen, ID: c.Args().First()})
					return t, "reopened", err
				}),
		},
	}
}

func memberTaskAction(args string, act func(*cli.Context, *session, team.Actor) (*teambus.Task, string, error)) cli.ActionFunc {
	return func(c *cli.Context) error {
		want := 0
		if args != "" {
			want = 1
		}
		if err := exactArgs(c, want); err != nil {
			return err
		}
		if want == 1 {
			if err := teambus.ValidateID("task", c.Args().First()); err != nil {
				return err
			}
		}
		a, err := actor(c)
		if err != nil {
			return err
		}
		s, err := open(c)
		if err != nil {
			return err
		}
		defer s.close()
		t, verb, err := act(c, s, a)
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, t)
		}
		fmt.Fprintf(c.App.Writer, "%s task %s: %s\n", verb, t.ID, taskSummary(t))
		return nil
	}
}

func taskSummary(t *teambus.Task) string {
	s := string(t.Status)
	if t.AssignedTo != "" {
		s += " by " + t.AssignedTo
	}
	if t.Status == teambus.TaskPaused && t.LastError != "" {
		s += " (" + t.LastError + ")"
	}
	return s
}

func taskAdd(c *cli.Context, teamID string) error {
	var deps []string
	for _, d := range c.StringSlice("dep") {
		for _, p := range strings.Split(d, ",") {
			if p = strings.TrimSpace(p); p != "" {
				deps = append(deps, p)
			}
		}
	}
	spec := team.TaskSpec{ID: c.Args().First(), Description: c.String("desc"), Deps: deps, Priority: c.Int("priority"), Quantum: c.String("quantum")}
	if err := teambus.ValidateID("task", spec.ID); err != nil {
		return err
	}
	return withSession(c, func(s *session) error {
		res, err := s.lead(teamID, "").Task(s.ctx, teamapi.TaskRequest{Actor: team.Actor{Team: teamID, Member: teambus.Lead}, Op: teamapi.TaskAdd,
			ID: spec.ID, Description: spec.Description, Deps: spec.Deps, Priority: spec.Priority, Quantum: spec.Quantum})
		t := res.Task
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, t)
		}
		fmt.Fprintf(c.App.Writer, "added task %s (%s)\n", t.ID, t.Status)
		return nil
	})
}

func taskList(c *cli.Context, teamID string) error {
	status := c.String("status")
	if status != "" {
		ok := false
		for _, st := range teambus.TaskStatuses {
			ok = ok || string(st) == status
		}
		if !ok {
			return teambus.Invalidf("invalid --status %q: one of pending, available, in_progress, blocked, complete, failed, paused, skipped", status)
		}
	}
	return withSession(c, func(s *session) error {
		all, err := teamTasks(s, teamID)
		if err != nil {
			return err
		}
		var tasks []*teambus.Task
		for _, t := range all {
			if status == "" || string(t.Status) == status {
				tasks = append(tasks, t)
			}
		}
		if c.Bool("json") {
			jl := newJSONLines(c.App.Writer)
			for _, t := range tasks {
				if err := jl.Write(t); err != nil {
					return err
				}
			}
			return nil
		}
		if len(tasks) == 0 {
			fmt.Fprintf(c.App.Writer, "no tasks in team %s: add one with `teambus task add ID --team %s`\n", teamID, teamID)
			return nil
		}
		return printTasks(c.App.Writer, tasks)
	})
}

func taskShow(c *cli.Context, teamID string) error {
	id := c.Args().First()
	if err := teambus.ValidateID("task", id); err != nil {
		return err
	}
	return withSession(c, func(s *session) error {
		var t *teambus.Task
		if v, isMember, err := s.memberView(teamID); err != nil {
			return err
		} else if isMember {
			for _, tk := range v.Tasks {
				if tk.ID == id {
					t = tk
				}
			}
			if t == nil {
				return teambus.NotFoundf("task %s not found in team %s: see `teambus task list`", id, teamID)
			}
		} else if t, err = s.svc.Task(s.ctx, teamID, id); err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, t)
		}
		w := c.App.Writer
		fmt.Fprintf(w, "task %s: %s\n", t.ID, taskSummary(t))
		fmt.Fprintf(w, "description: %s\n", textBody(dash(t.Description)))
		fmt.Fprintf(w, "priority %d, attempts %d, failures %d, crashes %d\n", t.Priority, t.Attempts, t.Failures, t.Crashes)
		if len(t.Dependencies) > 0 {
			fmt.Fprintf(w, "depends on: %s\n", strings.Join(t.Dependencies, ", "))
		}
		if t.Status == teambus.TaskBlocked {
			fmt.Fprintf(w, "blocked on: %s %s\n", dash(t.BlockedOn), textBody(t.BlockedReason))
		}
		if t.LastError != "" {
			fmt.Fprintf(w, "last error: %s\n", textBody(t.LastError))
		}
		if cp := t.Checkpoint; cp != nil {
			fmt.Fprintf(w, "checkpoint #%s by %s (epoch %d) at %s\n", strconv.FormatInt(cp.Seq, 10), cp.Member, cp.Epoch, formatTime(cp.At))
			fmt.Fprintf(w, "  done: %s\n  remaining: %s\n  last action: %s\n  files: %s\n",
				teambus.SanitizeLine(dash(strings.Join(cp.TasksCompleted, "; "))), teambus.SanitizeLine(dash(strings.Join(cp.TasksRemaining, "; "))), textBody(dash(cp.LastAction)), teambus.SanitizeLine(dash(strings.Join(cp.Files, ", "))))
			if len(cp.Data) > 0 {
				fmt.Fprintf(w, "  data: %s\n", textBody(string(cp.Data)))
			}
		}
		return nil
	})
}
