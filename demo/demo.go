package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/proc"
	"github.com/teambus/teambus/team"
)

// Config is one run of the demo.
type Config struct {
	// Out receives the narration.
	Out io.Writer
	// Exe is the teambus binary the demo runs as sidecars, simulated
	// agents and commands.
	Exe string
	// Keep keeps the temporary directory (bus store and process logs).
	Keep bool
	// StepTime is how long one step of a simulated task takes.
	StepTime time.Duration
	// Timeout bounds the whole run.
	Timeout time.Duration
}

// Validate checks the step time and the timeout.
func (c Config) Validate() error {
	if c.StepTime < MinStep || c.StepTime > 5*time.Second {
		return teambus.Invalidf("invalid step time %s: from %s (the work after the lead crash must outlast zombie mode) to 5s", c.StepTime, MinStep)
	}
	if c.Timeout <= 0 {
		return teambus.Invalidf("invalid timeout %s: must be positive", c.Timeout)
	}
	if c.Out == nil || c.Exe == "" {
		return teambus.Invalidf("demo: no output or no teambus binary")
	}
	return nil
}

// Run runs the demo in a new temporary directory, removed at the end
// unless cfg.Keep or the demo failed (then it holds the logs of every
// process). Cancelling ctx (Ctrl-C) ends it as after a success.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "teambus-demo-")
	if err != nil {
		return fmt.Errorf("demo: create a temporary directory: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	d := &demo{
		w: cfg.Out, exe: cfg.Exe, dir: dir, keep: cfg.Keep, logDir: filepath.Join(dir, "logs"), stepTime: cfg.StepTime,
		start: time.Now(), changed: make(chan struct{}), agents: map[string]*demoChild{}, sidecars: map[string]*demoChild{},
		heldMail: map[string]bool{}, released: map[string]bool{}, offlineSince: map[string]time.Time{}, offline: map[string]bool{},
		lastStatus: map[string]teambus.MemberStatus{},
	}
	runErr := d.run(rctx)
	d.shutdown()
	if runErr != nil && ctx.Err() != nil {
		// Interrupted (Ctrl-C): clean up as after a success.
		fmt.Fprintf(d.w, "\ninterrupted at step %d (%s)\n", d.stepNo, d.stepName)
		if !d.keep {
			os.RemoveAll(dir) // best effort: it is a temporary directory
		}
		return runErr
	}
	if runErr != nil {
		if rctx.Err() != nil {
			runErr = fmt.Errorf("%w (the whole demo is limited by --timeout %s)", runErr, cfg.Timeout)
		}
		d.printFailure(runErr)
		return fmt.Errorf("demo failed at step %d (%s): %w; logs and store kept in %s", d.stepNo, d.stepName, runErr, dir)
	}
	if d.keep {
		fmt.Fprintf(d.w, "\nkept %s: bus store and the log of every process in %s\n", dir, d.logDir)
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintf(d.w, "\ncould not remove %s: %v\n", dir, err)
	}
	return nil
}

// The demo team.
const demoTeam = "demo"

// demoPolicy is short enough to watch every protocol happen in seconds.
func demoPolicy() teambus.Policy {
	p := teambus.DefaultPolicy()
	p.Heartbeat = time.Second
	p.MemberTimeout = 3 * time.Second
	p.ProbeTimeout = 2 * time.Second
	p.LeadTimeout = 3 * time.Second
	p.ZombieMax = 2 * time.Minute
	p.TakeoverAfter = 2 * time.Second
	p.StuckTimeout = time.Minute
	p.CheckpointEvery = time.Second
	p.AckWait = 5 * time.Second
	p.CrashLimit = 1
	return p
}

// demoMembers are the teammates: id, role and quantum (their specialty).
var demoMembers = []team.MemberSpec{
	{ID: "tm1", Role: "schema", Quantum: "schema"},
	{ID: "tm2", Role: "engine", Quantum: "engine"},
	{ID: "tm3", Role: "tests", Quantum: "tests"},
}

// demoTasks is the plan. A task with a quantum is for that specialist
// only (the simulated agents never take another specialist's task), so the
// tests task the demo crashes can only be continued by tm3's respawn. The
// step counts in the descriptions pace the story: the work after the lead
// crash outlasts zombie mode and the takeover.
var demoTasks = []team.TaskSpec{
	{ID: "schema", Description: "Design the storage schema of the orders service (4 steps)", Quantum: "schema"},
	{ID: "engine-a", Description: "Build the pricing engine on the schema (4 steps)", Deps: []string{"schema"}, Quantum: "engine"},
	{ID: "engine-b", Description: "Build the inventory engine on the schema (5 steps)", Deps: []string{"schema"}},
	{ID: "integration", Description: "Wire both engines into the service API (8 steps)", Deps: []string{"engine-a", "engine-b"}},
	{ID: "tests", Description: "Write and run the end-to-end test suite (10 steps)", Deps: []string{"integration"}, Quantum: "tests"},
	{ID: "docs", Description: "Document the service API (5 steps)", Deps: []string{"integration"}},
}

// demoVictimTask is the task whose agent the demo kills mid-way.
const demoVictimTask = "tests"

// MinStep is the shortest step time that keeps the story in order:
// the 18 steps of integration and tests after the lead crash must outlast
// lead-timeout and the takeover.
const MinStep = 250 * time.Millisecond

