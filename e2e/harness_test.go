package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// bin is the teambus binary built once for the package.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "teambus-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "teambus")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/teambus").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build teambus: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// env is one test's bus node and team service.
type env struct {
	t    *testing.T
	node *node.Node
	svc  *team.Service
	logs string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	nd := nodetest.NewServer(t)
	conn := nodetest.Connect(t, nd)
	return &env{t: t, node: nd, svc: team.New(conn.JS, team.Config{}), logs: t.TempDir()}
}

// fastPolicy is a team policy in seconds.
func fastPolicy() teambus.Policy {
	p := teambus.DefaultPolicy()
	p.Heartbeat = 500 * time.Millisecond
	p.MemberTimeout = 2 * time.Second
	p.ProbeTimeout = time.Second
	p.LeadTimeout = 2 * time.Second
	p.TakeoverAfter = 2 * time.Second
	p.CheckpointEvery = time.Second
	p.AckWait = 3 * time.Second
	return p
}

func (e *env) createTeam(id string, pol teambus.Policy, members ...string) {
	e.t.Helper()
	var specs []team.MemberSpec
	for _, m := range members {
		specs = append(specs, team.MemberSpec{ID: m})
	}
	if _, err := e.svc.CreateTeam(context.Background(), id, "", specs, pol); err != nil {
		e.t.Fatalf("create team: %v", err)
	}
}

func (e *env) addTask(teamID, id string, deps ...string) {
	e.t.Helper()
	if _, err := e.svc.AddTask(context.Background(), teamID, team.TaskSpec{ID: id, Description: "task " + id, Deps: deps}); err != nil {
		e.t.Fatalf("add task %s: %v", id, err)
	}
}

// child is a process the test started.
type child struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// Pid returns the process id.
func (c *child) Pid() int { return c.cmd.Process.Pid }

// kill sends SIGKILL and waits for the exit.
func (c *child) kill(t *testing.T) {
	t.Helper()
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// exited reports whether the process has exited.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// exitCode waits for the exit and returns its code.
func (c *child) exitCode(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(within):
		t.Fatalf("%s did not exit within %s; log:\n%s", c.name, within, c.output())
	}
	var ee *exec.ExitError
	if errors.As(c.err, &ee) {
		return ee.ExitCode()
	}
	if c.err != nil {
		return -1
	}
	return 0
}

func (c *child) output() string {
	b, _ := os.ReadFile(c.log)
	return string(b)
}

// start runs the teambus binary with args against the test's node.
func (e *env) start(name string, args ...string) *child {
	e.t.Helper()
	return e.startCmd(name, exec.Command(bin, append(args, "--dir", e.node.Dir(), "--log-level", "debug")...))
}

// agent starts a stand-in agent process: it lives until killed.
func (e *env) agent(name string) *child {
	e.t.Helper()
	return e.startCmd(name, exec.Command("sleep", "600"))
}

func (e *env) startCmd(name string, cmd *exec.Cmd) *child {
	e.t.Helper()
	log := filepath.Join(e.logs, name+".log")
	f, err := os.Create(log)
	if err != nil {
		e.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		e.t.Fatalf("start %s: %v", name, err)
	}
	c := &child{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		f.Close()
		close(c.done)
	}()
	e.t.Cleanup(func() {
		if !c.exited() {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-c.done
		}
		if e.t.Failed() {
			e.t.Logf("--- %s log:\n%s", name, c.output())
		}
	})
	return c
}

// run runs a one-shot teambus command and returns stdout, stderr and the
// exit code.
func (e *env) run(args ...string) (string, string, int) {
	e.t.Helper()
	cmd := exec.Command(bin, append(args, "--dir", e.node.Dir())...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errb.String(), 0
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	default:
		e.t.Fatalf("run %v: %v", args, err)
		return "", "", -1
	}
}

// waitFor polls cond until it returns nil, failing after within.
func (e *env) waitFor(within time.Duration, what string, cond func() error) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatalf("waiting for %s: %v", what, err)
}

// memberStatus returns the member's status as users see it.
func (e *env) memberStatus(teamID, member string) teambus.MemberStatus {
	e.t.Helper()
	snap, err := e.svc.Store().Snapshot(context.Background(), teamID)
	if err != nil {
		e.t.Fatalf("snapshot: %v", err)
	}
	return snap.WorkStatus(member)
}

