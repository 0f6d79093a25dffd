package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/spawn"
)

// scriptedAPI is a fake Messages API whose turns a test scripts: reply
// gets the n-th request's body and returns the turn to stream back (a
// tool call or text), or nil to answer nothing until the client is gone.
type scriptedAPI struct {
	mu     sync.Mutex
	bodies []string
	at     []time.Time
	reply  func(n int, body string) *turn
}

// turn is one streamed answer: a Bash call when Command is set, else the
// text.
type turn struct {
	Command string
	Text    string
}

func (f *scriptedAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/v1/messages") {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	n := len(f.bodies)
	f.bodies = append(f.bodies, string(body))
	f.at = append(f.at, time.Now())
	f.mu.Unlock()
	tu := f.reply(n, string(body))
	if tu == nil {
		<-r.Context().Done()
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	ev := func(typ string, data any) {
		raw, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, raw)
	}
	ev("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant",
		"model": "claude-sonnet-4-5", "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 10, "output_tokens": 1}}})
	stop := "end_turn"
	if tu.Command != "" {
		stop = "tool_use"
		input, _ := json.Marshal(map[string]string{"command": tu.Command, "description": "run it"})
		ev("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%02d", n), "name": "Bash", "input": map[string]any{}}})
		ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
	} else {
		ev("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": tu.Text}})
	}
	ev("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	ev("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 5}})
	ev("message_stop", map[string]any{"type": "message_stop"})
}

func (f *scriptedAPI) requests() ([]string, []time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.bodies...), append([]time.Time(nil), f.at...)
}

// serve starts f on loopback and returns its URL.
func (f *scriptedAPI) serve(t *testing.T) string {
	t.Helper()
	return serveAPI(t, f)
}

// claudeHostEnv is the environment of a host that runs the real Claude
// Code against the fake API at url, with its own HOME.
func claudeHostEnv(claude, url, home string) []string {
	return []string{"HOME=" + home, "ANTHROPIC_BASE_URL=" + url, "ANTHROPIC_API_KEY=x",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "TEAMBUS_CLAUDE_BIN=" + claude}
}

const spawnMarker = "MARKER-before-the-crash-7f3a"

// Issue 25, the real Claude Code (headless, fake Messages API): tm1 is
// spawned with task t1 on host h1. Its first turn runs a Bash call that
// echoes a marker and claims t1; at the second request (mid-task) the
// claude process is killed with -9. Its sidecar records the crash, a host
// restores the transcript the hooks carried into the bus and runs
// `claude -p --resume`: the respawned session's first request carries the
// marker from before the crash and the brief; the fake model then
// completes t1 with `teambus task complete`. t1 is complete once, tm1 had
// one new incarnation (epoch 2), its crash count is 1 and the old
// incarnation is fenced. With crossHost, h1 dies together with the
// session and the respawn runs on h2 (another HOME), still resumed.
func TestSpawn_RealClaude_RespawnResumesTranscript(t *testing.T) {
	for _, tc := range []struct {
		name      string
		crossHost bool
	}{{"same host", false}, {"across hosts", true}} {
		t.Run(tc.name, func(t *testing.T) { realClaudeRespawn(t, tc.crossHost) })
	}
}

