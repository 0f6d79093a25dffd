package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/proc"
	"github.com/teambus/teambus/spawn"
	"github.com/teambus/teambus/team"
)

// keyRespawn is the row of a crashed member's automatic respawn.
const keyRespawn = "tb.respawn.first_request"

// respawnTrials is how many crashes the respawn section times.
func (r *run) respawnTrials() int {
	if r.cfg.Quick {
		return 1
	}
	return 3
}

// claudeBin finds the real Claude Code: TEAMBUS_CLAUDE_BIN, the one
// scripts/install-claude.sh installs (found from the working directory
// up), or claude on PATH; "" when there is none.
func claudeBin(ctx context.Context) string {
	if b := os.Getenv("TEAMBUS_CLAUDE_BIN"); b != "" {
		return b
	}
	if dir, err := os.Getwd(); err == nil {
		for {
			script := filepath.Join(dir, "scripts", "install-claude.sh")
			if _, err := os.Stat(script); err == nil {
				out, err := exec.CommandContext(ctx, script).Output()
				if err == nil {
					return strings.TrimSpace(string(out))
				}
				break
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	if p, err := exec.LookPath("claude"); err == nil {
		return p
	}
	return ""
}

// respawnAPI is a fake Messages API for the respawn trials: the first
// session's first turn claims the task with a Bash call, its second
// request is answered by killing it; a respawned session's first request
// is timed, then it completes the task and ends.
type respawnAPI struct {
	exe string
	mu  sync.Mutex
	// per trial: the session's working directory tells the trials apart
	cwd      string
	phase    int // 0 first session, 1 killed, 2 respawned answered
	kill     func() time.Time
	killedAt time.Time
	first    chan time.Time
}

func (f *respawnAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/v1/messages") {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	now := time.Now()
	f.mu.Lock()
	var cmd, text string
	switch {
	case !bytes.Contains(body, []byte(f.cwd)):
		text = "done" // a session of an earlier trial
	case f.phase == 0:
		cmd = f.exe + " task claim t1"
		f.phase = 1
	case f.phase == 1:
		if f.killedAt.IsZero() {
			kill := f.kill
			f.mu.Unlock()
			at := kill()
			f.mu.Lock()
			f.killedAt = at
			f.mu.Unlock()
			<-r.Context().Done()
			return
		}
		select {
		case f.first <- now:
		default:
		}
		cmd = f.exe + " task complete t1"
		f.phase = 2
	default:
		text = "done"
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	ev := func(typ string, data any) {
		raw, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, raw)
	}
	ev("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_1", "type": "message", "role": "assistant",
		"model": "claude-sonnet-4-5", "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 10, "output_tokens": 1}}})
	stop := "end_turn"
	if cmd != "" {
		stop = "tool_use"
		input, _ := json.Marshal(map[string]string{"command": cmd, "description": "run it"})
		ev("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": map[string]any{}}})
		ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
	} else {
		ev("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": text}})
	}
	ev("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	ev("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 5}})
	ev("message_stop", map[string]any{"type": "message_stop"})
}

// respawn times a crashed Claude Code member's automatic respawn: the
// real Claude Code, headless, against a fake Messages API, spawned on a
// `teambus host` of a team with respawn=auto, killed -9 mid-task; from
// the kill to the respawned session's first model request. Skipped when
// Claude Code is not installed.
func (r *run) respawn(ctx context.Context) error {
	const name = "agent pid exit → respawned session's first model request (fake API, headless, policy auto)"
	claude := claudeBin(ctx)
	if claude == "" {
		r.res.add(Row{Group: "detection", Key: keyRespawn, Name: name, Unit: UnitMs, Skipped: true, Note: "Claude Code is not installed (scripts/install-claude.sh)"})
		return nil
	}
	nd, svc, stop, err := r.teamNode(ctx, "node-respawn", bus.SyncModeAlways, team.Config{})
	if err != nil {
		return err
	}
	defer stop()
	conn, err := connect(ctx, nd)
	if err != nil {
		return err
	}
	defer conn.Close()
	reg, err := spawn.Open(ctx, conn.JS)
	if err != nil {
		return err
	}
	api := &respawnAPI{exe: r.cfg.Exe}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: api}
	go srv.Serve(ln)
	defer srv.Close()
	home := filepath.Join(r.dir, "respawn-home")
	if err := mkdir(home); err != nil {
		return err
	}
	env := append(proc.CleanEnv(), "HOME="+home, "ANTHROPIC_BASE_URL=http://"+ln.Addr().String(), "ANTHROPIC_API_KEY=x",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "TEAMBUS_CLAUDE_BIN="+claude)
	host, err := startEnv(r.logs, "respawn-host", r.cfg.Exe, env, "host", "--name", "bench", "--ttl", "2s", "--dir", nd.Dir(), "--log-level", "info")
	if err != nil {
		return err
	}
	defer host.stop()
	if err := poll(ctx, 15*time.Second, func() (bool, error) {
		if host.exited() {
			return false, fmt.Errorf("host exited: %s", host.output())
		}
		_, err := reg.Host(ctx, "bench")
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("host: %w", err)
	}
	pol := r.detectPolicy()
	pol.Respawn, pol.CrashLimit = teambus.RespawnAuto, 1
	var lat []time.Duration
	var pids []int
	defer func() {
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}()
	for i := 0; i < r.respawnTrials(); i++ {
		teamID := fmt.Sprintf("rs%d", i)
		if _, err := svc.CreateTeam(ctx, teamID, "", []team.MemberSpec{{ID: "tm1"}}, pol); err != nil {
			return err
		}
		if _, err := svc.AddTask(ctx, teamID, team.TaskSpec{ID: "t1", Description: "the bench task"}); err != nil {
			return err
		}
		first := make(chan time.Time, 1)
		api.mu.Lock()
		cwd := filepath.Join(r.dir, "respawn-"+teamID)
		api.cwd, api.phase, api.killedAt, api.first = cwd, 0, time.Time{}, first
		api.kill = func() time.Time {
			rec, _, err := reg.Record(ctx, teamID, "tm1")
			if err != nil || rec.PID == 0 {
				return time.Now()
			}
			at := time.Now()
			_ = syscall.Kill(rec.PID, syscall.SIGKILL)
			return at
		}
		api.mu.Unlock()
		if err := mkdir(cwd); err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, r.cfg.Exe, "spawn", "--dir", nd.Dir(), "--team", teamID, "--member", "tm1", "--on", "bench", "--cwd", cwd, "--", "--allowedTools", "Bash")
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("spawn: %v: %s", err, out.String())
		}
		select {
		case at := <-first:
			api.mu.Lock()
			killed := api.killedAt
			api.mu.Unlock()
			lat = append(lat, at.Sub(killed))
		case <-time.After(2 * time.Minute):
			return errors.New("no request from a respawned session within 2 minutes")
		case <-ctx.Done():
			return ctx.Err()
		}
		if rec, _, err := reg.Record(ctx, teamID, "tm1"); err == nil {
			pids = append(pids, rec.PID)
		}
		r.cfg.Progress("  respawn trial %d/%d: %s", i+1, r.respawnTrials(), lat[len(lat)-1].Round(time.Millisecond))
	}
	p50, p99 := ms(percentile(lat, 0.5)), ms(percentile(lat, 0.99))
	r.res.add(Row{Group: "detection", Key: keyRespawn, Name: name, Value: p50, Unit: UnitMs, P50: p50, P99: p99, N: len(lat),
		Note: "from the kill -9 of claude to the first request of the session respawned with --resume; most of it is Claude Code's own start"})
	return nil
}