func (e *env) waitMemberStatus(teamID, member string, want teambus.MemberStatus, within time.Duration) {
	e.t.Helper()
	e.waitFor(within, fmt.Sprintf("%s to be %s", member, want), func() error {
		if got := e.memberStatus(teamID, member); got != want {
			return fmt.Errorf("status %s", got)
		}
		return nil
	})
}

func (e *env) task(teamID, id string) *teambus.Task {
	e.t.Helper()
	t, _, err := e.svc.Store().Task(context.Background(), teamID, id)
	if err != nil {
		e.t.Fatalf("task %s: %v", id, err)
	}
	return t
}

// mail returns the team's mailbox in seq order.
func (e *env) mail(teamID string) []teambus.Message {
	e.t.Helper()
	var out []teambus.Message
	err := e.svc.Mailbox(teamID).Replay(context.Background(), mailbox.ReplayFilter{}, func(m teambus.Message) error {
		out = append(out, m)
		return nil
	})
	if err != nil {
		e.t.Fatalf("replay: %v", err)
	}
	return out
}

// count counts messages of a type whose body contains s.
func count(msgs []teambus.Message, typ teambus.MessageType, s string) int {
	n := 0
	for _, m := range msgs {
		if m.Type == typ && strings.Contains(m.Body, s) {
			n++
		}
	}
	return n
}

// startTeammate starts an agent and its teammate sidecar and waits until
// the member is registered with the session.
func (e *env) startTeammate(teamID, member, session string) (agent, sidecar *child) {
	e.t.Helper()
	agent = e.agent(member + "-agent-" + session)
	sidecar = e.start(member+"-sidecar-"+session, "teammate", "--team", teamID, "--member", member, "--session", session, "--pid", fmt.Sprint(agent.Pid()))
	e.waitFor(10*time.Second, member+" registered", func() error {
		m, _, err := e.svc.Store().Member(context.Background(), teamID, member)
		if err != nil {
			return err
		}
		if m.Session != session || m.Status == teambus.MemberSpawned {
			return fmt.Errorf("session %q status %s", m.Session, m.Status)
		}
		if sidecar.exited() {
			return fmt.Errorf("sidecar exited:\n%s", sidecar.output())
		}
		return nil
	})
	return agent, sidecar
}

// startLead starts a lead agent and its sidecar and waits until it attached.
func (e *env) startLead(teamID, session string, extra ...string) (agent, sidecar *child) {
	e.t.Helper()
	agent = e.agent("lead-agent-" + session)
	args := append([]string{"lead", "--team", teamID, "--session", session, "--pid", fmt.Sprint(agent.Pid())}, extra...)
	sidecar = e.start("lead-sidecar-"+session, args...)
	e.waitFor(10*time.Second, "lead "+session+" attached", func() error {
		t, _, err := e.svc.Store().Team(context.Background(), teamID)
		if err != nil {
			return err
		}
		if t.LeadSession != session {
			return fmt.Errorf("lead session %q", t.LeadSession)
		}
		if sidecar.exited() {
			return fmt.Errorf("lead sidecar exited:\n%s", sidecar.output())
		}
		return nil
	})
	return agent, sidecar
}

// actor is a member acting through the service in-process.
func actor(teamID, member, session string) team.Actor {
	return team.Actor{Team: teamID, Member: member, Session: session}
}

// waitLeadBeats waits until the lead has sent n more heartbeats, as the
// team service receives them; the lead reconciles after each.
func (e *env) waitLeadBeats(teamID string, n int) {
	e.t.Helper()
	ch := make(chan *nats.Msg, 64)
	sub, err := e.svc.Store().JetStream().Conn().ChanSubscribe(teamapi.ServiceSubject(teamID, teamapi.VerbBeat), ch)
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	deadline := time.After(time.Duration(n) * 10 * time.Second)
	for i := 0; i < n; {
		select {
		case m := <-ch:
			var b teamapi.Beat
			if json.Unmarshal(m.Data, &b) == nil && b.Member == teambus.Lead && !b.Stop {
				i++
			}
		case <-deadline:
			e.t.Fatalf("waiting for %d lead heartbeats: %d seen", n, i)
		}
	}
}
