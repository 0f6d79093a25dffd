package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/teambus/teambus/node/credstore"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/spawn"
	"github.com/teambus/teambus/team"
)

// teamCommand is `teambus team`.
func teamCommand() *cli.Command {
	return &cli.Command{
		Name:  "team",
		Usage: "create, list, show and manage teams",
		Subcommands: append([]*cli.Command{
			teamCreateCommand(),
			teamListCommand(),
			teamShowCommand(),
			teamAddMemberCommand(),
			teamCredsCommand(),
			teamCheckpointCommand(),
			teamSetCommand(),
			teamDeleteCommand(),
			teamRepairCommand(),
		}, resumeCommands()...),
	}
}

func teamCreateCommand() *cli.Command {
	return &cli.Command{
		Name:      "create",
		Usage:     "create a team with its members and policy",
		ArgsUsage: "TEAM",
		Flags: flags(connFlags(), []cli.Flag{
			&cli.StringFlag{Name: "lead-session", Usage: "session id of the lead (default: the first teambus lead that attaches)", EnvVars: []string{"TEAMBUS_LEAD_SESSION"}},
			&cli.StringSliceFlag{Name: "member", Usage: "a member as ID[:ROLE[:QUANTUM]], repeatable"},
			&cli.StringFlag{Name: "max-body", Usage: "largest message body (e.g. 256KiB)", Value: "256KiB", EnvVars: []string{"TEAMBUS_MAX_BODY"}},
			&cli.StringFlag{Name: "mailbox-max-bytes", Usage: "size limit of the team's mailbox; a full mailbox refuses new mail, it never drops old mail; reserved on the bus's --max-store", Value: "32MiB", EnvVars: []string{"TEAMBUS_MAILBOX_MAX_BYTES"}},
			&cli.StringFlag{Name: "dedupe-window", Usage: "how long a message id is remembered for idempotent sends", Value: "10m", EnvVars: []string{"TEAMBUS_DEDUPE_WINDOW"}},
			&cli.StringFlag{Name: "events-max-bytes", Usage: "size limit of the team's event log; a full log refuses new events, it never drops old ones; reserved on the bus's --max-store", Value: "16MiB", EnvVars: []string{"TEAMBUS_EVENTS_MAX_BYTES"}},
			&cli.IntFlag{Name: "replicas", Usage: "copies of the team's streams and buckets (default: 3 on a cluster of 3 nodes or more, else 1)", EnvVars: []string{"TEAMBUS_REPLICAS"}},
			jsonFlag(),
		}, policyFlags()),
		Action: teamCreate,
	}
}

func teamCreate(c *cli.Context) error {
	id, err := teamArg(c)
	if err != nil {
		return err
	}
	pol, err := policyFromFlags(c)
	if err != nil {
		return err
	}
	var specs []team.MemberSpec
	for _, v := range c.StringSlice("member") {
		for _, part := range strings.Split(v, ",") {
			if part = strings.TrimSpace(part); part == "" {
				continue
			}
			spec, err := team.ParseMemberSpec(part)
			if err != nil {
				return err
			}
			specs = append(specs, spec)
		}
	}
	var mbc mailbox.MailboxConfig
	maxBody, err := parseSize("--max-body", c.String("max-body"))
	if err != nil {
		return err
	}
	if maxBody < 1 || maxBody > 8<<20 {
		return teambus.Invalidf("invalid --max-body %s: 1 byte to 8MiB", c.String("max-body"))
	}
	if mbc.MaxBytes, err = parseSize("--mailbox-max-bytes", c.String("mailbox-max-bytes")); err != nil {
		return err
	}
	if mbc.MaxBytes < 1<<20 {
		return teambus.Invalidf("invalid --mailbox-max-bytes %s: at least 1MiB", c.String("mailbox-max-bytes"))
	}
	if mbc.Duplicates, err = teambus.ParseDuration("--dedupe-window", c.String("dedupe-window")); err != nil {
		return err
	}
	if mbc.Duplicates < time.Second {
		return teambus.Invalidf("invalid --dedupe-window %s: at least 1s", c.String("dedupe-window"))
	}
	mbc.MaxBody = int(maxBody)
	evc := eventlog.EventsConfig{Duplicates: mbc.Duplicates}
	if evc.MaxBytes, err = parseSize("--events-max-bytes", c.String("events-max-bytes")); err != nil {
		return err
	}
	if evc.MaxBytes < 1<<20 {
		return teambus.Invalidf("invalid --events-max-bytes %s: at least 1MiB", c.String("events-max-bytes"))
	}
	replicas := c.Int("replicas")
	if replicas < 0 || replicas > 5 {
		return teambus.Invalidf("invalid --replicas %d: 1 to 5 (0 derives it from the cluster)", replicas)
	}
	return withSession(c, func(s *session) error {
		if replicas == 0 {
			replicas = s.conn.Replicas()
		}
		mbc.Replicas = replicas
		evc.Replicas = replicas
		s.svc = team.New(s.conn.JS, team.Config{Mailbox: mbc, KV: kv.Config{Replicas: replicas}, Events: evc})
		t, err := s.svc.CreateTeam(s.ctx, id, c.String("lead-session"), specs, pol)
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, t)
		}
		var ids []string
		for _, m := range specs {
			ids = append(ids, m.ID)
		}
		fmt.Fprintf(c.App.Writer, "created team %s (%s) with %d member(s): %s\n", t.ID, t.Status, len(specs), strings.Join(ids, ", "))
		return nil
	})
}

