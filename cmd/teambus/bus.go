//go:build !teambus_client

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/node"
)

// busCommand is `teambus bus`: run, inspect and stop the embedded node.
func busCommand() *cli.Command {
	return &cli.Command{
		Name:  "bus",
		Usage: "run, inspect and stop the embedded NATS JetStream node",
		Subcommands: []*cli.Command{
			busStartCommand(),
			busStatusCommand(),
			busStopCommand(),
			busScrubCommand(),
		},
	}
}

// nodeGCPercent is the GC target of `bus start` (see busStart).
const nodeGCPercent = 50

// busStartCommand is `teambus bus start`, in the foreground until SIGINT
// or SIGTERM.
func busStartCommand() *cli.Command {
	return &cli.Command{
		Name:  "start",
		Usage: "run a bus node in the foreground (until interrupted)",
		Description: "Starts an embedded NATS server with JetStream storing into --dir, writes the\n" +
			"discovery file (URL and auth token, mode 0600) that other commands read, and serves\n" +
			"until SIGINT or SIGTERM (or `teambus bus stop`). The node listens on loopback only\n" +
			"and requires its token unless --allow-remote is given.",
		Flags: flags([]cli.Flag{
			dirFlag(),
			&cli.StringFlag{Name: "listen", Usage: "client address host:port (port 0 picks a free port)", EnvVars: []string{"TEAMBUS_LISTEN"}, Value: node.DefaultListen},
			&cli.BoolFlag{Name: "allow-remote", Usage: "allow non-loopback --listen and --cluster-listen: anyone who reaches the port and has the token can read and write every team", EnvVars: []string{"TEAMBUS_ALLOW_REMOTE"}},
			&cli.StringFlag{Name: "http", Usage: "monitoring address host:port, loopback only (default: off)", EnvVars: []string{"TEAMBUS_HTTP"}},
			&cli.StringFlag{Name: "sync", Usage: "always: fsync before acknowledging; interval: fsync every --sync-interval (survives kill -9, not power loss)", EnvVars: []string{"TEAMBUS_SYNC"}, Value: bus.SyncModeAlways},
			&cli.DurationFlag{Name: "sync-interval", Usage: "fsync interval with --sync interval", EnvVars: []string{"TEAMBUS_SYNC_INTERVAL"}, Value: node.DefaultSyncInterval},
			&cli.StringFlag{Name: "max-store", Usage: "disk limit of the store, e.g. 10GiB, 512MiB", EnvVars: []string{"TEAMBUS_MAX_STORE"}, Value: "64GiB"},
			&cli.StringFlag{Name: "max-memory", Usage: "memory limit of memory streams, e.g. 256MiB", EnvVars: []string{"TEAMBUS_MAX_MEMORY"}, Value: "256MiB"},
			&cli.IntFlag{Name: "member-max-connections", Usage: "connections one member credential may hold at once; past it a connect is refused", EnvVars: []string{"TEAMBUS_MEMBER_MAX_CONNECTIONS"}, Value: node.MemberMaxConns},
			&cli.StringFlag{Name: "token", Usage: "auth token clients must present (default: kept in the node directory, generated the first time)", EnvVars: []string{"TEAMBUS_TOKEN"}},
			&cli.StringFlag{Name: "name", Usage: "server name, distinct per node of a cluster (default: host name and a hash of --dir)", EnvVars: []string{"TEAMBUS_NODE_NAME"}},
			&cli.StringFlag{Name: "cluster-name", Usage: "cluster name (default: teambus when --cluster-listen is set)", EnvVars: []string{"TEAMBUS_CLUSTER_NAME"}},
			&cli.StringFlag{Name: "cluster-listen", Usage: "route address host:port for other nodes (default: no cluster)", EnvVars: []string{"TEAMBUS_CLUSTER_LISTEN"}},
			&cli.StringSliceFlag{Name: "routes", Usage: "route URLs of the other nodes, nats://host:port, repeatable or comma separated; every node needs the same --token", EnvVars: []string{"TEAMBUS_ROUTES"}},
		}, logFlags()),
		Action: busStart,
	}
}

