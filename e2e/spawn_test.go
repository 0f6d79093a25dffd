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
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/spawn"
)

// standIn is a scripted stand-in agent for `teambus spawn --agent`: it
// appends "<session> <HOME>" to the file given as its argument, claims
// task t1 (retrying until its sidecar registered it; a respawned one may
// find it given back already), and then lives
// until killed — as the same process (exec), so the pid spawn reports is
// the one its sidecar watches.
const standIn = `#!/bin/sh
echo "$TEAMBUS_SESSION $HOME" >> "$1"
i=0
while [ $i -lt 200 ]; do
  out=$("$TEAMBUS_BIN" task claim t1 --team "$TEAMBUS_TEAM" --member "$TEAMBUS_MEMBER" --session "$TEAMBUS_SESSION" --dir "$TEAMBUS_DIR" 2>&1)
  rc=$?
  # A respawned incarnation may find t1 given back to it already.
  if [ $rc = 0 ] || echo "$out" | grep -q "already yours"; then
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
func (e *spawnEnv) host(name, home string) *child {
	e.t.Helper()
	return e.hostCmd(name, []string{"HOME=" + home})
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
	err := e.svc.Events(teamID).Replay(context.Background(), eventlog.EventFilter{Type: typ}, func(r *eventlog.EventRecord) error {
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
	// The headless sessions' output: both starts (the second may be
	// killed before it printed anything).
	if out, errOut, code := e.run("logs", "alpha", "tm1"); code != 0 || !strings.Contains(out, "claimed t1") || strings.Count(out, "=== teambus spawn tm1 of team alpha") != 2 {
		t.Errorf("teambus logs: exit %d %q\n%s", code, errOut, out)
	}
	if _, errOut, code := e.run("logs", "alpha", "tm9"); code != teambus.ExitPermanent || !strings.Contains(errOut, "no log of tm9") {
		t.Errorf("teambus logs of a member never spawned here: exit %d %q", code, errOut)
	}
	// team delete removes what spawn recorded.
	if _, errOut, code := e.run("team", "delete", "alpha", "--force"); code != 0 {
		t.Fatalf("team delete: exit %d %s", code, errOut)
	}
	if _, _, err := e.reg.Record(context.Background(), "alpha", "tm1"); !errors.Is(err, spawn.ErrNoRecord) {
		t.Errorf("spawn record after team delete: %v", err)
	}
}

// Issue 25: two hosts with different HOMEs on one bus. The member runs on
// h1; h1, the agent and its sidecar are killed together (-9): nobody is
// left on that machine to report the crash. h2 sees h1's registration
// expire (host.lost), judges the member crashed (its heartbeat stopped)
// and respawns it on h2, once.
func TestSpawn_HostLost_RespawnsOnAnotherHost(t *testing.T) {
	testHostLost(t, fastPolicy().Heartbeat)
}

// The same with a heartbeat slower than the host's --ttl (2s), as with
// the defaults (heartbeat 30s, ttl 10s): when h1's loss is seen, tm1's
// heartbeat is still fresh, so host.lost judges nobody; h2 judges tm1
// crashed once its heartbeat goes stale, and respawns it.
func TestSpawn_HostLost_HeartbeatSlowerThanTTL(t *testing.T) {
	testHostLost(t, 3*time.Second)
}

func testHostLost(t *testing.T, heartbeat time.Duration) {
	e := newSpawnEnv(t)
	pol := fastPolicy()
	pol.Respawn, pol.CrashLimit = teambus.RespawnAuto, 2
	pol.Heartbeat = heartbeat
	pol.MemberTimeout = max(pol.MemberTimeout, 4*heartbeat)
	pol.LeadTimeout = max(pol.LeadTimeout, 4*heartbeat)
	pol.TakeoverAfter = max(pol.TakeoverAfter, 4*heartbeat)
	e.createTeam("alpha", pol, "tm1")
	e.addTask("alpha", "t1")
	agent, startsFile := e.script()
	killSpawned(t, agent)
	killSpawned(t, "teammate", "--team alpha", e.node.Dir())
	home1, home2 := t.TempDir(), t.TempDir()
	h1 := e.host("h1", home1)
	e.host("h2", home2)
	// A second host of a name that runs is refused.
	if _, errOut, code := e.run("host", "--name", "h2"); code != teambus.ExitConflict || !strings.Contains(errOut, "already runs") {
		t.Errorf("second host h2: exit %d %q, want 3", code, errOut)
	}

	// A host that is not running: bad input (exit 2), nothing started.
	if _, errOut, code := e.spawnCLI(nil, "--team", "alpha", "--member", "tm1", "--on", "ghost", "--cwd", t.TempDir(), "--agent", agent, "--", startsFile); code != teambus.ExitPermanent || !strings.Contains(errOut, "no host ghost") {
		t.Errorf("spawn --on ghost: exit %d %q, want 2", code, errOut)
	}
	if out, errOut, code := e.spawnCLI(nil, "--team", "alpha", "--member", "tm1", "--on", "h1", "--cwd", t.TempDir(), "--agent", agent, "--", startsFile); code != 0 {
		t.Fatalf("spawn: exit %d\n%s%s", code, out, errOut)
	}
	e.waitWorking("alpha", "tm1", 1, 15*time.Second)
	rec := e.record("alpha", "tm1")
	sidecars := processes("teammate", "--member tm1", e.node.Dir())
	if len(sidecars) != 1 {
		t.Fatalf("%d sidecars of tm1, want 1", len(sidecars))
	}
	h1.kill(t)
	kill9(t, rec.PID)
	kill9(t, sidecars[0])
	killedAt := time.Now()

	e.waitWorking("alpha", "tm1", 2, 30*time.Second)
	t.Logf("host, agent and sidecar killed → member working again on h2: %s", time.Since(killedAt).Round(time.Millisecond))
	rec = e.record("alpha", "tm1")
	if rec.Host != "h2" || rec.Respawns != 1 {
		t.Errorf("record: host %q respawns %d, want h2 1", rec.Host, rec.Respawns)
	}
	st := starts(t, startsFile)
	if len(st) != 2 || !strings.HasSuffix(st[0], "|"+home1) || !strings.HasSuffix(st[1], "|"+home2) {
		t.Errorf("starts %q: want one with HOME %s, then one with HOME %s", st, home1, home2)
	}
	lost := e.events("alpha", eventlog.EvHostLost)
	judged := map[string]bool{"[tm1]": true}
	if 2*heartbeat > 2*time.Second {
		// Its heartbeat may still have been fresh when the loss was seen
		// (judged later), or already ended: the team service ends the key
		// of a sidecar whose connection closed at once.
		judged["[]"] = true
	}
	if len(lost) != 1 || eventData(lost[0])["host"] != "h1" || !judged[fmt.Sprint(eventData(lost[0])["crashed"])] {
		t.Errorf("host.lost events (want one, h1, tm1 judged crashed): %d %v", len(lost), lost)
	}
	m, _, _ := e.svc.Store().Member(context.Background(), "alpha", "tm1")
	if m.CrashCount != 1 {
		t.Errorf("crash count %d, want 1", m.CrashCount)
	}
	time.Sleep(2 * time.Second)
	if n := len(starts(t, startsFile)); n != 2 {
		t.Errorf("%d starts, want 2", n)
	}
}

// tmuxEnv is the environment of a test's own tmux server.
func tmuxEnv(t *testing.T) []string {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed (scripts/install-tmux.sh installs it)")
	}
	dir, err := os.MkdirTemp("/tmp", "tbtmux") // short: a socket path has ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"TMUX_TMPDIR=" + dir, "TMUX=", "TMUX_PANE="}
	t.Cleanup(func() {
		cmd := exec.Command("tmux", "-L", spawn.TmuxSocket, "kill-server")
		cmd.Env = append(os.Environ(), env...)
		_ = cmd.Run()
		os.RemoveAll(dir)
	})
	return env
}

func tmuxOut(t *testing.T, env []string, args ...string) (string, error) {
	cmd := exec.Command("tmux", append([]string{"-L", spawn.TmuxSocket}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Issue 25: spawn --tmux runs the (stand-in) agent in a window of the
// tmux session teambus-alpha, teambus attach attaches a terminal to it,
// and killing the window is a crash: t1 back to the queue, crash count
// 1, and with the default policy (respawn=lead) no respawn.
func TestSpawn_Tmux_AttachAndKillWindow(t *testing.T) {
	env := tmuxEnv(t)
	e := newSpawnEnv(t)
	e.createTeam("alpha", fastPolicy(), "tm1")
	e.addTask("alpha", "t1")
	agent, startsFile := e.script()
	killSpawned(t, agent)
	killSpawned(t, "teammate", "--team alpha", e.node.Dir())
	out, errOut, code := e.spawnCLI(env, "--team", "alpha", "--member", "tm1", "--tmux", "--cwd", t.TempDir(), "--agent", agent, "--", startsFile)
	if code != 0 {
		t.Fatalf("spawn --tmux: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "teambus attach alpha tm1") {
		t.Errorf("spawn output %q", out)
	}
	e.waitWorking("alpha", "tm1", 1, 15*time.Second)
	if w, err := tmuxOut(t, env, "list-windows", "-t", "teambus-alpha", "-F", "#{window_name}"); err != nil || strings.TrimSpace(w) != "tm1" {
		t.Fatalf("windows of teambus-alpha: %q %v", w, err)
	}
	if rec := e.record("alpha", "tm1"); rec.Window != "teambus-alpha:tm1" || rec.Spec.Mode != spawn.Tmux {
		t.Errorf("record %+v", rec)
	}

	// attach: a terminal (script gives it a pty) becomes a client of the
	// window.
	if _, err := exec.LookPath("script"); err != nil {
		t.Log("no `script` command (util-linux) to give teambus attach a terminal: attach not tried")
	} else {
		att := exec.Command("script", "-qfc", bin+" attach alpha tm1", "/dev/null")
		att.Env = append(os.Environ(), env...)
		attc := e.startCmd("attach", att)
		e.waitFor(10*time.Second, "a client attached", func() error {
			c, err := tmuxOut(t, env, "list-clients", "-t", "teambus-alpha", "-F", "#{session_name}")
			if err != nil || !strings.Contains(c, "teambus-alpha") {
				return fmt.Errorf("clients %q %v", c, err)
			}
			return nil
		})
		attc.kill(t)
	}
	// Without a terminal (the test's stdin): a teambus error, not tmux's.
	if _, errOut, code := e.run("attach", "alpha", "tm1"); code != teambus.ExitPermanent || !strings.Contains(errOut, "needs a terminal") {
		t.Errorf("attach without a terminal: exit %d %q", code, errOut)
	}
	if _, errOut, code := e.run("attach", "alpha", "tm9"); code != teambus.ExitPermanent || !strings.Contains(errOut, "tm9") {
		t.Errorf("attach to a member without a window: exit %d %q", code, errOut)
	}

	if o, err := tmuxOut(t, env, "kill-window", "-t", "teambus-alpha:tm1"); err != nil {
		t.Fatalf("kill-window: %v %s", err, o)
	}
	e.waitFor(15*time.Second, "the crash recorded", func() error {
		m, _, err := e.svc.Store().Member(context.Background(), "alpha", "tm1")
		if err != nil {
			return err
		}
		if m.Status != teambus.MemberCrashed || m.CrashCount != 1 || e.task("alpha", "t1").Status != teambus.TaskAvailable {
			return fmt.Errorf("member %s crashes %d, t1 %s", m.Status, m.CrashCount, e.task("alpha", "t1").Status)
		}
		return nil
	})
	time.Sleep(time.Second)
	if n := len(starts(t, startsFile)); n != 1 {
		t.Errorf("%d starts with respawn=lead, want 1", n)
	}
}

// A host stopped with Ctrl-C (SIGINT) leaves cleanly: it exits 0 and its
// registration is deleted at once, which the other hosts do not take for
// a loss.
func TestHost_CleanStopIsNoLoss(t *testing.T) {
	e := newSpawnEnv(t)
	e.createTeam("alpha", fastPolicy(), "tm1")
	h1 := e.host("h1", t.TempDir())
	e.host("h2", t.TempDir())
	if out, _, code := e.run("bus", "status"); code != 0 || !strings.Contains(out, "host h1: machine") || !strings.Contains(out, "host h2: machine") {
		t.Errorf("bus status: exit %d\n%s", code, out)
	}
	if err := h1.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := h1.exitCode(t, 10*time.Second); code != 0 {
		t.Errorf("host exit %d:\n%s", code, h1.output())
	}
	if _, err := e.reg.Host(context.Background(), "h1"); !errors.Is(err, teambus.ErrNotFound) {
		t.Errorf("h1 still registered after its clean stop: %v", err)
	}
	time.Sleep(3 * time.Second) // past the TTL: an expiry would have been seen by now
	if n := len(e.events("alpha", eventlog.EvHostLost)); n != 0 {
		t.Errorf("%d host.lost events after a clean stop", n)
	}
	if n := len(e.events("alpha", eventlog.EvHostJoined)); n != 2 {
		t.Errorf("%d host.joined events, want 2", n)
	}
}