func teamAddMemberCommand() *cli.Command {
	return &cli.Command{
		Name:      "add-member",
		Usage:     "add a member to a team",
		ArgsUsage: "TEAM ID[:ROLE[:QUANTUM]]",
		Flags:     connFlags(),
		Action: func(c *cli.Context) error {
			if err := exactArgs(c, 2); err != nil {
				return err
			}
			id := c.Args().Get(0)
			if err := teambus.ValidateID("team", id); err != nil {
				return err
			}
			spec, err := team.ParseMemberSpec(c.Args().Get(1))
			if err != nil {
				return err
			}
			return withSession(c, func(s *session) error {
				if _, err := s.svc.AddMember(s.ctx, id, spec); err != nil {
					return err
				}
				fmt.Fprintf(c.App.Writer, "added member %s to team %s\n", spec.ID, id)
				return nil
			})
		},
	}
}

func teamListCommand() *cli.Command {
	return &cli.Command{
		Name:   "list",
		Usage:  "list teams",
		Flags:  flags(connFlags(), []cli.Flag{jsonFlag()}),
		Action: teamList,
	}
}

type teamLine struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Members  int    `json:"members"`
	Tasks    int    `json:"tasks"`
	Progress int    `json:"progress"`
	Lead     string `json:"lead_session"`
	Created  string `json:"created_at"`
}

func teamList(c *cli.Context) error {
	if err := exactArgs(c, 0); err != nil {
		return err
	}
	return withSession(c, func(s *session) error {
		ids, err := s.svc.ListTeams(s.ctx)
		if err != nil {
			return err
		}
		// A shared bus may hold a thousand teams: read them 32 at a time
		// (one at a time, 1,000 teams took 2.4 s; 8 at a time 1.3-1.7 s,
		// 32 at a time 0.9-1.0 s on the same node), in the order listed.
		found := make([]*teamLine, len(ids))
		var wg sync.WaitGroup
		sem := make(chan struct{}, 32)
		for i, id := range ids {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				snap, err := s.svc.Snapshot(s.ctx, id)
				if errors.Is(err, kv.ErrDamaged) {
					found[i] = &teamLine{ID: id, Status: "damaged"} // `team repair` fixes it
					return
				}
				if err != nil {
					return // a team being created
				}
				found[i] = &teamLine{ID: id, Status: string(snap.Team.Status), Members: len(snap.Members),
					Tasks: len(snap.Tasks), Progress: teambus.Progress(snap.Tasks), Lead: snap.Team.LeadSession, Created: formatTime(snap.Team.CreatedAt)}
			}()
		}
		wg.Wait()
		var lines []teamLine
		for _, l := range found {
			if l != nil {
				lines = append(lines, *l)
			}
		}
		if c.Bool("json") {
			jl := newJSONLines(c.App.Writer)
			for _, l := range lines {
				if err := jl.Write(l); err != nil {
					return err
				}
			}
			return nil
		}
		if len(lines) == 0 {
			fmt.Fprintln(c.App.Writer, "no teams: create one with `teambus team create TEAM --member tm1`")
			return nil
		}
		tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TEAM\tSTATUS\tMEMBERS\tTASKS\tDONE\tCREATED")
		for _, l := range lines {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d%%\t%s\n", l.ID, l.Status, l.Members, l.Tasks, l.Progress, l.Created)
		}
		return tw.Flush()
	})
}

func teamShowCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "show a team: status, policy, members with liveness, tasks",
		ArgsUsage: "TEAM",
		Flags:     flags(connFlags(), []cli.Flag{jsonFlag()}),
		Action:    teamArgAction(teamShow),
	}
}

func teamShow(c *cli.Context, s *session, id string) error {
	v, isMember, err := s.memberView(id)
	if err != nil {
		return err
	}
	if !isMember {
		if v, err = s.svc.Show(s.ctx, id); err != nil {
			return err
		}
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, v)
	}
	if err := printView(c.App.Writer, v); err != nil {
		return err
	}
	if s.conn != nil {
		printMemberHosts(s.ctx, s.conn.JS, id, c.App.Writer)
	}
	return nil
}

