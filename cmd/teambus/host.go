package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/spawn"
	"github.com/teambus/teambus/team"
)

// hostCommand is `teambus host`: serve spawns on this machine.
func hostCommand() *cli.Command {
	return &cli.Command{
		Name:  "host",
		Usage: "run members' sessions on this machine: spawns addressed to it (teambus spawn --on NAME) and automatic respawns (foreground)",
		Description: "Registers this machine with the bus under --name (a key renewed every --ttl/3 that expires\n" +
			"--ttl after the host dies: the other hosts then log host.lost and judge its members crashed),\n" +
			"answers `teambus spawn --on NAME`, and restarts the crashed members of teams whose policy is\n" +
			"respawn=auto: a member on its own host, or on any host when its own is gone. The sessions it\n" +
			"starts inherit its environment (HOME, the model's API key, the bus credentials) and keep running\n" +
			"if the host stops. `teambus bus status` lists the hosts alive.",
		Flags: flags(connFlags(), logFlags(), []cli.Flag{
			&cli.StringFlag{Name: "name", Usage: "host `NAME` (letters, digits, _ and -; default: the machine's host name)", EnvVars: []string{"TEAMBUS_HOST"}},
			&cli.IntFlag{Name: "max", Usage: "most headless sessions run at once (0: no limit)", EnvVars: []string{"TEAMBUS_HOST_MAX"}},
			&cli.DurationFlag{Name: "ttl", Usage: "a host silent for this long is lost", Value: 10 * time.Second, EnvVars: []string{"TEAMBUS_HOST_TTL"}},
			&cli.StringSliceFlag{Name: "team", Usage: "serve only this team (repeatable; default: every team)"},
			claudeFlag(),
		}),
		Action: runHost,
	}
}

// defaultHostName is the machine's host name made a valid id.
func defaultHostName() string {
	var b strings.Builder
	for _, r := range spawn.Machine() {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteRune('-')
		}
	}
	s := strings.Trim(b.String(), "-_")
	if len(s) > 64 {
		s = s[:64]
	}
	if s == "" {
		s = "host"
	}
	return s
}

func runHost(c *cli.Context) error {
	if err := exactArgs(c, 0); err != nil {
		return err
	}
	name := c.String("name")
	if name == "" {
		name = defaultHostName()
	}
	if err := spawn.ValidateHost(name); err != nil {
		return err
	}
	l, err := launcher(c)
	if err != nil {
		return err
	}
	log, conn, err := logConn(c)
	if err != nil {
		return err
	}
	defer conn.Close()
	l.Log = log
	reg, err := spawn.Open(c.Context, conn.JS)
	if err != nil {
		return err
	}
	svc := team.New(conn.JS, team.Config{Logger: log})
	sp := &spawn.Spawner{Reg: reg, Svc: svc, Launcher: l, Transcripts: spawn.BusTranscripts{Svc: svc}, Host: name, Log: log}
	h, err := spawn.NewHost(spawn.HostConfig{Name: name, Max: c.Int("max"), TTL: c.Duration("ttl"), Teams: c.StringSlice("team"), Spawner: sp, NC: conn.NC, Log: log})
	if err != nil {
		return err
	}
	return h.Run(c.Context)
}

// hostLines describes the hosts alive, one line each (none when no host
// ever ran on this bus).
func hostLines(ctx context.Context, js jetstream.JetStream) ([]string, error) {
	reg, err := spawn.OpenExisting(ctx, js)
	if err != nil || reg == nil {
		return nil, err
	}
	hosts, err := reg.Hosts(ctx)
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, h := range sortedHosts(hosts) {
		teams := "every team"
		if len(h.Teams) > 0 {
			teams = strings.Join(h.Teams, ",")
		}
		limit := "no limit"
		if h.Max > 0 {
			limit = fmt.Sprintf("max %d", h.Max)
		}
		lines = append(lines, fmt.Sprintf("host %s: machine %s, pid %d, %d running (%s), serves %s, up since %s\n", h.Name, h.Machine, h.PID, h.Running, limit, teams, formatTime(h.Started)))
	}
	return lines, nil
}

// printHosts appends the hosts alive to `bus status`.
func printHosts(ctx context.Context, js jetstream.JetStream, w io.Writer) {
	lines, err := hostLines(ctx, js)
	switch {
	case err != nil:
		fmt.Fprintf(w, "hosts: unknown (%s)\n", teambus.OneLine(err.Error(), 200))
	case len(lines) == 0:
		fmt.Fprintln(w, "hosts: none (teambus host starts one)")
	default:
		fmt.Fprint(w, strings.Join(lines, ""))
	}
}

// printMemberHosts appends where each spawned member runs to `team show`.
func printMemberHosts(ctx context.Context, js jetstream.JetStream, teamID string, w io.Writer) {
	reg, err := spawn.OpenExisting(ctx, js)
	if err != nil || reg == nil {
		return
	}
	recs, err := reg.Records(ctx, teamID)
	if err != nil || len(recs) == 0 {
		return
	}
	hosts, _ := reg.Hosts(ctx)
	members := make([]string, 0, len(recs))
	for m := range recs {
		members = append(members, m)
	}
	sort.Strings(members)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nMEMBER\tHOST\tMACHINE\tMODE\tPID\tSTARTS\tRESPAWNS\tLAST START")
	for _, m := range members {
		r := recs[m]
		host := "(a spawn command)"
		if r.Host != "" {
			host = r.Host
			if _, ok := hosts[r.Host]; !ok {
				host += " (lost)"
			}
		}
		from := map[string]string{spawn.FromPrompt: "fresh", spawn.FromTranscript: "respawned from transcript", spawn.FromBrief: "respawned from brief"}[r.From]
		if r.From == spawn.FromTranscript && r.Respawns == 0 {
			from = "resumed from transcript"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s %s\n", m, host, r.Machine, r.Spec.Mode, r.PID, r.Starts, r.Respawns, formatTime(r.StartedAt), from)
	}
	_ = tw.Flush()
}

func sortedHosts(m map[string]spawn.HostInfo) []spawn.HostInfo {
	out := make([]spawn.HostInfo, 0, len(m))
	for _, h := range m {
		out = append(out, h)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Name < out[j-1].Name; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
