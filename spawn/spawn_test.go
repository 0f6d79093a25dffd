package spawn_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/agent/initclaude"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/spawn"
	"github.com/teambus/teambus/team"
)

func TestSpec_Validate(t *testing.T) {
	ok := spawn.Spec{Team: "alpha", Member: "tm1", Cwd: "/tmp", Mode: spawn.Headless}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid spec: %v", err)
	}
	for name, mut := range map[string]func(*spawn.Spec){
		"bad team":            func(s *spawn.Spec) { s.Team = "a.b" },
		"lead":                func(s *spawn.Spec) { s.Member = teambus.Lead },
		"no mode":             func(s *spawn.Spec) { s.Mode = "" },
		"relative cwd":        func(s *spawn.Spec) { s.Cwd = "src" },
		"prompt option":       func(s *spawn.Spec) { s.Prompt = "--dangerously-skip-permissions" },
		"no-sidecar, claude":  func(s *spawn.Spec) { s.NoSidecar = true },
		"blank agent":         func(s *spawn.Spec) { s.Agent = "  " },
		"NUL in an argument":  func(s *spawn.Spec) { s.Args = []string{"a\x00b"} },
		"host name a subject": func(s *spawn.Spec) { s.Team = "x>" },
	} {
		s := ok
		mut(&s)
		if err := s.Validate(); !errors.Is(err, teambus.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	for _, h := range []string{"a.b", "*", ">", "", "x y"} {
		if spawn.ValidateHost(h) == nil {
			t.Errorf("host %q accepted", h)
		}
	}
}

// The settings file binds every hook to the member, belongs to teambus
// (the ownership rule recognises each handler) and is private.
func TestWriteSettings(t *testing.T) {
	dir := t.TempDir()
	path, err := spawn.WriteSettings(dir, "/usr/local/bin/teambus", "alpha", "tm1", true)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(path, dir) {
		t.Errorf("settings %s outside the state dir %s", path, dir)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("settings file: %v %v", fi, err)
	}
	raw, _ := os.ReadFile(path)
	var doc struct {
		Hooks map[string][]struct {
			Hooks []json.RawMessage `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, ev := range []string{"SessionStart", "PostToolBatch", "Stop", "PreCompact", "SessionEnd"} {
		if len(doc.Hooks[ev]) == 0 {
			t.Errorf("no %s hook", ev)
		}
	}
	for ev, groups := range doc.Hooks {
		for _, g := range groups {
			for _, h := range g.Hooks {
				var hd struct{ Args []string }
				_ = json.Unmarshal(h, &hd)
				if !initclaude.IsOwned(h) || !strings.Contains(strings.Join(hd.Args, " "), "--team alpha --member tm1") {
					t.Errorf("%s handler %s", ev, h)
				}
			}
		}
	}
	if strings.Contains(string(raw), `"wait"`) {
		t.Errorf("a headless session got the idle waiter: %s", raw)
	}
}

type fixture struct {
	svc *team.Service
	reg *spawn.Registry
	dir string
}

func newFixture(t *testing.T, pol teambus.Policy) *fixture {
	t.Helper()
	nd := nodetest.NewServer(t)
	conn := nodetest.Connect(t, nd)
	svc := team.New(conn.JS, team.Config{})
	reg, err := spawn.Open(context.Background(), conn.JS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateTeam(context.Background(), "alpha", "", []team.MemberSpec{{ID: "tm1"}}, pol); err != nil {
		t.Fatal(err)
	}
	return &fixture{svc: svc, reg: reg, dir: t.TempDir()}
}

// spawner runs a harmless stand-in agent: sleep, no sidecar.
func (f *fixture) spawner(host string) *spawn.Spawner {
	return &spawn.Spawner{Reg: f.reg, Svc: f.svc, Host: host, Launcher: &spawn.Launcher{Dir: f.dir, Bin: "/bin/true"}}
}

func (f *fixture) spec(t *testing.T) spawn.Spec {
	return spawn.Spec{Team: "alpha", Member: "tm1", Cwd: t.TempDir(), Mode: spawn.Headless, Agent: "sleep 30", NoSidecar: true}
}

func reap(t *testing.T, st spawn.Started) {
	t.Cleanup(func() {
		if st.PID > 0 {
			p, _ := os.FindProcess(st.PID)
			_ = p.Kill()
			if st.Wait != nil {
				_ = st.Wait()
			}
		}
	})
}

// crash registers an incarnation of tm1 and records its crash.
func (f *fixture) crash(t *testing.T, session string) *teambus.Member {
	t.Helper()
	ctx := context.Background()
	m, err := f.svc.Join(ctx, "alpha", "tm1", session)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.MarkCrashed(ctx, "alpha", "tm1", m.Epoch, "test kill"); err != nil {
		t.Fatal(err)
	}
	m, _, _ = f.svc.Store().Member(ctx, "alpha", "tm1")
	return m
}

// A member that runs, or whose start is under way, is not started again
// without --force; a paused one not even with it.
func TestSpawn_ClaimsOneStartPerEpoch(t *testing.T) {
	f := newFixture(t, teambus.DefaultPolicy())
	ctx := context.Background()
	sp := f.spawner("")
	res, st, err := sp.Spawn(ctx, spawn.Request{Spec: f.spec(t)})
	if err != nil {
		t.Fatal(err)
	}
	reap(t, st)
	if res.Epoch != 0 || res.From != spawn.FromPrompt || res.PID == 0 {
		t.Errorf("first spawn %+v", res)
	}
	_, _, err = sp.Spawn(ctx, spawn.Request{Spec: f.spec(t)})
	if !errors.Is(err, teambus.ErrConflict) || !strings.Contains(err.Error(), "has not registered yet") {
		t.Errorf("second spawn before registration: %v, want a conflict", err)
	}
	if _, err := f.svc.Join(ctx, "alpha", "tm1", "s1"); err != nil {
		t.Fatal(err)
	}
	_, _, err = sp.Spawn(ctx, spawn.Request{Spec: f.spec(t)})
	if !errors.Is(err, teambus.ErrConflict) || !strings.Contains(err.Error(), "runs") {
		t.Errorf("spawn of a running member: %v, want a conflict", err)
	}
	_, st, err = sp.Spawn(ctx, spawn.Request{Spec: f.spec(t), Force: true})
	if err != nil {
		t.Errorf("--force: %v", err)
	}
	reap(t, st)
	rec, _, err := f.reg.Record(ctx, "alpha", "tm1")
	if err != nil || rec.Starts != 2 || rec.Epoch != 1 {
		t.Errorf("record %+v %v", rec, err)
	}
	// Paused past the crash budget (crash-limit 1): refused, even forced.
	f.crash(t, "s2")
	f.crash(t, "s3")
	if _, _, err := sp.Spawn(ctx, spawn.Request{Spec: f.spec(t), Force: true}); !errors.Is(err, teambus.ErrState) {
		t.Errorf("spawn of a paused member: %v, want ErrState", err)
	}
}

// Many hosts see one crash at once: exactly one respawns the member.
func TestRespawn_ExactlyOnceAcrossSpawners(t *testing.T) {
	pol := teambus.DefaultPolicy()
	pol.Respawn, pol.CrashLimit = teambus.RespawnAuto, 3
	f := newFixture(t, pol)
	ctx := context.Background()
	_, st, err := f.spawner("").Spawn(ctx, spawn.Request{Spec: f.spec(t)})
	if err != nil {
		t.Fatal(err)
	}
	reap(t, st)
	f.crash(t, "s1")
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins []string
	)
	for _, h := range []string{"h1", "h2", "h3", "h4", "h5", "h6"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, st, err := f.spawner(h).Respawn(ctx, "alpha", "tm1")
			if err != nil {
				t.Errorf("%s: %v", h, err)
				return
			}
			if res != nil {
				reap(t, st)
				mu.Lock()
				wins = append(wins, h)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(wins) != 1 {
		t.Fatalf("respawned by %v, want exactly one host", wins)
	}
	rec, _, _ := f.reg.Record(ctx, "alpha", "tm1")
	if rec.Respawns != 1 || rec.Host != wins[0] || rec.Epoch != 1 || rec.From != spawn.FromBrief {
		t.Errorf("record %+v", rec)
	}
	// The same crash again: nothing.
	if res, _, err := f.spawner("h1").Respawn(ctx, "alpha", "tm1"); res != nil || err != nil {
		t.Errorf("second respawn of one crash: %+v %v", res, err)
	}
}

// respawn=lead (the default) and off: hosts restart nobody.
func TestRespawn_OnlyWithPolicyAuto(t *testing.T) {
	for _, pol := range []teambus.RespawnPolicy{"", teambus.RespawnOff} {
		p := teambus.DefaultPolicy()
		p.Respawn = pol
		f := newFixture(t, p)
		_, st, err := f.spawner("").Spawn(context.Background(), spawn.Request{Spec: f.spec(t)})
		if err != nil {
			t.Fatal(err)
		}
		reap(t, st)
		f.crash(t, "s1")
		if res, _, err := f.spawner("h1").Respawn(context.Background(), "alpha", "tm1"); res != nil || err != nil {
			t.Errorf("respawn=%q: %+v %v", pol, res, err)
		}
	}
}

// Reclaim gives the requeued task to the next incarnation once it
// registers, and to nobody else.
func TestReclaim(t *testing.T) {
	pol := teambus.DefaultPolicy()
	pol.Respawn = teambus.RespawnAuto
	f := newFixture(t, pol)
	ctx := context.Background()
	if _, err := f.svc.AddTask(ctx, "alpha", team.TaskSpec{ID: "t1", Description: "task t1"}); err != nil {
		t.Fatal(err)
	}
	_, st, err := f.spawner("").Spawn(ctx, spawn.Request{Spec: f.spec(t)})
	if err != nil {
		t.Fatal(err)
	}
	reap(t, st)
	m, err := f.svc.Join(ctx, "alpha", "tm1", "s1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Claim(ctx, team.Actor{Team: "alpha", Member: "tm1", Session: "s1"}, "t1"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.MarkCrashed(ctx, "alpha", "tm1", m.Epoch, "test kill"); err != nil {
		t.Fatal(err)
	}
	res, st, err := f.spawner("h1").Respawn(ctx, "alpha", "tm1")
	if err != nil || res == nil || res.Reclaim != "t1" {
		t.Fatalf("respawn: %+v %v", res, err)
	}
	reap(t, st)
	done := make(chan bool, 1)
	go func() {
		ok, err := f.spawner("h1").Reclaim(ctx, "alpha", "tm1", res.Epoch, "t1")
		if err != nil {
			t.Error(err)
		}
		done <- ok
	}()
	time.Sleep(200 * time.Millisecond)
	if _, err := f.svc.Join(ctx, "alpha", "tm1", "s2"); err != nil {
		t.Fatal(err)
	}
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("not reclaimed")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reclaim did not return")
	}
	tk, _, _ := f.svc.Store().Task(ctx, "alpha", "t1")
	if tk.Status != teambus.TaskInProgress || tk.AssignedTo != "tm1" || tk.Epoch != 2 {
		t.Errorf("t1 %s by %s epoch %d", tk.Status, tk.AssignedTo, tk.Epoch)
	}
}

// A respawn whose start fails (here: its working directory is gone) is
// not retried in a loop: the claim stays, member.spawn_failed is logged
// and the lead is told.
func TestRespawn_FailedStartTellsTheLead(t *testing.T) {
	pol := teambus.DefaultPolicy()
	pol.Respawn = teambus.RespawnAuto
	f := newFixture(t, pol)
	ctx := context.Background()
	spec := f.spec(t)
	spec.Cwd = t.TempDir() + "/gone"
	if err := os.Mkdir(spec.Cwd, 0o700); err != nil {
		t.Fatal(err)
	}
	_, st, err := f.spawner("").Spawn(ctx, spawn.Request{Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	reap(t, st)
	f.crash(t, "s1")
	if err := os.Remove(spec.Cwd); err != nil {
		t.Fatal(err)
	}
	if res, _, err := f.spawner("h1").Respawn(ctx, "alpha", "tm1"); res != nil || !errors.Is(err, teambus.ErrInvalid) {
		t.Fatalf("respawn into a missing directory: %+v %v", res, err)
	}
	if res, _, err := f.spawner("h2").Respawn(ctx, "alpha", "tm1"); res != nil || err != nil {
		t.Errorf("second try: %+v %v, want nothing (the claim stays)", res, err)
	}
	l, err := f.svc.Mailbox("alpha").Lease(ctx, teambus.Lead, mailbox.LeaseOptions{Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	n := 0
	for _, m := range l.Messages {
		if strings.Contains(m.Body, "could not restart tm1") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d notices to the lead, want 1: %+v", n, l.Messages)
	}
}

// A requested start that fails changes nothing: a working directory
// missing on this machine is refused before the claim (no record, no
// event), and a start that fails after the claim puts the earlier record
// back as it was.
func TestSpawn_FailedStartChangesNothing(t *testing.T) {
	f := newFixture(t, teambus.DefaultPolicy())
	ctx := context.Background()
	sp := f.spawner("")
	bad := f.spec(t)
	bad.Cwd = "/nonexistent/qa"
	if _, _, err := sp.Spawn(ctx, spawn.Request{Spec: bad}); !errors.Is(err, teambus.ErrInvalid) {
		t.Fatalf("missing cwd: %v, want ErrInvalid", err)
	}
	if rec, _, err := f.reg.Record(ctx, "alpha", "tm1"); !errors.Is(err, spawn.ErrNoRecord) {
		t.Errorf("after a refused spawn: record %+v %v, want none", rec, err)
	}
	n := 0
	_ = f.svc.Events("alpha").Replay(ctx, eventlog.EventFilter{Type: "member.spawn_failed"}, func(*eventlog.EventRecord) error { n++; return nil })
	if n != 0 {
		t.Errorf("%d member.spawn_failed events for bad input", n)
	}

	// The start itself fails (no such claude): no record is left behind.
	noClaude := &spawn.Spawner{Reg: f.reg, Svc: f.svc, Launcher: &spawn.Launcher{Dir: f.dir, Bin: "/bin/true", Claude: "/nonexistent/claude"}}
	claude := spawn.Spec{Team: "alpha", Member: "tm1", Cwd: t.TempDir(), Mode: spawn.Headless}
	if _, _, err := noClaude.Spawn(ctx, spawn.Request{Spec: claude}); err == nil {
		t.Fatal("a start of a missing claude succeeded")
	}
	if rec, _, err := f.reg.Record(ctx, "alpha", "tm1"); !errors.Is(err, spawn.ErrNoRecord) {
		t.Errorf("after a failed first start: record %+v %v, want none", rec, err)
	}

	// With an earlier record, a failed forced start puts it back.
	_, st, err := sp.Spawn(ctx, spawn.Request{Spec: f.spec(t)})
	if err != nil {
		t.Fatal(err)
	}
	reap(t, st)
	before, _, err := f.reg.Record(ctx, "alpha", "tm1")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := noClaude.Spawn(ctx, spawn.Request{Spec: claude, Force: true}); err == nil {
		t.Fatal("a forced start of a missing claude succeeded")
	}
	after, _, err := f.reg.Record(ctx, "alpha", "tm1")
	if err != nil || after.Starts != before.Starts || after.Spec.Agent != before.Spec.Agent || after.PID != before.PID || after.Epoch != before.Epoch {
		t.Errorf("after a failed forced start: %+v %v, want the earlier %+v", after, err, before)
	}
}

// The pid teambus watches for an --agent that is a plain command is the
// agent itself, not a shell around it: kill -9 of that pid leaves no
// orphaned agent running beside its respawn.
func TestSpawn_AgentPidIsTheAgent(t *testing.T) {
	for agent, comm := range map[string]string{"sleep 30": "sleep", "sleep 30; true": "sh"} {
		f := newFixture(t, teambus.DefaultPolicy())
		spec := f.spec(t)
		spec.Agent = agent
		_, st, err := f.spawner("").Spawn(context.Background(), spawn.Request{Spec: spec})
		if err != nil {
			t.Fatal(err)
		}
		reap(t, st)
		var got string
		for range 3000 { // exec happens right after the start; a busy machine may take a while
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(st.PID) + "/comm")
			if got = strings.TrimSpace(string(b)); got == comm {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if got != comm {
			t.Errorf("--agent %q: pid %d is %q, want %q", agent, st.PID, got, comm)
		}
	}
}

// A tmux start puts no secret of its environment in any argv: the tmux
// client's (and the server it forks keeps it for good). The window still
// gets its identity and, from the server it started, the secret.
func TestSpawn_TmuxArgvHoldsNoSecret(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("no tmux")
	}
	f := newFixture(t, teambus.DefaultPolicy())
	dir := t.TempDir()
	socket := "teambus-test-" + strconv.Itoa(os.Getpid())
	argvLog := filepath.Join(dir, "argv")
	wrapper := filepath.Join(dir, "tmux")
	// Records each argv, then runs the real tmux on a socket of its own.
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" >> " + argvLog + "\nshift 2\nexec " + tmux + " -L " + socket + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exec.Command(tmux, "-L", socket, "kill-server").Run() })
	const secret = "s3cret-token-in-env-only"
	out := filepath.Join(dir, "seen")
	env := append(os.Environ(), "TEAMBUS_TOKEN="+secret, "TEAMBUS_PASSWORD="+secret, "TEAMBUS_SERVER=nats://127.0.0.1:1")
	sp := &spawn.Spawner{Reg: f.reg, Svc: f.svc, Launcher: &spawn.Launcher{Dir: f.dir, Bin: "/bin/true", Tmux: wrapper, Env: env}}
	spec := f.spec(t)
	spec.Mode = spawn.Tmux
	spec.Agent = `echo "$TEAMBUS_MEMBER $TEAMBUS_TOKEN" > ` + out + `; sleep 30`
	if _, _, err := sp.Spawn(context.Background(), spawn.Request{Spec: spec}); err != nil {
		t.Fatal(err)
	}
	argv, _ := os.ReadFile(argvLog)
	if strings.Contains(string(argv), secret) {
		t.Errorf("a secret in tmux's argv:\n%s", argv)
	}
	if !strings.Contains(string(argv), "TEAMBUS_MEMBER=tm1") || !strings.Contains(string(argv), "TEAMBUS_SERVER=nats://127.0.0.1:1") {
		t.Errorf("no identity in tmux's argv:\n%s", argv)
	}
	var seen []byte
	for range 3000 { // the window's shell writes it when it starts
		if seen, _ = os.ReadFile(out); len(seen) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := strings.TrimSpace(string(seen)); got != "tm1 "+secret {
		t.Errorf("the window saw %q, want its member and the secret from the environment", got)
	}
}

// An --agent session gets its first prompt (--prompt, or its brief) in a
// private file named by TEAMBUS_PROMPT_FILE.
func TestSpawn_AgentGetsItsPrompt(t *testing.T) {
	f := newFixture(t, teambus.DefaultPolicy())
	out := filepath.Join(t.TempDir(), "seen")
	spec := f.spec(t)
	spec.Prompt = "fix the tests"
	spec.Agent = `cat "$TEAMBUS_PROMPT_FILE" > ` + out + `.tmp; mv ` + out + `.tmp ` + out + `; sleep 30`
	_, st, err := f.spawner("").Spawn(context.Background(), spawn.Request{Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	reap(t, st)
	var seen []byte
	for range 3000 {
		if seen, err = os.ReadFile(out); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if string(seen) != "fix the tests" {
		t.Errorf("the agent read %q, want its --prompt", seen)
	}
	fi, err := os.Stat(spawn.PromptPath(f.dir, "alpha", "tm1"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("prompt file: %v %v, want mode 0600", fi, err)
	}
}
