package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/team"
)

// Sections of a run, in the order they run.
var Sections = []string{"throughput", "oneshot", "hook", "transcript", "mcp", "inbox", "claim", "resume", "detect", "respawn", "memory", "scale", "fair"}

// Config says what to measure and how much. Zero values take the defaults
// of a full run, or of a quick run when Quick is set.
type Config struct {
	// Dir is where the run's temporary directory is made; default the
	// system temp dir. Put it on the disk you want to measure.
	Dir string
	// Exe is the teambus binary, run for one-shot commands, the node and
	// sidecars. Required.
	Exe string
	// ClientExe is the client build (-tags teambus_client), what agents,
	// hooks and sidecars run when it is installed; default teambus-client
	// beside Exe, else built from the module source in the working
	// directory; its rows are skipped when neither is there.
	ClientExe string
	// Quick runs a reduced set in well under a minute.
	Quick bool
	// Keep leaves the temporary directory in place.
	Keep bool
	// Only runs these sections (see Sections); empty runs all.
	Only []string

	// Duration of each throughput loop.
	Duration time.Duration
	// MsgSize is the body size of every message, in bytes.
	MsgSize int
	// OneShotRuns is how many one-shot processes of each kind run.
	OneShotRuns int
	// HookRuns is how many `teambus hook PostToolBatch` processes run (and
	// as many of the JSONL peer beside them).
	HookRuns int
	// SessionStartRuns is how many `teambus hook SessionStart` processes
	// bind a new session.
	SessionStartRuns int
	// MCPCalls is how many calls of each kind go through `teambus mcp`.
	MCPCalls int
	// ReadMessages is how many messages the inbox read + ack drains.
	ReadMessages int
	// ClaimTasks is how many tasks 8 members claim and complete.
	ClaimTasks int
	// ClaimMembers is how many members contend for them.
	ClaimMembers int
	// ClaimProcWorkers agents take ClaimProcTasks tasks with one-shot
	// processes for ClaimProcDuration (the one-shot claim rows).
	ClaimProcWorkers  int
	ClaimProcTasks    int
	ClaimProcDuration time.Duration

	// ResumeMembers are the team sizes resumed.
	ResumeMembers []int
	// ResumeTasks and ResumeMessages size every resumed team.
	ResumeTasks    int
	ResumeMessages int
	// ResumeRuns is how many resumes are timed per team.
	ResumeRuns int
	// MailboxMaxBytes is the mailbox limit of the resumed teams; 0 sizes
	// it from ResumeMessages and MsgSize.
	MailboxMaxBytes int64

	// Trials of each detection measurement.
	Trials int
	// The team policy of the detection teams.
	Heartbeat     time.Duration
	MemberTimeout time.Duration
	ProbeTimeout  time.Duration
	LeadTimeout   time.Duration

	// MemoryTeams is how many teams of 10 members the memory and scale
	// phases create, MemoryCreators at a time, on a node started with
	// default flags and the default team limits.
	MemoryTeams    int
	MemoryCreators int
	// MemorySamples are when the node's RSS is read after the creates:
	// the idle memory per team is the lower of these readings.
	MemorySamples []time.Duration
	// ScaleMembers heartbeat every ScaleInterval for ScaleWindow.
	ScaleMembers  int
	ScaleInterval time.Duration
	ScaleWindow   time.Duration

	// Progress receives one line per step; nil discards them.
	Progress func(format string, args ...any)
}