// demo is one run of the demo.
type demo struct {
	w        io.Writer
	exe      string
	dir      string
	keep     bool
	logDir   string
	stepTime time.Duration
	start    time.Time

	node   *node.Node
	conn   *bus.Conn
	svc    *team.Service
	stopBg context.CancelFunc
	bgDone sync.WaitGroup

	outMu    sync.Mutex
	stepNo   int
	stepName string
	holding  bool     // narration is buffered while a command's output is collected
	pending  []string // the buffered narration

	// children, in start order; agents and sidecars by member (lead is
	// "lead"), the current incarnation.
	childMu  sync.Mutex
	children []*demoChild
	agents   map[string]*demoChild
	sidecars map[string]*demoChild

	// mu guards what the watchers see: the latest view and mail counts.
	mu       sync.Mutex
	view     *team.View
	changed  chan struct{}   // closed and replaced on every change
	heldMail map[string]bool // from/id of mail held while its sender was a zombie
	released map[string]bool // from/id of held mail delivered since
	relSeqs  []uint64        // seqs of the released copies
	// offlineSince is when a member was first seen offline; offline is set
	// once that was narrated.
	offlineSince map[string]time.Time
	offline      map[string]bool
	lastStatus   map[string]teambus.MemberStatus // the last status other than offline

	t timings
}

// timings are what the summary reports.
type timings struct {
	leadKill, lastLeadBeat              time.Time
	firstZombie, allZombie, detected    time.Time
	leadStart, leadAttached, zombieLeft time.Time
	tmKill, tmCrashed                   time.Time
	victim                              string
	victimDone, victimTotal             int
	respawnClaimed, victimComplete      time.Time
	end                                 time.Time
}

// elapsed is the time since the demo started, for the narration.
func (d *demo) elapsed(at time.Time) string {
	return fmt.Sprintf("[%5.1fs]", at.Sub(d.start).Seconds())
}

// say prints one narration line stamped with the time since the start.
func (d *demo) say(format string, args ...any) {
	d.emit(fmt.Sprintf("%s %s", d.elapsed(time.Now()), fmt.Sprintf(format, args...)))
}

// note prints an indented line under the narration.
func (d *demo) note(format string, args ...any) {
	d.emit(noteLine(fmt.Sprintf(format, args...)))
}

func noteLine(s string) string { return "          " + s }

// emit prints a line, or buffers it while a command runs.
func (d *demo) emit(line string) {
	d.outMu.Lock()
	defer d.outMu.Unlock()
	if d.holding {
		d.pending = append(d.pending, line)
		return
	}
	fmt.Fprintln(d.w, line)
}

// command runs this binary with args (and --dir) and prints the first
// maxLines lines of its output under a "$ teambus ..." line, the narration
// of what happened meanwhile after it. It returns the output and the exit
// code; on failure it prints nothing of the output.
func (d *demo) command(ctx context.Context, maxLines int, comment string, args ...string) (string, int) {
	d.outMu.Lock()
	d.holding = true
	d.outMu.Unlock()
	out, code := d.cli(ctx, append(args, "--dir", d.dir)...)
	d.outMu.Lock()
	defer d.outMu.Unlock()
	if code == 0 {
		fmt.Fprintln(d.w, noteLine("$ teambus "+strings.Join(args, " ")+comment))
		for _, line := range firstLines(out, maxLines) {
			fmt.Fprintln(d.w, noteLine("| "+line))
		}
	}
	for _, line := range d.pending {
		fmt.Fprintln(d.w, line)
	}
	d.pending, d.holding = nil, false
	return out, code
}