func realClaudeRespawn(t *testing.T, crossHost bool) {
	claude := claudeBin(t)
	e := newSpawnEnv(t)
	pol := fastPolicy()
	pol.Respawn, pol.CrashLimit = teambus.RespawnAuto, 1
	e.createTeam("alpha", pol, "tm1")
	e.addTask("alpha", "t1")
	killSpawned(t, "teammate", "--team alpha", e.node.Dir())
	killSpawned(t, "--settings", e.node.Dir())

	var (
		mu         sync.Mutex
		killedAt   time.Time
		oldSession string
		h1         *child
		respawnN   = -1
	)
	api := &scriptedAPI{}
	api.reply = func(n int, body string) *turn {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case killedAt.IsZero() && n == 0:
			return &turn{Command: "echo " + spawnMarker + " && " + bin + " task claim t1"}
		case killedAt.IsZero():
			// Mid-task: the second request. Kill the claude process
			// (and with crossHost its host).
			m, _, err := e.svc.Store().Member(context.Background(), "alpha", "tm1")
			if err == nil {
				oldSession = m.Session
			}
			rec, _, err := e.reg.Record(context.Background(), "alpha", "tm1")
			if err != nil || rec.PID == 0 {
				t.Errorf("no pid to kill: %v %+v", err, rec)
				return &turn{Text: "done"}
			}
			if crossHost {
				_ = h1.cmd.Process.Kill()
			}
			killedAt = time.Now()
			kill9(t, rec.PID)
			return nil
		case respawnN < 0:
			respawnN = n
			return &turn{Command: bin + " task complete t1"}
		default:
			return &turn{Text: "t1 is complete"}
		}
	}
	url := api.serve(t)
	home1, home2 := t.TempDir(), t.TempDir()
	start := func(name, home string) *child { return e.hostCmd(name, claudeHostEnv(claude, url, home)) }
	h1 = start("h1", home1)
	if crossHost {
		start("h2", home2)
	}
	cwd := t.TempDir()
	out, errOut, code := e.spawnCLI(nil, "--team", "alpha", "--member", "tm1", "--on", "h1", "--cwd", cwd, "--", "--allowedTools", "Bash")
	if code != 0 {
		t.Fatalf("spawn: exit %d\n%s%s", code, out, errOut)
	}

	e.waitFor(120*time.Second, "t1 completed by the respawned session", func() error {
		if tk := e.task("alpha", "t1"); tk.Status != teambus.TaskComplete {
			return fmt.Errorf("t1 %s by %q", tk.Status, tk.AssignedTo)
		}
		return nil
	})
	reqs, at := api.requests()
	mu.Lock()
	n, killed := respawnN, killedAt
	mu.Unlock()
	if n < 0 || n >= len(reqs) {
		t.Fatalf("no request from a respawned session (%d requests)", len(reqs))
	}
	first := reqs[n]
	if !strings.Contains(first, spawnMarker) {
		t.Errorf("the respawned session's first request lacks the marker from before the crash:\n%s", tail(first, 3000))
	}
	// The brief: the respawn prompt, and the brief the SessionStart hook
	// injected (it names the member's incarnation).
	for _, want := range []string{"teambus restarted you", "Your task t1 went back to the queue", "in team alpha, incarnation 2"} {
		if !strings.Contains(first, want) {
			t.Errorf("the respawned session's first request lacks %q of the brief:\n%s", want, tail(first, 3000))
		}
	}
	t.Logf("agent pid exit → respawned session's first model request: %s (%d requests)", at[n].Sub(killed).Round(time.Millisecond), len(reqs))
	if testing.Verbose() {
		e.timeline(t, "alpha", killed)
	}

	// The event is appended after the record is written: wait for it,
	// then make sure it is the only one.
	e.waitFor(30*time.Second, "the task.completed event", func() error {
		if c := len(e.events("alpha", eventlog.EvTaskCompleted)); c == 0 {
			return fmt.Errorf("no task.completed event yet")
		}
		return nil
	})
	if c := len(e.events("alpha", eventlog.EvTaskCompleted)); c != 1 {
		t.Errorf("%d task.completed events, want 1", c)
	}
	m, _, err := e.svc.Store().Member(context.Background(), "alpha", "tm1")
	if err != nil {
		t.Fatal(err)
	}
	if m.Epoch != 2 || m.CrashCount != 1 {
		t.Errorf("member epoch %d crashes %d, want 2 and 1", m.Epoch, m.CrashCount)
	}
	rec := e.record("alpha", "tm1")
	wantHost := "h1"
	if crossHost {
		wantHost = "h2"
	}
	if rec.Host != wantHost || rec.From != spawn.FromTranscript || rec.Respawns != 1 {
		t.Errorf("record: host %s from %s respawns %d; want %s transcript 1", rec.Host, rec.From, rec.Respawns, wantHost)
	}
	if r := e.events("alpha", eventlog.EvMemberRespawned); len(r) != 1 || eventData(r[0])["from"] != spawn.FromTranscript {
		t.Errorf("member.respawned events: %v", r)
	}
	if r := e.events("alpha", eventlog.EvTranscriptRestored); len(r) != 1 || eventData(r[0])["ok"] != true {
		t.Errorf("transcript.restored events: %v", r)
	}
	// The old incarnation is fenced.
	if oldSession == "" {
		t.Fatal("no session of the first incarnation")
	}
	if _, errOut, code := e.run("send", "--team", "alpha", "--member", "tm1", "--session", oldSession, "--to", "lead", "from the dead"); code != teambus.ExitConflict {
		t.Errorf("send as the old incarnation: exit %d %q, want 3", code, errOut)
	}
}

// hostCmd starts a host with extra environment.
func (e *spawnEnv) hostCmd(name string, env []string) *child {
	e.t.Helper()
	args := []string{"host", "--name", name, "--ttl", "2s", "--dir", e.node.Dir(), "--log-level", "debug"}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), "TEAMBUS_BIN="+bin, "TEAMBUS_TEAM=", "TEAMBUS_MEMBER=", "TEAMBUS_SESSION="), env...)
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

// timeline logs the team's events with their times relative to t0.
func (e *spawnEnv) timeline(t *testing.T, teamID string, t0 time.Time) {
	err := e.svc.Events(teamID).Replay(context.Background(), eventlog.EventFilter{}, func(r *eventlog.EventRecord) error {
		if r.Event.TS.After(t0.Add(-time.Second)) {
			t.Logf("%+8dms %s %s %s", r.Event.TS.Sub(t0).Milliseconds(), r.Event.Type, r.Event.Agent, tail(string(r.Event.Data), 160))
		}
		return nil
	})
	if err != nil {
		t.Log(err)
	}
}
