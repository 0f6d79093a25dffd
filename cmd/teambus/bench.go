//go:build !teambus_client

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bench"
	"github.com/teambus/teambus/internal/atomicfile"
)

// benchCommand is `teambus bench`: teambus beside the file-based peers and
// the disk's limit, on the user's disk.
func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "measure teambus beside JSONL/JSON files and the disk's fsync limit (a table, or --json)",
		Description: "Runs in one process on a temporary directory inside --dir (default the system temp dir):\n" +
			"the disk's 4 KiB write+fsync loop; the file-based peers (JSONL + fsync, an inbox JSON file\n" +
			"rewritten atomically, a state.json under flock); and teambus on an embedded node with sync\n" +
			"always: pipelined and one-at-a-time sends, one-shot `teambus send` processes, inbox read +\n" +
			"ack, `teambus hook` processes (PostToolBatch, SessionStart) beside a standalone JSONL peer, tool calls\n" +
			"through `teambus mcp`, claims by contending members, resume of large teams, failure detection by real sidecar\n" +
			"processes, memory of the node and a sidecar, node CPU with many heartbeating members. Every\n" +
			"teambus figure is printed with its ratio to the peer it replaces, and the targets are checked.\n" +
			"A full run takes a few minutes and several GB of temporary disk; --quick takes under a minute.\n" +
			"It fails only when a measurement can not run, never on timing.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Usage: "where to make the temporary directory: put it on the disk to measure (default: the system temp dir)", EnvVars: []string{"TEAMBUS_BENCH_DIR"}},
			&cli.BoolFlag{Name: "quick", Usage: "a reduced set with small sizes, in under a minute", EnvVars: []string{"TEAMBUS_BENCH_QUICK"}},
			jsonFlag(),
			&cli.BoolFlag{Name: "keep", Usage: "keep the temporary directory (stores, logs of the child processes)"},
			&cli.StringSliceFlag{Name: "only", Usage: "run only these sections: " + strings.Join(bench.Sections, ", ")},
			&cli.DurationFlag{Name: "duration", Usage: "length of each throughput loop (default 3s, quick 500ms)"},
			&cli.IntFlag{Name: "msg-size", Usage: "message body size in bytes", Value: 1024},
			&cli.IntFlag{Name: "oneshot-runs", Usage: "one-shot processes of each kind (default 40, quick 8)"},
			&cli.IntFlag{Name: "hook-runs", Usage: "teambus hook PostToolBatch processes, and as many of the JSONL peer beside them (default 200, quick 20)"},
			&cli.IntFlag{Name: "sessionstart-runs", Usage: "teambus hook SessionStart processes, each binding a new session (default 30, quick 5)"},
			&cli.IntFlag{Name: "mcp-calls", Usage: "tool calls of each kind through teambus mcp (default 300, quick 30)"},
			&cli.IntFlag{Name: "read-messages", Usage: "messages drained by the inbox read + ack (default 5000, quick 500)"},
			&cli.IntFlag{Name: "claim-tasks", Usage: "tasks the contending members claim and complete (default 400, quick 80)"},
			&cli.IntFlag{Name: "claim-members", Usage: "contending members", Value: 8},
			&cli.StringFlag{Name: "resume-members", Usage: "team sizes to resume, comma separated (default 10,50,100,1000; quick 10,50)"},
			&cli.IntFlag{Name: "resume-tasks", Usage: "tasks of every resumed team (default 10000, quick 1000)"},
			&cli.IntFlag{Name: "resume-messages", Usage: "mailbox messages of every resumed team (default 1000000, quick 20000)"},
			&cli.IntFlag{Name: "resume-runs", Usage: "timed resumes per team (default 9, quick 3)"},
			&cli.StringFlag{Name: "mailbox-max-bytes", Usage: "mailbox limit of the resumed teams, e.g. 2GiB (default: sized from --resume-messages and --msg-size)"},
			&cli.IntFlag{Name: "trials", Usage: "trials of each detection measurement (default 20, quick 3)"},
			&cli.DurationFlag{Name: "heartbeat", Usage: "heartbeat of the detection teams (default 500ms, quick 250ms)"},
			&cli.DurationFlag{Name: "member-timeout", Usage: "member-timeout of the detection teams (default 2s, quick 1s)"},
			&cli.DurationFlag{Name: "probe-timeout", Usage: "probe-timeout of the detection teams (default 1s, quick 500ms)"},
			&cli.DurationFlag{Name: "lead-timeout", Usage: "lead-timeout of the detection teams (default 2s, quick 1s)"},
			&cli.IntFlag{Name: "memory-teams", Usage: "teams of 10 members created on the child node, 4 at a time (default 1000, quick 20)"},
			&cli.IntFlag{Name: "scale-members", Usage: "members heartbeating against the child node (default 1000, quick 200)"},
			&cli.DurationFlag{Name: "scale-interval", Usage: "their heartbeat interval", Value: time.Second},
			&cli.DurationFlag{Name: "scale-window", Usage: "how long the node's CPU is measured (default 10s, quick 2s)"},
			&cli.StringFlag{Name: "save", Usage: "also write the result as JSON to this `FILE` (the full run's record: bench/results/<date>.json)"},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of the bench process (its embedded nodes included) to this file"},
		},
		Action: runBench,
	}
}