// Defaults returns cfg with every zero value set, for a quick or a full
// run.
func (c Config) Defaults() Config {
	q := c.Quick
	if c.Dir == "" {
		c.Dir = os.TempDir()
	}
	orDefault(&c.Duration, q, 3*time.Second, 500*time.Millisecond)
	orDefault(&c.MsgSize, q, 1024, 1024)
	orDefault(&c.OneShotRuns, q, 40, 8)
	orDefault(&c.HookRuns, q, 200, 20)
	orDefault(&c.SessionStartRuns, q, 30, 5)
	orDefault(&c.MCPCalls, q, 300, 30)
	orDefault(&c.ReadMessages, q, 5000, 500)
	orDefault(&c.ClaimTasks, q, 400, 80)
	orDefault(&c.ClaimMembers, q, 8, 8)
	orDefault(&c.ClaimProcWorkers, q, 4, 4)
	orDefault(&c.ClaimProcTasks, q, 11000, 11000)
	orDefault(&c.ClaimProcDuration, q, 20*time.Second, 5*time.Second)
	if len(c.ResumeMembers) == 0 {
		if q {
			c.ResumeMembers = []int{10, 50}
		} else {
			c.ResumeMembers = []int{10, 50, 100, 1000}
		}
	}
	orDefault(&c.ResumeTasks, q, 10000, 1000)
	orDefault(&c.ResumeMessages, q, 1000000, 20000)
	orDefault(&c.ResumeRuns, q, 9, 3)
	orDefault(&c.Trials, q, 20, 3)
	orDefault(&c.Heartbeat, q, 500*time.Millisecond, 250*time.Millisecond)
	orDefault(&c.MemberTimeout, q, 2*time.Second, time.Second)
	orDefault(&c.ProbeTimeout, q, time.Second, 500*time.Millisecond)
	orDefault(&c.LeadTimeout, q, 2*time.Second, time.Second)
	orDefault(&c.MemoryTeams, q, 1000, 20)
	orDefault(&c.MemoryCreators, q, 4, 4)
	if len(c.MemorySamples) == 0 {
		if q {
			c.MemorySamples = []time.Duration{time.Second, 3 * time.Second}
		} else {
			c.MemorySamples = []time.Duration{10 * time.Second, 30 * time.Second}
		}
	}
	orDefault(&c.ScaleMembers, q, 1000, 200)
	orDefault(&c.ScaleInterval, q, time.Second, time.Second)
	orDefault(&c.ScaleWindow, q, 10*time.Second, 2*time.Second)
	if c.Progress == nil {
		c.Progress = func(string, ...any) {}
	}
	return c
}

// orDefault sets a zero *v to full, or to quick in a quick run.
func orDefault[T comparable](v *T, q bool, full, quick T) {
	var zero T
	switch {
	case *v != zero:
	case q:
		*v = quick
	default:
		*v = full
	}
}

// Validate checks a configuration after Defaults.
func (c Config) Validate() error {
	if c.Exe == "" {
		return teambus.Invalidf("bench: no teambus binary given")
	}
	for _, s := range c.Only {
		if !slices.Contains(Sections, s) {
			return teambus.Invalidf("bench: unknown section %q: one of %s", s, strings.Join(Sections, ", "))
		}
	}
	if c.MsgSize < 1 || c.MsgSize > teambus.DefaultMaxBody {
		return teambus.Invalidf("bench: message size %d: 1 to %d bytes", c.MsgSize, teambus.DefaultMaxBody)
	}
	for _, n := range c.ResumeMembers {
		if n < 1 || n > 10000 {
			return teambus.Invalidf("bench: resume team size %d: 1 to 10000 members", n)
		}
	}
	if c.HookRuns < 1 || c.SessionStartRuns < 1 || c.MCPCalls < 1 {
		return teambus.Invalidf("bench: hook runs, SessionStart runs and MCP calls must be positive")
	}
	if c.Trials < 1 || c.OneShotRuns < 1 || c.ResumeRuns < 1 || c.ClaimMembers < 1 || c.ClaimTasks < 1 {
		return teambus.Invalidf("bench: trials, runs, members and tasks must be positive")
	}
	if c.ScaleMembers > c.MemoryTeams*10 {
		return teambus.Invalidf("bench: %d heartbeating members need %d teams of 10, got %d teams", c.ScaleMembers, (c.ScaleMembers+9)/10, c.MemoryTeams)
	}
	if c.MemberTimeout < time.Second || c.LeadTimeout < time.Second {
		return teambus.Invalidf("bench: member and lead timeouts must be at least 1s")
	}
	return nil
}

func (c Config) runs(section string) bool {
	return len(c.Only) == 0 || slices.Contains(c.Only, section)
}

// sectionTimeout bounds one section of a run.
const sectionTimeout = 30 * time.Minute