// step starts a numbered step of the story.
func (d *demo) step(n int, title string) {
	d.outMu.Lock()
	defer d.outMu.Unlock()
	d.stepNo, d.stepName = n, title
	fmt.Fprintf(d.w, "\n== %d. %s\n", n, title)
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

// run is the story. Every wait has a limit; the first failure ends it.
func (d *demo) run(ctx context.Context) error {
	fmt.Fprintf(d.w, "teambus demo: one lead and three teammates on an embedded bus, every one a real process.\n")
	fmt.Fprintf(d.w, "The lead is killed, the teammates go into zombie mode, a new lead takes over; then a teammate's\n")
	fmt.Fprintf(d.w, "agent is killed mid-task and respawned from its checkpoint.\n")

	if err := d.setup(ctx); err != nil {
		return err
	}
	if err := d.startTeam(ctx); err != nil {
		return err
	}
	if err := d.killLead(ctx); err != nil {
		return err
	}
	if err := d.newLead(ctx); err != nil {
		return err
	}
	if err := d.killTeammate(ctx); err != nil {
		return err
	}
	if err := d.respawn(ctx); err != nil {
		return err
	}
	return d.finish(ctx)
}

// setup opens the node, creates the team and its tasks, and starts the
// watchers that narrate.
func (d *demo) setup(ctx context.Context) error {
	d.step(1, "an embedded bus node and a team")
	if err := os.MkdirAll(d.logDir, 0o700); err != nil {
		return err
	}
	busLog, err := os.OpenFile(filepath.Join(d.logDir, "bus.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	busLogger := slog.New(slog.NewTextHandler(busLog, &slog.HandlerOptions{Level: slog.LevelWarn}))
	d.node, err = node.Start(ctx, node.NodeConfig{Dir: d.dir, Listen: "127.0.0.1:0",
		Logger: busLogger, Attach: node.Attach(node.Config{Logger: busLogger})})
	if err != nil {
		busLog.Close()
		return fmt.Errorf("open the bus node: %w", err)
	}
	go func() { <-d.node.Done(); busLog.Close() }()
	d.conn, err = d.node.Connect(ctx)
	if err != nil {
		return fmt.Errorf("connect to the bus node: %w", err)
	}
	d.svc = team.New(d.conn.JS, team.Config{})
	d.say("bus node up at %s (NATS JetStream, file store, fsync before every ack)", d.node.URL())
	d.note("directory %s: the processes find the node through its discovery file (--dir)", d.dir)

	pol := demoPolicy()
	if _, err := d.svc.CreateTeam(ctx, demoTeam, "", demoMembers, pol); err != nil {
		return fmt.Errorf("create team %s: %w", demoTeam, err)
	}
	for _, spec := range demoTasks {
		if _, err := d.svc.AddTask(ctx, demoTeam, spec); err != nil {
			return fmt.Errorf("add task %s: %w", spec.ID, err)
		}
	}
	var ms []string
	for _, m := range demoMembers {
		ms = append(ms, fmt.Sprintf("%s (%s)", m.ID, m.Role))
	}
	d.say("team %s created: a lead and %s", demoTeam, strings.Join(ms, ", "))
	d.note("policy: heartbeat %s, lead-timeout %s, takeover-after %s, member-timeout %s, probe-timeout %s, crash-limit %d",
		pol.Heartbeat, pol.LeadTimeout, pol.TakeoverAfter, pol.MemberTimeout, pol.ProbeTimeout, pol.CrashLimit)
	d.say("%d tasks: schema -> engine-a, engine-b -> integration -> tests, docs", len(demoTasks))
	for _, t := range demoTasks {
		who := "anyone"
		if t.Quantum != "" {
			who = "the " + t.Quantum + " specialist"
		}
		d.note("%-12s %s; %s", t.ID, t.Description, who)
	}

	bg, stop := context.WithCancel(context.Background())
	d.stopBg = stop
	d.bgDone.Add(2)
	go func() { defer d.bgDone.Done(); d.watchTeam(bg) }()
	go func() { defer d.bgDone.Done(); d.watchMail(bg) }()
	_, err = d.waitFor(ctx, 5*time.Second, "the first view of the team", func(v *team.View) bool { return true })
	return err
}

// startTeam starts the lead and the teammates and lets them work until
// two tasks are complete.
func (d *demo) startTeam(ctx context.Context) error {
	d.step(2, "the lead and three teammates start, each a sidecar beside an agent")
	if err := d.startLead(ctx, "lead-1"); err != nil {
		return err
	}
	for _, m := range demoMembers {
		if err := d.startTeammate(ctx, m.ID, m.ID+"-s1"); err != nil {
			return err
		}
	}
	_, err := d.waitFor(ctx, 15*time.Second, "every teammate registered", func(v *team.View) bool {
		for _, m := range demoMembers {
			if mv := memberOf(v, m.ID); mv == nil || mv.Session != m.ID+"-s1" {
				return false
			}
		}
		return true
	})
	if err != nil {
		return err
	}

	d.step(3, "the team works: claim, checkpoint after every step, report, complete")
	_, err = d.waitFor(ctx, d.work(12), "two tasks complete", func(v *team.View) bool {
		return v.Counts[string(teambus.TaskComplete)] >= 2
	})
	return err
}

// work scales a wait with the step time: n steps of 400ms by default.
func (d *demo) work(steps int) time.Duration {
	return time.Duration(steps)*d.stepTime*2 + 10*time.Second
}

// startLead starts a lead agent and its sidecar with session and waits
// until the session is the team's lead.
func (d *demo) startLead(ctx context.Context, session string) error {
	agent, err := d.spawn("lead agent "+session, "agent-"+session+".log", "agent-sim", "--role", "lead", "--dir", d.dir,
		"--team", demoTeam, "--member", teambus.Lead, "--session", session)
	if err != nil {
		return err
	}
	start := time.Now()
	side, err := d.spawn("lead sidecar "+session, "sidecar-"+session+".log", "lead", "--dir", d.dir,
		"--team", demoTeam, "--session", session, "--pid", strconv.Itoa(agent.pid()))
	if err != nil {
		return err
	}
	d.childMu.Lock()
	d.agents[teambus.Lead], d.sidecars[teambus.Lead] = agent, side
	d.childMu.Unlock()
	if session != "lead-1" {
		d.t.leadStart = start
	}
	d.say("started lead agent (pid %d) and `teambus lead --team %s --session %s --pid %d` (pid %d)",
		agent.pid(), demoTeam, session, agent.pid(), side.pid())
	_, err = d.waitFor(ctx, 15*time.Second, "lead session "+session+" attached", func(v *team.View) bool {
		return v.Team.LeadSession == session && v.Team.Status == teambus.TeamActive
	}, side)
	return err
}

// startTeammate starts an agent and then its sidecar watching the agent's
// pid; the agent waits until the sidecar registered its session.
func (d *demo) startTeammate(ctx context.Context, member, session string) error {
	agent, err := d.spawn(member+" agent "+session, "agent-"+session+".log", "agent-sim", "--dir", d.dir,
		"--team", demoTeam, "--member", member, "--session", session, "--step-time", d.stepTime.String())
	if err != nil {
		return err
	}
	side, err := d.spawn(member+" sidecar "+session, "sidecar-"+session+".log", "teammate", "--dir", d.dir,
		"--team", demoTeam, "--member", member, "--session", session, "--pid", strconv.Itoa(agent.pid()))
	if err != nil {
		return err
	}
	d.childMu.Lock()
	d.agents[member], d.sidecars[member] = agent, side
	d.childMu.Unlock()
	d.say("started %s agent (pid %d) and `teambus teammate --member %s --session %s --pid %d` (pid %d)",
		member, agent.pid(), member, session, agent.pid(), side.pid())
	_, err = d.waitFor(ctx, 15*time.Second, member+" session "+session+" registered", func(v *team.View) bool {
		mv := memberOf(v, member)
		return mv != nil && mv.Session == session
	}, side)
	return err
}

// killLead kills the lead and waits for the teammates' zombie mode.
func (d *demo) killLead(ctx context.Context) error {
	d.step(4, "kill the lead")
	d.childMu.Lock()
	side, agent := d.sidecars[teambus.Lead], d.agents[teambus.Lead]
	d.childMu.Unlock()
	side.kill()
	agent.kill()
	d.t.leadKill = time.Now()
	d.say("lead killed (kill -9 sidecar pid %d and lead agent pid %d): no more lead heartbeats", side.pid(), agent.pid())
	pol := demoPolicy()
	d.note("the teammates keep working; after lead-timeout (%s) without a lead heartbeat they enter zombie mode", pol.LeadTimeout)
	side.wait(5 * time.Second)
	agent.wait(5 * time.Second)

	v, err := d.waitFor(ctx, pol.LeadTimeout+15*time.Second, "every teammate in zombie mode and lead_timeout_detected_at set", func(v *team.View) bool {
		if v.Team.LeadTimeoutDetectedAt == nil {
			return false
		}
		for _, m := range demoMembers {
			if mv := memberOf(v, m.ID); mv == nil || mv.Status != teambus.MemberZombie {
				return false
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	d.t.allZombie = time.Now()
	d.t.detected = *v.Team.LeadTimeoutDetectedAt
	d.t.firstZombie = d.t.allZombie
	for _, m := range v.Members {
		if m.ZombieSince != nil && m.ZombieSince.Before(d.t.firstZombie) {
			d.t.firstZombie = *m.ZombieSince
		}
	}
	d.say("all %d teammates in zombie mode: lead kill -> zombie %s (first), %s (all); lead_timeout_detected_at = kill + %s",
		len(demoMembers), secs(d.t.firstZombie.Sub(d.t.leadKill)), secs(d.t.allZombie.Sub(d.t.leadKill)), secs(d.t.detected.Sub(d.t.leadKill)))
	// The team service records the last beat it received of a lead it
	// judged silent: lead-timeout counts from there.
	if t, err := d.svc.Team(ctx, demoTeam); err == nil && t.LeadLastSeen != nil && !t.LeadLastSeen.After(d.t.leadKill) {
		d.t.lastLeadBeat = *t.LeadLastSeen
		d.note("its last heartbeat reached the team service %s before the kill; last lead heartbeat -> first zombie: %s (lead-timeout %s)",
			secs(d.t.leadKill.Sub(d.t.lastLeadBeat)), secs(d.t.firstZombie.Sub(d.t.lastLeadBeat)), pol.LeadTimeout)
	}

	// A working teammate tells the lead it is silent; that mail is held.
	// Give it a few steps to happen before the new lead arrives.
	if _, err := d.waitFor(ctx, 6*d.stepTime+time.Second, "mail held in zombie mode", func(*team.View) bool { return len(d.heldMail) > 0 }); err != nil {
		d.note("no teammate sent mail while the lead was away")
	} else {
		d.note("mail the teammates send now is stored durably but held: the lead will get it when a lead attaches")
	}
	return nil
}

// newLead starts a second lead session, which takes over.
func (d *demo) newLead(ctx context.Context) error {
	d.step(5, "a new lead session takes over")
	if err := d.startLead(ctx, "lead-2"); err != nil {
		return err
	}
	d.t.leadAttached = time.Now()
	d.say("lead-2 attached %s after its start (process start, connect, resume validation, takeover: lead-1 is fenced)",
		secs(d.t.leadAttached.Sub(d.t.leadStart)))
	if _, err := d.waitFor(ctx, 10*time.Second, "every teammate out of zombie mode", func(v *team.View) bool {
		for _, m := range demoMembers {
			if mv := memberOf(v, m.ID); mv == nil || mv.Status == teambus.MemberZombie {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}
	d.t.zombieLeft = time.Now()
	d.say("every teammate left zombie mode %s after the new lead attached", secs(d.t.zombieLeft.Sub(d.t.leadAttached)))
	_, err := d.waitFor(ctx, 5*time.Second, "held mail released", func(*team.View) bool { return len(d.released) >= len(d.heldMail) })
	d.mu.Lock()
	nHeld, seqs := len(d.heldMail), append([]uint64(nil), d.relSeqs...)
	d.mu.Unlock()
	switch {
	case nHeld == 0:
		d.say("held mail released: none was held")
	case err != nil:
		d.say("held mail released: only %d of %d message(s) so far (seq %s); the rest is still held", len(seqs), nHeld, joinSeqs(seqs))
	default:
		d.say("held mail released: %d of %d message(s) delivered to the lead in order (seq %s)", len(seqs), nHeld, joinSeqs(seqs))
	}
	// The resume summary, as a person would ask for it.
	if _, code := d.command(ctx, 16, "", "team", "probe", demoTeam); code != 0 {
		rep, err := d.svc.Probe(ctx, demoTeam)
		if err != nil {
			return fmt.Errorf("probe team %s: %w", demoTeam, err)
		}
		d.note("team %s: %s, lead %s (epoch %d), %d%% done", rep.Team, rep.Status, rep.LeadSession, rep.LeadEpoch, rep.Progress)
	}
	return nil
}

// killTeammate kills the agent that works on the victim task once it has
// checkpointed a step, and waits for the crash record.
func (d *demo) killTeammate(ctx context.Context) error {
	d.step(6, "kill a teammate's agent in the middle of a task")
	v, err := d.waitFor(ctx, d.work(30), "task "+demoVictimTask+" in progress with a checkpointed step", func(v *team.View) bool {
		t := taskOf(v, demoVictimTask)
		if t == nil || t.Status != teambus.TaskInProgress || t.Checkpoint == nil || t.Checkpoint.Member != t.AssignedTo {
			return false
		}
		return len(t.Checkpoint.TasksCompleted) >= 1 && len(t.Checkpoint.TasksRemaining) >= 2
	})
	if err != nil {
		return err
	}
	t := taskOf(v, demoVictimTask)
	victim := t.AssignedTo
	d.childMu.Lock()
	agent, side := d.agents[victim], d.sidecars[victim]
	d.childMu.Unlock()
	if agent == nil || side == nil {
		return fmt.Errorf("task %s is held by %s, which has no agent process", t.ID, victim)
	}
	agent.kill()
	d.t.tmKill, d.t.victim = time.Now(), victim
	d.say("%s's agent killed (kill -9 pid %d) holding %s with %d of %d steps checkpointed; its sidecar (pid %d) stays",
		victim, agent.pid(), t.ID, len(t.Checkpoint.TasksCompleted), len(t.Checkpoint.TasksCompleted)+len(t.Checkpoint.TasksRemaining), side.pid())
	v, err = d.waitFor(ctx, 10*time.Second, victim+" crashed and task "+t.ID+" back in the queue", func(v *team.View) bool {
		mv, tv := memberOf(v, victim), taskOf(v, demoVictimTask)
		return mv != nil && mv.Status == teambus.MemberCrashed && tv != nil && tv.Status == teambus.TaskAvailable && tv.Checkpoint != nil
	})
	if err != nil {
		return err
	}
	d.t.tmCrashed = time.Now()
	t = taskOf(v, demoVictimTask)
	d.t.victimDone = len(t.Checkpoint.TasksCompleted)
	d.t.victimTotal = d.t.victimDone + len(t.Checkpoint.TasksRemaining)
	d.say("%s crashed: recorded %s after the kill (its sidecar watches the agent pid); %s is available again, checkpoint kept (%d/%d steps)",
		victim, secs(d.t.tmCrashed.Sub(d.t.tmKill)), t.ID, d.t.victimDone, d.t.victimTotal)
	if side.wait(5 * time.Second) {
		d.say("%s sidecar exited after reporting the crash (%s)", victim, side.exitText())
	} else {
		d.note("%s sidecar (pid %d) is still running", victim, side.pid())
	}
	if out, code := d.command(ctx, 15, "   (the prompt for the replacement agent)", "brief", "--team", demoTeam, "--member", victim); code != 0 {
		cp := t.Checkpoint
		d.note("teambus brief failed (exit %d): %s", code, teambus.OneLine(out, 200))
		d.note("checkpoint #%d of %s: done %s; remaining %s; last action %q; files %s", cp.Seq, t.ID,
			strings.Join(cp.TasksCompleted, ", "), strings.Join(cp.TasksRemaining, ", "), cp.LastAction, strings.Join(cp.Files, ", "))
	}
	return nil
}

// respawn starts a new incarnation of the victim, which continues the task
// from its checkpoint.
func (d *demo) respawn(ctx context.Context) error {
	victim := d.t.victim
	d.step(7, "respawn "+victim+" with a new session")
	session := victim + "-s2"
	if err := d.startTeammate(ctx, victim, session); err != nil {
		return err
	}
	_, err := d.waitFor(ctx, d.work(4), victim+" ("+session+") claimed "+demoVictimTask, func(v *team.View) bool {
		mv, t := memberOf(v, victim), taskOf(v, demoVictimTask)
		return mv != nil && mv.Session == session && t != nil && t.AssignedTo == victim && t.Epoch == mv.Epoch &&
			(t.Status == teambus.TaskInProgress || t.Status == teambus.TaskComplete)
	})
	if err != nil {
		return err
	}
	d.t.respawnClaimed = time.Now()
	if _, err := d.waitFor(ctx, d.work(d.t.victimTotal), demoVictimTask+" complete", func(v *team.View) bool {
		t := taskOf(v, demoVictimTask)
		return t != nil && t.Status == teambus.TaskComplete
	}); err != nil {
		return err
	}
	d.t.victimComplete = time.Now()
	return nil
}

// finish waits for the rest of the work, completes the team, stops the
// processes and prints the summary.
func (d *demo) finish(ctx context.Context) error {
	d.step(8, "the team finishes")
	v, err := d.waitFor(ctx, d.work(20), "every task complete", func(v *team.View) bool {
		return v.Counts[string(teambus.TaskComplete)] == len(demoTasks)
	})
	if err != nil {
		return err
	}
	d.t.end = time.Now()
	d.say("all %d tasks complete", len(demoTasks))
	if out, code := d.command(ctx, 5, "", "team", "complete", demoTeam); code != 0 {
		return fmt.Errorf("teambus team complete %s: exit %d: %s", demoTeam, code, teambus.OneLine(out, 300))
	}
	// The teammates stop on their own: an agent exits when no work is
	// left, a sidecar when its agent exits idle or the team completes.
	// The lead is stopped with SIGTERM.
	d.childMu.Lock()
	children := append([]*demoChild(nil), d.children...)
	d.childMu.Unlock()
	var running []string
	for _, ch := range children {
		if !strings.HasPrefix(ch.name, "lead") && !ch.wait(5*time.Second) {
			running = append(running, fmt.Sprintf("%s (pid %d)", ch.name, ch.pid()))
		}
	}
	if len(running) > 0 {
		d.say("still running 5s after the team completed: %s", strings.Join(running, ", "))
	} else {
		d.say("every teammate agent and sidecar has exited")
	}
	if stopped := d.terminateAll(5 * time.Second); stopped > 0 {
		d.say("stopped %d remaining process(es) with SIGTERM (the lead sidecar and agent)", stopped)
	}
	v, err = d.svc.Show(ctx, demoTeam)
	if err != nil {
		return err
	}
	return d.summary(ctx, v)
}

// summary prints the tasks, the crashes, the timings and the mailbox.
func (d *demo) summary(ctx context.Context, v *team.View) error {
	counts := map[teambus.MessageType]int{}
	total, held := 0, 0
	err := d.svc.ReplayMail(ctx, demoTeam, mailbox.ReplayFilter{IncludeHeld: true}, func(m teambus.Message) error {
		total++
		if m.Held {
			held++
		} else {
			counts[m.Type]++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the mailbox: %w", err)
	}
	d.outMu.Lock()
	defer d.outMu.Unlock()
	w := d.w
	fmt.Fprintf(w, "\n== summary\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tSTATUS\tBY\tATTEMPTS\tCRASHES\tCHECKPOINT\tCOMMIT")
	crashes := 0
	for _, t := range v.Tasks {
		cp := "-"
		if t.Checkpoint != nil {
			n := len(t.Checkpoint.TasksCompleted)
			cp = fmt.Sprintf("%d/%d steps", n, n+len(t.Checkpoint.TasksRemaining))
		}
		crashes += t.Crashes
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", t.ID, t.Status, dash(t.AssignedTo), t.Attempts, t.Crashes, cp, dash(t.Commit))
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	var mcrash []string
	for _, m := range v.Members {
		if m.CrashCount > 0 {
			mcrash = append(mcrash, fmt.Sprintf("%s %d (now epoch %d, session %s)", m.ID, m.CrashCount, m.Epoch, m.Session))
		}
	}
	pol := demoPolicy()
	fmt.Fprintf(tw, "tasks\t%d of %d complete\n", v.Counts[string(teambus.TaskComplete)], len(v.Tasks))
	fmt.Fprintf(tw, "crashes\tlead 1 (lead-1 killed, lead-2 took over at lead epoch %d); teammates: %s\n", v.Team.LeadEpoch, dash(strings.Join(mcrash, ", ")))
	beat := ""
	if !d.t.lastLeadBeat.IsZero() {
		beat = fmt.Sprintf("; %s after the last lead heartbeat", secs(d.t.firstZombie.Sub(d.t.lastLeadBeat)))
	}
	fmt.Fprintf(tw, "lead kill -> zombie\t%s first, %s all%s (lead-timeout %s)\n", secs(d.t.firstZombie.Sub(d.t.leadKill)), secs(d.t.allZombie.Sub(d.t.leadKill)), beat, pol.LeadTimeout)
	fmt.Fprintf(tw, "new lead attach\t%s from process start to lead session\n", secs(d.t.leadAttached.Sub(d.t.leadStart)))
	fmt.Fprintf(tw, "zombie -> resumed\t%s after the new lead attached\n", secs(d.t.zombieLeft.Sub(d.t.leadAttached)))
	fmt.Fprintf(tw, "teammate kill -> crashed\t%s (%s; task requeued with %d/%d steps kept)\n", secs(d.t.tmCrashed.Sub(d.t.tmKill)), d.t.victim, d.t.victimDone, d.t.victimTotal)
	fmt.Fprintf(tw, "respawn -> task done\t%s (%d steps left to do, not %d)\n", secs(d.t.victimComplete.Sub(d.t.respawnClaimed)), d.t.victimTotal-d.t.victimDone, d.t.victimTotal)
	fmt.Fprintf(tw, "total\t%s (all tasks done at %s)\n", secs(time.Since(d.start)), secs(d.t.end.Sub(d.start)))
	var types []string
	for typ, n := range counts {
		types = append(types, fmt.Sprintf("%d %s", n, typ))
	}
	sort.Strings(types)
	fmt.Fprintf(tw, "mailbox\t%d messages stored: %s; %d held in zombie mode, then released\n", total, strings.Join(types, ", "), held)
	if d.keep {
		fmt.Fprintf(tw, "audit\tteambus replay --team %s --held --dir %s   (the node is stopped: start it with `teambus bus start --dir %s`)\n", demoTeam, d.dir, d.dir)
	}
	return tw.Flush()
}

// printFailure says what failed and where the logs are.
func (d *demo) printFailure(err error) {
	d.outMu.Lock()
	defer d.outMu.Unlock()
	fmt.Fprintf(d.w, "\nDEMO FAILED at step %d (%s): %v\n", d.stepNo, d.stepName, err)
	fmt.Fprintf(d.w, "directory kept: %s\nlogs:\n", d.dir)
	d.childMu.Lock()
	defer d.childMu.Unlock()
	fmt.Fprintf(d.w, "  %-28s %s\n", "bus node", filepath.Join(d.logDir, "bus.log"))
	for _, ch := range d.children {
		fmt.Fprintf(d.w, "  %-28s %s (%s)\n", ch.name, ch.log, ch.exitText())
	}
}

// shutdown stops every process, the watchers, the connection and the node.
func (d *demo) shutdown() {
	d.terminateAll(5 * time.Second)
	if d.stopBg != nil {
		d.stopBg()
		d.bgDone.Wait()
	}
	if d.conn != nil {
		d.conn.Close()
	}
	if d.node != nil {
		_ = d.node.Close()
	}
}

// waitFor waits until cond holds for the latest view, at most limit. A
// child listed in watch that exits ends the wait early with an error. cond
// runs with d.mu held.
func (d *demo) waitFor(ctx context.Context, limit time.Duration, what string, cond func(*team.View) bool, watch ...*demoChild) (*team.View, error) {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		d.mu.Lock()
		v, ch := d.view, d.changed
		ok := v != nil && cond(v)
		d.mu.Unlock()
		if ok {
			return v, nil
		}
		for _, c := range watch {
			if c.exited() {
				return nil, fmt.Errorf("waiting for %s: %s exited (%s): see %s", what, c.name, c.exitText(), c.log)
			}
		}
		select {
		case <-ch:
		case <-time.After(100 * time.Millisecond):
		case <-timer.C:
			return nil, fmt.Errorf("timed out after %s waiting for %s", limit, what)
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		}
	}
}

// changedLocked wakes the waiters; d.mu is held.
func (d *demo) changedLocked() {
	close(d.changed)
	d.changed = make(chan struct{})
}

// watchTeam keeps the latest view of the team and narrates what changed.
// Every change to the state bucket triggers a read; a tick catches what
// only time changes (heartbeats going stale).
func (d *demo) watchTeam(ctx context.Context) {
	trigger := make(chan struct{}, 1)
	if w, err := d.svc.WatchState(ctx, demoTeam); err == nil {
		defer w.Stop()
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case _, ok := <-w.Updates():
					if !ok {
						return
					}
					select {
					case trigger <- struct{}{}:
					default:
					}
				}
			}
		}()
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if v, err := d.svc.Show(ctx, demoTeam); err == nil {
			d.mu.Lock()
			prev := d.view
			d.mu.Unlock()
			if prev != nil {
				d.narrate(prev, v)
			}
			d.mu.Lock()
			d.view = v
			d.changedLocked()
			d.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-trigger:
		case <-tick.C:
		}
	}
}

// narrate prints what changed between two views of the team.
func (d *demo) narrate(prev, v *team.View) {
	pt, t := prev.Team, v.Team
	if t.LeadSession != pt.LeadSession || t.LeadEpoch != pt.LeadEpoch {
		d.say("team records lead session %s, lead epoch %d", t.LeadSession, t.LeadEpoch)
	}
	if t.Status != pt.Status {
		d.say("team %s is %s", t.ID, t.Status)
	}
	if pt.LeadTimeoutDetectedAt == nil && t.LeadTimeoutDetectedAt != nil {
		d.say("team records lead_timeout_detected_at %s", t.LeadTimeoutDetectedAt.UTC().Format("15:04:05.000"))
	}
	if pt.LeadTimeoutDetectedAt != nil && t.LeadTimeoutDetectedAt == nil {
		d.say("the new lead cleared lead_timeout_detected_at")
	}
	for _, m := range v.Members {
		pm := memberOf(prev, m.ID)
		if pm == nil {
			continue
		}
		if m.Session != pm.Session || m.Epoch != pm.Epoch {
			d.say("%s registered: session %s, epoch %d", m.ID, m.Session, m.Epoch)
		}
		if _, ok := d.lastStatus[m.ID]; !ok && pm.Status != teambus.MemberOffline {
			d.lastStatus[m.ID] = pm.Status
		}
		if m.Status == teambus.MemberOffline {
			// A member shows offline for a moment between its registration
			// and its first heartbeat, or between a view's two reads while
			// it shuts down: only an offline that lasts is news.
			since, ok := d.offlineSince[m.ID]
			if !ok {
				d.offlineSince[m.ID] = time.Now()
			} else if !d.offline[m.ID] && time.Since(since) >= 500*time.Millisecond {
				d.offline[m.ID] = true
				d.say("%s is offline (no fresh heartbeat)", m.ID)
			}
			continue
		}
		wasOffline := d.offline[m.ID]
		delete(d.offline, m.ID)
		delete(d.offlineSince, m.ID)
		before, known := d.lastStatus[m.ID]
		d.lastStatus[m.ID] = m.Status
		if !known || (m.Status == before && !wasOffline) {
			continue
		}
		switch {
		case m.Status == before:
			d.say("%s is back online (%s)", m.ID, m.Status)
		case m.Status == teambus.MemberZombie:
			d.say("%s entered zombie mode (no lead heartbeat for lead-timeout)", m.ID)
		case before == teambus.MemberZombie:
			d.say("%s left zombie mode (%s)", m.ID, m.Status)
		case m.Status == teambus.MemberCrashed:
			d.say("%s is crashed (crash %d of crash-limit %d)", m.ID, m.CrashCount, t.Policy.CrashLimit)
		case m.Status == teambus.MemberShutdown:
			d.say("%s shut down", m.ID)
		case m.Status == teambus.MemberPaused:
			d.say("%s is paused", m.ID)
		case wasOffline:
			d.say("%s is back online (%s)", m.ID, m.Status)
		}
	}
	done := v.Counts[string(teambus.TaskComplete)]
	for _, tk := range v.Tasks {
		pk := taskOf(prev, tk.ID)
		if pk == nil || pk.Status == tk.Status {
			continue
		}
		switch tk.Status {
		case teambus.TaskAvailable:
			if pk.Status == teambus.TaskPending {
				d.say("task %s is available (its dependencies are done)", tk.ID)
			} else {
				d.say("task %s is back in the queue (%s)%s", tk.ID, tk.Status, checkpointText(tk.Checkpoint))
			}
		case teambus.TaskInProgress:
			extra := ""
			if cp := tk.Checkpoint; cp != nil && len(cp.TasksCompleted) > 0 {
				extra = fmt.Sprintf(": it continues from checkpoint #%d (%d/%d steps done)", cp.Seq, len(cp.TasksCompleted), len(cp.TasksCompleted)+len(cp.TasksRemaining))
			}
			d.say("%s claimed %s%s", tk.AssignedTo, tk.ID, extra)
		case teambus.TaskComplete:
			d.say("%s completed %s (commit %s) - %d/%d tasks done", tk.AssignedTo, tk.ID, dash(tk.Commit), done, len(v.Tasks))
		default:
			d.say("task %s is %s%s", tk.ID, tk.Status, checkpointText(tk.Checkpoint))
		}
	}
}

func checkpointText(cp *teambus.Checkpoint) string {
	if cp == nil {
		return ""
	}
	n := len(cp.TasksCompleted)
	return fmt.Sprintf(", checkpoint kept: %d/%d steps done, last action %q", n, n+len(cp.TasksRemaining), cp.LastAction)
}

// watchMail follows the mailbox, held mail included, and narrates what
// matters to the story: held and released mail, notices, probes.
func (d *demo) watchMail(ctx context.Context) {
	_ = d.svc.ReplayMail(ctx, demoTeam, mailbox.ReplayFilter{Follow: true, IncludeHeld: true}, func(m teambus.Message) error {
		key := m.From + "/" + m.ID
		d.mu.Lock()
		release := false
		switch {
		case m.Held:
			d.heldMail[key] = true
		case d.heldMail[key] && !d.released[key]:
			d.released[key] = true
			d.relSeqs = append(d.relSeqs, m.Seq)
			release = true
		}
		d.changedLocked()
		d.mu.Unlock()
		switch {
		case m.Held:
			d.say("mail #%d %s -> %s [%s] HELD (its sender is a zombie): %q", m.Seq, m.From, m.To, m.Type, teambus.OneLine(m.Body, 90))
		case release:
			d.say("mail #%d %s -> %s [%s] released: %q", m.Seq, m.From, m.To, m.Type, teambus.OneLine(m.Body, 90))
		case m.Type == teambus.MsgSystem, m.Type == teambus.MsgEscalation, m.Type == teambus.MsgStatusCheck, m.Type == teambus.MsgStatus:
			d.say("mail #%d %s -> %s [%s] %q", m.Seq, m.From, m.To, m.Type, teambus.OneLine(m.Body, 140))
		}
		return nil
	})
}

// demoChild is one process the demo started.
type demoChild struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func (c *demoChild) pid() int { return c.cmd.Process.Pid }

func (c *demoChild) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// wait waits up to d for the process to exit and reports whether it did.
func (c *demoChild) wait(d time.Duration) bool {
	select {
	case <-c.done:
		return true
	case <-time.After(d):
		return false
	}
}

// kill sends SIGKILL.
func (c *demoChild) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
}

// exitText says how the process ended, or that it runs.
func (c *demoChild) exitText() string {
	if !c.exited() {
		return "running"
	}
	var ee *exec.ExitError
	switch {
	case c.err == nil:
		return "exit 0"
	case errors.As(c.err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fmt.Sprintf("killed by signal %d (%s)", int(ws.Signal()), ws.Signal())
		}
		return fmt.Sprintf("exit %d", ee.ExitCode())
	default:
		return c.err.Error()
	}
}

// spawn starts this binary with args, its output in a log file. Lines an
// agent prints about resuming from a checkpoint are narrated too.
func (d *demo) spawn(name, logName string, args ...string) (*demoChild, error) {
	path := filepath.Join(d.logDir, logName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(d.exe, args...)
	cmd.Env = proc.CleanEnv()
	cmd.Stdout = &relay{d: d, f: f, name: name}
	cmd.Stderr = f
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &demoChild{name: name, log: path, cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		f.Close()
		close(c.done)
	}()
	d.childMu.Lock()
	d.children = append(d.children, c)
	d.childMu.Unlock()
	return c, nil
}

// terminateAll stops the running processes with SIGTERM, then SIGKILL
// after grace, and returns how many it stopped.
func (d *demo) terminateAll(grace time.Duration) int {
	d.childMu.Lock()
	children := append([]*demoChild(nil), d.children...)
	d.childMu.Unlock()
	n := 0
	for _, c := range children {
		if !c.exited() {
			_ = c.cmd.Process.Signal(syscall.SIGTERM)
			n++
		}
	}
	deadline := time.Now().Add(grace)
	for _, c := range children {
		if !c.wait(time.Until(deadline)) {
			c.kill()
			c.wait(2 * time.Second)
		}
	}
	return n
}

// cli runs this binary with args and returns its output (stdout, then
// stderr) and exit code.
func (d *demo) cli(ctx context.Context, args ...string) (string, int) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.exe, args...)
	cmd.Env = proc.CleanEnv()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		code = -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
	}
	return out.String() + errb.String(), code
}

// dieWithParent asks the kernel to kill the process when the demo dies
// (Pdeathsig, Linux only; the field does not exist elsewhere, hence
// reflection), so a killed demo leaves no sidecars behind.
func dieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	f := reflect.ValueOf(cmd.SysProcAttr).Elem().FieldByName("Pdeathsig")
	if f.IsValid() && f.CanSet() && f.Type() == reflect.TypeOf(syscall.SIGKILL) {
		f.Set(reflect.ValueOf(syscall.SIGKILL))
	}
}

// relay writes a child's output to its log and narrates the lines in which
// an agent resumes from a checkpoint and a lead sidecar attaches.
type relay struct {
	d    *demo
	f    *os.File
	name string
	part []byte
}

func (r *relay) Write(p []byte) (int, error) {
	if _, err := r.f.Write(p); err != nil {
		return 0, err
	}
	r.part = append(r.part, p...)
	for {
		i := bytes.IndexByte(r.part, '\n')
		if i < 0 {
			break
		}
		line := string(r.part[:i])
		r.part = r.part[i+1:]
		if j := strings.Index(line, ": resuming task "); j >= 0 {
			who := line
			if k := strings.IndexByte(line, ' '); k >= 0 && k < j {
				who = line[k+1 : j]
			}
			r.d.say("%s agent: %s", who, line[j+2:])
		}
		if strings.HasPrefix(line, "lead attached to team ") {
			r.d.say("%s: %s", r.name, line)
		}
	}
	return len(p), nil
}

func memberOf(v *team.View, id string) *team.MemberView {
	for i := range v.Members {
		if v.Members[i].ID == id {
			return &v.Members[i]
		}
	}
	return nil
}

func taskOf(v *team.View, id string) *teambus.Task {
	for _, t := range v.Tasks {
		if t.ID == id {
			return t
		}
	}
	return nil
}

func firstLines(s string, n int) []string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append(lines[:n], fmt.Sprintf("... (%d more lines)", len(lines)-n))
	}
	return lines
}

func joinSeqs(seqs []uint64) string {
	parts := make([]string, len(seqs))
	for i, s := range seqs {
		parts[i] = strconv.FormatUint(s, 10)
	}
	return strings.Join(parts, ", ")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