func busStart(c *cli.Context) error {
	if err := exactArgs(c, 0); err != nil {
		return err
	}
	if os.Getenv("GOGC") == "" {
		// A node's heap is mostly long-lived per-team state: collecting
		// at 50% growth instead of 100% keeps an idle team at ~0.4 MiB
		// instead of ~0.6 (1,000 teams, bench memory row). GOGC set in
		// the environment wins.
		debug.SetGCPercent(nodeGCPercent)
	}
	dir, err := stateDir(c)
	if err != nil {
		return err
	}
	maxStore, err := parseSize("--max-store", c.String("max-store"))
	if err != nil {
		return err
	}
	maxMemory, err := parseSize("--max-memory", c.String("max-memory"))
	if err != nil {
		return err
	}
	if n := c.Int("member-max-connections"); n < 1 {
		return teambus.Invalidf("invalid --member-max-connections %d: at least 1", n)
	}
	log, err := newLogger(c)
	if err != nil {
		return err
	}
	cfg := node.NodeConfig{
		Dir:           dir,
		Name:          c.String("name"),
		Listen:        c.String("listen"),
		AllowRemote:   c.Bool("allow-remote"),
		HTTP:          c.String("http"),
		Sync:          c.String("sync"),
		SyncInterval:  c.Duration("sync-interval"),
		MaxStore:      maxStore,
		MaxMemory:     maxMemory,
		Token:         c.String("token"),
		Logger:        log,
		Debug:         c.String("log-level") == "debug",
		ClusterName:   c.String("cluster-name"),
		ClusterListen: c.String("cluster-listen"),
		Routes:        splitList(c.StringSlice("routes")),
	}
	cfg.MemberMaxConns = c.Int("member-max-connections")
	if err := cfg.Validate(); err != nil {
		return allowRemoteHint(err)
	}
	// The node hosts the team service: members reach their team only
	// through it.
	cfg.Attach = node.Attach(node.Config{Logger: log})
	return allowRemoteHint(node.Run(c.Context, cfg))
}

// allowRemoteHint names the flag that allows a non-loopback address on
// the node's refusal of one.
func allowRemoteHint(err error) error {
	if errors.Is(err, node.ErrNotLoopback) {
		return fmt.Errorf("%w: pass --allow-remote (or set TEAMBUS_ALLOW_REMOTE=1) to allow them; anyone who reaches the port and has the token can then read and write every team", err)
	}
	return err
}

// busStatusCommand is `teambus bus status`.
func busStatusCommand() *cli.Command {
	return &cli.Command{
		Name:   "status",
		Usage:  "show the bus: server, sync mode, JetStream usage, teams and streams",
		Flags:  flags(connFlags(), []cli.Flag{jsonFlag()}),
		Action: busStatus,
	}
}

func busStatus(c *cli.Context) error {
	if err := exactArgs(c, 0); err != nil {
		return err
	}
	ctx, cancel, err := withTimeout(c)
	if err != nil {
		return err
	}
	defer cancel()
	cfg, err := connConfig(c)
	if err != nil {
		return err
	}
	var disc *bus.Discovery
	if cfg.Server == "" {
		if disc, err = bus.ReadDiscovery(cfg.Dir); err != nil {
			return err
		}
	}
	conn, err := bus.Connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	st, err := bus.Status(ctx, conn, disc)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, st)
	}
	if err := printStatus(c.App.Writer, st); err != nil {
		return err
	}
	printHosts(ctx, conn.JS, c.App.Writer)
	return nil
}

// printStatus writes the text form of bus status.
func printStatus(w io.Writer, st *bus.StatusInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	nd := st.URL
	if st.PID > 0 {
		nd += fmt.Sprintf(" (pid %d)", st.PID)
	}
	fmt.Fprintf(tw, "bus\t%s\n", nd)
	fmt.Fprintf(tw, "server\t%s %s\n", st.ServerName, st.Version)
	if st.Cluster != "" {
		fmt.Fprintf(tw, "cluster\t%s\n", st.Cluster)
	}
	if st.StartedAt != nil {
		fmt.Fprintf(tw, "started\t%s\n", formatTime(*st.StartedAt))
	}
	sync := st.Sync
	switch {
	case sync == "":
		sync = "unknown (external NATS)"
	case st.SyncAlways:
		sync += " (fsync before ack)"
	}
	fmt.Fprintf(tw, "sync\t%s\n", sync)
	if st.StoreDir != "" {
		fmt.Fprintf(tw, "store\t%s\n", st.StoreDir)
	}
	js := st.JetStream
	fmt.Fprintf(tw, "jetstream\t%d streams, %d consumers, store %s, memory %s\n",
		js.Streams, js.Consumers, formatSize(int64(js.StoreUsed)), formatSize(int64(js.MemoryUsed)))
	teams := "none"
	switch n := len(st.Teams); {
	case n > 20:
		// A shared bus may hold a thousand teams: the first few and a count
		// (`team list` has them all).
		teams = fmt.Sprintf("%d: %s, … (`teambus team list` for all)", n, strings.Join(st.Teams[:20], ", "))
	case n > 0:
		teams = strings.Join(st.Teams, ", ")
	}
	fmt.Fprintf(tw, "teams\t%s\n", teams)
	return tw.Flush()
}

// busStopCommand is `teambus bus stop`.
func busStopCommand() *cli.Command {
	return &cli.Command{
		Name:   "stop",
		Usage:  "stop the bus node that runs in --dir and wait until it has stopped (exit 0 also when none was running)",
		Flags:  []cli.Flag{dirFlag(), timeoutFlag()},
		Action: busStop,
	}
}