func printView(w io.Writer, v *team.View) error {
	t := v.Team
	fmt.Fprintf(w, "team %s: %s, created %s\n", t.ID, t.Status, formatTime(t.CreatedAt))
	lead := "none attached"
	if t.LeadSession != "" {
		state := "offline"
		switch {
		case v.Lead.Online:
			state = "online"
		case v.Lead.ReleasedAt != nil:
			state = fmt.Sprintf("released the team at %s (%s)", formatTime(*v.Lead.ReleasedAt), teambus.ReleaseWords(v.Lead.Released))
		}
		if !v.Lead.Online && v.Lead.LastHeartbeat != nil {
			state += ", last seen " + formatTime(*v.Lead.LastHeartbeat)
		}
		lead = fmt.Sprintf("session %s, epoch %d, %s", t.LeadSession, t.LeadEpoch, state)
	}
	fmt.Fprintf(w, "lead: %s\n", lead)
	if t.LeadTimeoutDetectedAt != nil {
		fmt.Fprintf(w, "lead timeout detected at %s\n", formatTime(*t.LeadTimeoutDetectedAt))
	}
	fmt.Fprintf(w, "policy: %s\n", t.Policy)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nMEMBER\tROLE\tSTATUS\tEPOCH\tTASK\tCRASHES\tHEARTBEAT\tACTIVITY")
	for _, m := range v.Members {
		task := "-"
		if m.Task != nil {
			task = *m.Task
		}
		hb, act := "-", "-"
		if m.LastHeartbeat != nil {
			hb = formatTime(*m.LastHeartbeat)
		}
		if m.LastActivity != nil {
			act = formatTime(*m.LastActivity)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\n", m.ID, dash(m.Role), m.Status, m.Epoch, task, m.CrashCount, hb, act)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := printTasks(w, v.Tasks); err != nil {
		return err
	}
	return printDamaged(w, t.ID, v.Damaged)
}

// printDamaged lists the records of the team's state that do not decode.
func printDamaged(w io.Writer, teamID string, damaged []kv.DamagedRecord) error {
	if len(damaged) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\n%d damaged record(s), left out above: see `teambus team repair %s`\n", len(damaged), teamID)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tREVISION\tREASON")
	for _, d := range damaged {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", teambus.OneLine(d.Key, 80), d.Revision, teambus.OneLine(d.Reason, 200))
	}
	return tw.Flush()
}

func printTasks(w io.Writer, tasks []*teambus.Task) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nTASK\tSTATUS\tASSIGNED\tPRIO\tDEPS\tATTEMPTS\tFAILURES\tDESCRIPTION")
	for _, t := range tasks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%d\t%s\n", t.ID, t.Status, dash(t.AssignedTo), t.Priority,
			dash(strings.Join(t.Dependencies, ",")), t.Attempts, t.Failures, teambus.OneLine(t.Description, 60))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func teamDeleteCommand() *cli.Command {
	return &cli.Command{
		Name:      "delete",
		Usage:     "delete a team for good (operator): its mailbox and event streams, state and heartbeat buckets and member credentials; refused while its sidecars live unless --force",
		ArgsUsage: "TEAM",
		Description: "Frees everything the team holds on the bus, which `team complete` and `team abort` keep for review.\n" +
			"Export it first if you want a record: `teambus team checkpoint TEAM --export DIR`. Repeating a delete\n" +
			"that was cut short finishes it.",
		Flags: flags(connFlags(), []cli.Flag{
			&cli.BoolFlag{Name: "force", Usage: "delete even while sidecars of the team heartbeat", EnvVars: []string{"TEAMBUS_FORCE"}},
		}),
		Action: teamArgAction(teamDelete),
	}
}

func teamDelete(c *cli.Context, s *session, id string) error {
	ids, err := s.svc.ListTeams(s.ctx)
	if err != nil {
		return err
	}
	known := false
	for _, t := range ids {
		known = known || t == id
	}
	if !known {
		if _, err := s.conn.JS.Stream(s.ctx, mailbox.MailboxPrefix+id); err != nil {
			return teambus.NotFoundf("team %s not found: use `teambus team list`", id)
		}
	}
	// The members whose credentials go with the team; a team whose state
	// can not be read loses at least the lead's.
	who := []string{teambus.Lead}
	if snap, err := s.svc.Snapshot(s.ctx, id); err == nil {
		who = append(who, snap.MemberIDs()...)
	}
	if err := s.svc.DeleteTeam(s.ctx, id, c.Bool("force")); err != nil {
		return err
	}
	if reg, err := spawn.OpenExisting(s.ctx, s.conn.JS); err != nil {
		return err
	} else if reg != nil {
		if err := reg.DeleteTeam(s.ctx, id); err != nil { // what teambus spawn recorded for its members
			return err
		}
	}
	for _, m := range who {
		if err := credstore.RevokeCreds(s.ctx, s.conn, id, m); err != nil {
			return err
		}
	}
	fmt.Fprintf(c.App.Writer, "deleted team %s: mailbox, event log, state and heartbeats, and the credentials of %d member(s) (lead included)\n", id, len(who))
	return nil
}