func runBench(c *cli.Context) error {
	if err := exactArgs(c, 0); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the teambus binary: %w", err)
	}
	cfg := bench.Config{
		Dir: c.String("dir"), Exe: exe, Quick: c.Bool("quick"), Keep: c.Bool("keep"), Only: splitList(c.StringSlice("only")),
		Duration: c.Duration("duration"), MsgSize: c.Int("msg-size"), OneShotRuns: c.Int("oneshot-runs"),
		HookRuns: c.Int("hook-runs"), SessionStartRuns: c.Int("sessionstart-runs"), MCPCalls: c.Int("mcp-calls"),
		ReadMessages: c.Int("read-messages"), ClaimTasks: c.Int("claim-tasks"), ClaimMembers: c.Int("claim-members"),
		ResumeTasks: c.Int("resume-tasks"), ResumeMessages: c.Int("resume-messages"), ResumeRuns: c.Int("resume-runs"),
		Trials: c.Int("trials"), Heartbeat: c.Duration("heartbeat"), MemberTimeout: c.Duration("member-timeout"),
		ProbeTimeout: c.Duration("probe-timeout"), LeadTimeout: c.Duration("lead-timeout"),
		MemoryTeams: c.Int("memory-teams"), ScaleMembers: c.Int("scale-members"), ScaleInterval: c.Duration("scale-interval"),
		ScaleWindow: c.Duration("scale-window"),
	}
	for _, s := range splitList([]string{c.String("resume-members")}) {
		n, err := strconv.Atoi(s)
		if err != nil {
			return teambus.Invalidf("invalid --resume-members %q: comma separated numbers", c.String("resume-members"))
		}
		cfg.ResumeMembers = append(cfg.ResumeMembers, n)
	}
	if cfg.MailboxMaxBytes, err = parseSize("--mailbox-max-bytes", c.String("mailbox-max-bytes")); err != nil {
		return err
	}
	for _, d := range []time.Duration{cfg.Duration, cfg.Heartbeat, cfg.MemberTimeout, cfg.ProbeTimeout, cfg.LeadTimeout, cfg.ScaleInterval, cfg.ScaleWindow} {
		if d < 0 {
			return usageError(c, "durations must be positive")
		}
	}
	stderr := c.App.ErrWriter
	cfg.Progress = func(format string, args ...any) {
		fmt.Fprintf(stderr, "bench: "+format+"\n", args...)
	}
	if p := c.String("cpuprofile"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	res, err := bench.Run(c.Context, cfg)
	if res != nil && c.String("save") != "" {
		if serr := saveJSON(c.String("save"), res); serr != nil {
			return serr
		}
	}
	if res != nil {
		if c.Bool("json") {
			if perr := printJSON(c.App.Writer, res); perr != nil {
				return perr
			}
		} else {
			res.WriteTable(c.App.Writer)
		}
	}
	return err
}

// saveJSON writes v as indented JSON to path, making its directory.
func saveJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("save the bench result: %w", err)
	}
	if err := atomicfile.WriteJSON(path, v, 0o644); err != nil {
		return fmt.Errorf("save the bench result: %w", err)
	}
	return nil
}
