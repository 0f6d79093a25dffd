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
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/spawn"
)

// standIn is a scripted stand-in agent for `teambus spawn --agent`: it
// appends "<session> <HOME>" to the file given as its argument, claims
// task t1 (retrying until its sidecar registered it), and then lives
// until killed — as the same process (exec), so the pid spawn reports is
// the one its sidecar watches.
const standIn = `#!/bin/sh
echo "$TEAMBUS_SESSION $HOME" >> "$1"
i=0
while [ $i -lt 200 ]; do
  if "$TEAMBUS_BIN" task claim t1 --team "$TEAMBUS_TEAM" --member "$TEAMBUS_MEMBER" --session "$TEAMBUS_SESSION" --dir "$TEAMBUS_DIR" >/dev/null 2>&1; then
    echo "claimed t1"
    break
  fi
  i=$((i+1))
  sleep 0.1
done
exec sleep 600
`

// spawnEnv is a test's bus with spawn records and hosts.
type spawnEnv struct {
	*env
	reg *spawn.Registry
}

func newSpawnEnv(t *testing.T) *spawnEnv {
	t.Helper()
	e := newEnv(t)
	conn := nodetest.Connect(t, e.node)
	reg, err := spawn.Open(context.Background(), conn.JS)
	if err != nil {
		t.Fatal(err)
	}
	return &spawnEnv{env: e, reg: reg}
}

// script writes the stand-in agent and returns its path and the file it
// records its starts in.
func (e *spawnEnv) script() (string, string) {
	e.t.Helper()
	dir := e.t.TempDir()
	path := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(path, []byte(standIn), 0o755); err != nil {
		e.t.Fatal(err)
	}
	return path, filepath.Join(dir, "starts.txt")
}

// starts returns the lines the stand-in agents appended.
func starts(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(b)), " ", "|"))
}