func busStop(c *cli.Context) error {
	if err := exactArgs(c, 0); err != nil {
		return err
	}
	dir, err := stateDir(c)
	if err != nil {
		return err
	}
	// A node with many teams takes longer to stop than one request may
	// take (1,000 teams: over 10 s, flushing 4,000 streams): unless
	// --timeout says otherwise, wait up to two minutes.
	ctx, cancel := context.WithTimeout(c.Context, 2*time.Minute)
	if c.IsSet("timeout") {
		cancel()
		if ctx, cancel, err = withTimeout(c); err != nil {
			return err
		}
	}
	defer cancel()
	if err := node.Stop(ctx, dir); err != nil {
		if errors.Is(err, node.ErrNotRunning) {
			// Nothing to stop is what was asked: exit 0, so a retry or a
			// stop in a script's cleanup is harmless.
			_, err = fmt.Fprintf(c.App.Writer, "no bus node was running in %s\n", dir)
			return err
		}
		return err
	}
	_, err = fmt.Fprintf(c.App.Writer, "stopped bus node in %s\n", dir)
	return err
}

// busScrubCommand is `teambus bus scrub`: the full verification of the
// stored messages that the start-up check leaves out.
func busScrubCommand() *cli.Command {
	return &cli.Command{
		Name:  "scrub",
		Usage: "read every stored message of the mailboxes and event logs and report what the store lost",
		Description: "The start-up check of a node trusts each stream's own state and reads only what was\n" +
			"written since the last clean stop (after a kill -9: since the last recorded marks), so\n" +
			"damage in old store blocks is found here. Scrub runs against the running node (its\n" +
			"token from --dir, or --server and credentials), reads every message of every mailbox\n" +
			"and event log (or of --stream) and shows its progress on a terminal. It records its\n" +
			"position in --dir (" + node.ScrubFile + ") every second: interrupted, the next run continues\n" +
			"there. Damage is printed as the start-up check reports it; exit code 2 when any.",
		Flags: flags(connFlags(), []cli.Flag{
			&cli.StringFlag{Name: "stream", Usage: "scrub only this stream (TBM_<team>, a mailbox, or TBE_<team>, an event log)", EnvVars: []string{"TEAMBUS_SCRUB_STREAM"}},
			jsonFlag(),
		}),
		Action: busScrub,
	}
}

func busScrub(c *cli.Context) error {
	if err := exactArgs(c, 0); err != nil {
		return err
	}
	dir, err := stateDir(c)
	if err != nil {
		return err
	}
	cfg, err := connConfig(c)
	if err != nil {
		return err
	}
	// --timeout bounds the connect; the scrub runs until it is done or
	// interrupted.
	ctx, cancel, err := withTimeout(c)
	if err != nil {
		return err
	}
	defer cancel()
	conn, err := bus.Connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	// The position is kept per --dir: the local node's directory, or any
	// directory for a scrub of --server.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("scrub: %w", err)
	}
	sc := node.ScrubConfig{Stream: c.String("stream"), PositionFile: filepath.Join(dir, node.ScrubFile)}
	var tty *os.File
	if f, ok := c.App.ErrWriter.(*os.File); ok && isTerminal(f) {
		tty = f
		last := time.Time{}
		sc.Progress = func(p node.ScrubProgress) {
			if time.Since(last) < 100*time.Millisecond && p.Done < p.Total {
				return
			}
			last = time.Now()
			fmt.Fprintf(tty, "\r%s", scrubBar(p))
		}
	}
	res, err := node.Scrub(c.Context, conn.JS, sc)
	if tty != nil {
		fmt.Fprintln(tty)
	}
	if err != nil {
		if c.Context.Err() != nil {
			return fmt.Errorf("scrub interrupted after %d of %d message(s): run it again to continue (%s): %w", res.Read, res.Total, filepath.Join(dir, node.ScrubFile), err)
		}
		return err
	}
	if c.Bool("json") {
		if res.Damage == nil {
			res.Damage = []node.StoreDamage{}
		}
		if err := printJSON(c.App.Writer, res); err != nil {
			return err
		}
	} else {
		resumed := ""
		if res.Resumed {
			resumed = ", continuing an interrupted scrub"
		}
		fmt.Fprintf(c.App.Writer, "scrubbed %d stream(s): read %d of %d message(s)%s\n", res.Streams, res.Read, res.Total, resumed)
		for _, d := range res.Damage {
			fmt.Fprintf(c.App.Writer, "damaged: %s\n", d.String())
		}
		if len(res.Damage) == 0 {
			fmt.Fprintln(c.App.Writer, "no damage found")
		}
	}
	if len(res.Damage) > 0 {
		return teambus.Statef("store damaged: %d stream(s) lost messages", len(res.Damage))
	}
	return nil
}

// scrubBar is a one-line progress bar of a scrub.
func scrubBar(p node.ScrubProgress) string {
	const width = 30
	frac := 1.0
	if p.Total > 0 {
		frac = float64(p.Done) / float64(p.Total)
	}
	n := int(frac * width)
	return fmt.Sprintf("scrub [%s%s] %5.1f%% %d/%d %s", strings.Repeat("#", n), strings.Repeat(".", width-n), frac*100, p.Done, p.Total, p.Stream)
}