// run is the state of one bench run.
type run struct {
	cfg     Config
	dir     string
	res     *Result
	logs    string
	log     *slog.Logger
	peer    peerBuild
	claimer peerBuild
	client  peerBuild
	agent   peerBuild
}

// Run measures everything cfg asks for and returns the result. It fails
// only when a measurement can not run; the error then says which, and the
// result holds what was measured before.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("bench directory: %w", err)
	}
	dir, err := os.MkdirTemp(cfg.Dir, "teambus-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench directory: %w", err)
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if !cfg.Keep {
		defer os.RemoveAll(dir)
	}
	r := &run{cfg: cfg, dir: dir, logs: filepath.Join(dir, "logs"),
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := os.MkdirAll(r.logs, 0o700); err != nil {
		return nil, err
	}
	started := time.Now()
	r.res = &Result{Quick: cfg.Quick, Started: started.UTC(), Machine: machine(dir)}
	r.res.Machine.CPUs = runtime.NumCPU()
	r.res.Machine.Go = runtime.Version()
	r.res.Machine.NATS = server.VERSION
	if cfg.Keep {
		r.res.Warnings = append(r.res.Warnings, "kept the bench directory "+dir)
	}

	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"throughput", r.throughput},
		{"oneshot", r.oneShot},
		{"hook", r.hooks},
		{"transcript", r.transcripts},
		{"mcp", r.mcpCalls},
		{"inbox", r.inbox},
		{"claim", func(ctx context.Context) error {
			if err := r.claims(ctx); err != nil {
				return err
			}
			return r.oneShotClaims(ctx)
		}},
		{"resume", r.resume},
		{"detect", r.detect},
		{"respawn", r.respawn},
		{"memory", r.memoryAndScale},
		{"fair", r.fair},
	}
	var failed []error
	for _, s := range steps {
		if s.name == "memory" {
			if !cfg.runs("memory") && !cfg.runs("scale") {
				continue
			}
		} else if !cfg.runs(s.name) {
			continue
		}
		if err := ctx.Err(); err != nil {
			failed = append(failed, err)
			break
		}
		t0 := time.Now()
		cfg.Progress("%s ...", s.name)
		// A deadline for the whole section: requests then wait as long as
		// a loaded machine needs instead of the client's 5s default.
		sctx, cancel := context.WithTimeout(ctx, sectionTimeout)
		err := s.fn(sctx)
		cancel()
		if err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", s.name, err))
			r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("%s could not run: %v", s.name, err))
			cfg.Progress("%s failed: %v", s.name, err)
			continue
		}
		cfg.Progress("%s done in %s", s.name, time.Since(t0).Round(100*time.Millisecond))
	}
	r.compareAll()
	r.res.Targets = r.targets()
	r.res.Took = time.Since(started).Round(time.Second).String()
	if len(failed) > 0 {
		return r.res, errors.Join(failed...)
	}
	return r.res, nil
}

// node starts an embedded node in a new directory under the run's, with
// the sync mode given, listening on a free loopback port.
func (r *run) node(ctx context.Context, name, sync string) (*node.Node, error) {
	return node.Start(ctx, node.NodeConfig{Dir: filepath.Join(r.dir, name), Listen: "127.0.0.1:0", Sync: sync,
		MaxStore: 1 << 40, Logger: r.log, Attach: node.Attach(node.Config{Logger: r.log})})
}

// connect opens a TCP connection to a node, as another process would.
func connect(ctx context.Context, n *node.Node) (*bus.Conn, error) {
	return bus.Connect(ctx, bus.ConnectConfig{Dir: n.Dir(), Name: "teambus bench", Timeout: 30 * time.Second})
}

// teamNode starts a node (see node) and connects to it over TCP (see
// connect), with a team service of cfg on that connection; stop closes
// the connection and the node.
func (r *run) teamNode(ctx context.Context, name, sync string, cfg team.Config) (n *node.Node, svc *team.Service, stop func(), err error) {
	n, err = r.node(ctx, name, sync)
	if err != nil {
		return nil, nil, nil, err
	}
	conn, err := connect(ctx, n)
	if err != nil {
		n.Close()
		return nil, nil, nil, err
	}
	return n, team.New(conn.JS, cfg), func() { conn.Close(); n.Close() }, nil
}