// host starts `teambus host --name name` with HOME home.
func (e *spawnEnv) host(name, home string, extra ...string) *child {
	e.t.Helper()
	args := append([]string{"host", "--name", name, "--ttl", "2s", "--dir", e.node.Dir(), "--log-level", "debug"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "HOME="+home, "TEAMBUS_BIN="+bin, "TEAMBUS_TEAM=", "TEAMBUS_MEMBER=", "TEAMBUS_SESSION=")
	c := e.startCmd("host-"+name, cmd)
	e.waitFor(10*time.Second, "host "+name+" registered", func() error {
		if c.exited() {
			return fmt.Errorf("host exited:\n%s", c.output())
		}
		_, err := e.reg.Host(context.Background(), name)
		return err
	})
	return c
}

// spawnCLI runs `teambus spawn` with extra environment.
func (e *spawnEnv) spawnCLI(env []string, args ...string) (string, string, int) {
	e.t.Helper()
	cmd := exec.Command(bin, append([]string{"spawn", "--dir", e.node.Dir()}, args...)...)
	cmd.Env = append(append(os.Environ(), "TEAMBUS_BIN="+bin, "TEAMBUS_TEAM=", "TEAMBUS_MEMBER=", "TEAMBUS_SESSION="), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errb.String(), 0
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	}
	e.t.Fatalf("spawn: %v", err)
	return "", "", -1
}

func (e *spawnEnv) record(teamID, member string) *spawn.Record {
	e.t.Helper()
	r, _, err := e.reg.Record(context.Background(), teamID, member)
	if err != nil {
		e.t.Fatalf("spawn record: %v", err)
	}
	return r
}

// events returns the team's events of type typ.
func (e *spawnEnv) events(teamID, typ string) []eventlog.Event {
	e.t.Helper()
	var out []eventlog.Event
	err := e.svc.Events(teamID).Replay(context.Background(), bus.EventFilter{Type: typ}, func(r *bus.EventRecord) error {
		ev := r.Event
		ev.Data = append([]byte(nil), ev.Data...)
		out = append(out, ev)
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func eventData(ev eventlog.Event) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(ev.Data, &m)
	return m
}

// waitWorking waits until member holds t1 in progress at epoch.
func (e *spawnEnv) waitWorking(teamID, member string, epoch int64, within time.Duration) {
	e.t.Helper()
	e.waitFor(within, fmt.Sprintf("%s working on t1 at epoch %d", member, epoch), func() error {
		m, _, err := e.svc.Store().Member(context.Background(), teamID, member)
		if err != nil {
			return err
		}
		tk := e.task(teamID, "t1")
		if m.Epoch != epoch || tk.AssignedTo != member || tk.Status != teambus.TaskInProgress {
			return fmt.Errorf("member epoch %d status %s; t1 %s by %q", m.Epoch, m.Status, tk.Status, tk.AssignedTo)
		}
		return nil
	})
}

func kill9(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", pid, err)
	}
}

// processes returns the pids whose command line contains every word.
func processes(words ...string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		all := true
		for _, w := range words {
			all = all && strings.Contains(cmd, w)
		}
		if all {
			out = append(out, pid)
		}
	}
	return out
}

// killSpawned kills what the spawns of the test left running (agents are
// detached from the test's process tree).
func killSpawned(t *testing.T, words ...string) {
	t.Cleanup(func() {
		for _, pid := range processes(words...) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

// Issue 25: policy respawn=auto. A stand-in agent spawned on host h1
// holds t1; kill -9 of it is detected by its sidecar, and h1 respawns the
// member once: a new incarnation reclaims t1. The next kill -9 passes the
// crash budget (crash-limit 1): t1 and the member are paused, the lead is
// escalated to once, and nothing respawns, ever.
func TestSpawn_AutoRespawn_ThenCrashBudget(t *testing.T) {
	e := newSpawnEnv(t)
	pol := fastPolicy()
	pol.Respawn, pol.CrashLimit = teambus.RespawnAuto, 1
	e.createTeam("alpha", pol, "tm1")
	e.addTask("alpha", "t1")
	e.startLead("alpha", "lead-1")
	agent, startsFile := e.script()
	killSpawned(t, agent)
	killSpawned(t, "teammate", "--team alpha", e.node.Dir())
	e.host("h1", t.TempDir())

	out, errOut, code := e.spawnCLI(nil, "--team", "alpha", "--member", "tm1", "--on", "h1", "--cwd", t.TempDir(), "--agent", agent, "--", startsFile)
	if code != 0 {
		t.Fatalf("spawn: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "on host h1") {
		t.Errorf("spawn output %q", out)
	}
	e.waitWorking("alpha", "tm1", 1, 15*time.Second)
	// A second spawn while it runs is refused: exit 3, nothing started.
	if _, errOut, code := e.spawnCLI(nil, "--team", "alpha", "--member", "tm1", "--cwd", t.TempDir(), "--agent", agent, "--", startsFile); code != teambus.ExitConflict || !strings.Contains(errOut, "runs") {
		t.Errorf("second spawn: exit %d, %q; want 3", code, errOut)
	}

	rec := e.record("alpha", "tm1")
	killedAt := time.Now()
	kill9(t, rec.PID)
	e.waitWorking("alpha", "tm1", 2, 20*time.Second)
	t.Logf("kill -9 → respawned member working again: %s", time.Since(killedAt).Round(time.Millisecond))
	m, _, _ := e.svc.Store().Member(context.Background(), "alpha", "tm1")
	if m.CrashCount != 1 {
		t.Errorf("crash count %d, want 1", m.CrashCount)
	}
	rec = e.record("alpha", "tm1")
	if rec.Respawns != 1 || rec.Host != "h1" || rec.Epoch != 1 || rec.From != spawn.FromBrief {
		t.Errorf("record after the respawn: %+v", rec)
	}
	if n := len(starts(t, startsFile)); n != 2 {
		t.Errorf("%d starts, want 2", n)
	}

	// Past the budget: paused, one escalation, no respawn.
	kill9(t, rec.PID)
	e.waitFor(15*time.Second, "tm1 paused", func() error {
		m, _, err := e.svc.Store().Member(context.Background(), "alpha", "tm1")
		if err != nil {
			return err
		}
		if m.Status != teambus.MemberPaused || e.task("alpha", "t1").Status != teambus.TaskPaused {
			return fmt.Errorf("member %s, t1 %s", m.Status, e.task("alpha", "t1").Status)
		}
		return nil
	})
	e.waitFor(15*time.Second, "one escalation", func() error {
		if n := count(e.mail("alpha"), teambus.MsgEscalation, "tm1"); n != 1 {
			return fmt.Errorf("%d escalations", n)
		}
		return nil
	})
	time.Sleep(3 * time.Second) // a respawn would have run by now
	if n := len(starts(t, startsFile)); n != 2 {
		t.Errorf("%d starts after the crash past the budget, want 2", n)
	}
	if n := len(e.events("alpha", eventlog.EvMemberRespawned)); n != 1 {
		t.Errorf("%d member.respawned events, want 1", n)
	}
	if n := count(e.mail("alpha"), teambus.MsgEscalation, "tm1"); n != 1 {
		t.Errorf("%d escalations, want 1", n)
	}
	if ev := e.events("alpha", eventlog.EvHostJoined); len(ev) != 1 {
		t.Errorf("%d host.joined events, want 1", len(ev))
	}
	if ev := e.events("alpha", eventlog.EvMemberSpawned); len(ev) != 1 || eventData(ev[0])["host"] != "h1" {
		t.Errorf("member.spawned events: %v", ev)
	}
}
