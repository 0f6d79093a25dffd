package hook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/agent/binding"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// rig is a real bus node with team alpha (tm1, tm2, task t1) and a
// stand-in Claude process whose pid the hooks bind to.
type rig struct {
	t      *testing.T
	node   *node.Node
	svc    *team.Service
	state  string
	claude *exec.Cmd
	env    map[string]string
	// session is the Claude session id the payloads carry.
	session string
	// creds, when set, is the only credential the hooks hold (credsRig).
	creds string
}

func newRig(t *testing.T) *rig {
	t.Helper()
	nd := nodetest.NewBareServer(t)
	conn := nodetest.Connect(t, nd)
	r := &rig{t: t, node: nd, svc: team.New(conn.JS, team.Config{}), state: t.TempDir(), session: "91a14418-95d4-40e3-8290-20dd80416f47"}
	ctx := context.Background()
	if _, err := r.svc.CreateTeam(ctx, "alpha", "", []team.MemberSpec{{ID: "tm1"}, {ID: "tm2"}}, teambus.DefaultPolicy()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.AddTask(ctx, "alpha", team.TaskSpec{ID: "t1", Description: "build the parser"}); err != nil {
		t.Fatal(err)
	}
	r.claude = r.agent()
	r.env = map[string]string{"CLAUDE_PID": fmt.Sprint(r.claude.Process.Pid), "TEAMBUS_TEAM": "alpha", "TEAMBUS_MEMBER": "tm1"}
	return r
}

// agent starts a stand-in agent process, killed when the test ends.
func (r *rig) agent() *exec.Cmd {
	r.t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func (r *rig) pid() int { return r.claude.Process.Pid }

// payload is a captured payload of event with the rig's session id.
func (r *rig) payload(name string, set map[string]any) []byte {
	r.t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "payloads", name))
	if err != nil {
		r.t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(raw, &p); err != nil {
		r.t.Fatal(err)
	}
	p["session_id"] = r.session
	p["cwd"] = r.t.TempDir()
	for k, v := range set {
		p[k] = v
	}
	out, _ := json.Marshal(p)
	return out
}

// closeBuf is an output stream that records whether it was closed.
type closeBuf struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	closed bool
}

func (b *closeBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, os.ErrClosed
	}
	return b.buf.Write(p)
}

func (b *closeBuf) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

func (b *closeBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// result is one hook run.
type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// context is the additionalContext of the envelope, "" when stdout is
// empty; the envelope must be exactly one JSON object naming event.
func (res result) context(t *testing.T, event string) string {
	t.Helper()
	if res.stdout == "" {
		return ""
	}
	var env struct {
		HSO *struct {
			HookEventName     string `json:"hookEventName"`
			AdditionalContext string `json:"additionalContext"`
		} `json:"hookSpecificOutput"`
	}
	dec := json.NewDecoder(strings.NewReader(res.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil || env.HSO == nil {
		t.Fatalf("stdout is not an envelope: %v: %q", err, res.stdout)
	}
	if dec.More() {
		t.Fatalf("more than one JSON object on stdout: %q", res.stdout)
	}
	if env.HSO.HookEventName != event {
		t.Fatalf("hookEventName %q, want %q", env.HSO.HookEventName, event)
	}
	return env.HSO.AdditionalContext
}

// config is the hook configuration of the rig.
func (r *rig) config(event string) Config {
	env := r.env
	cc := bus.ConnectConfig{Dir: r.node.Dir()}
	if r.creds != "" {
		cc = bus.ConnectConfig{Creds: r.creds}
	}
	return Config{Event: event, StateDir: r.state, Team: env["TEAMBUS_TEAM"], Member: env["TEAMBUS_MEMBER"],
		Connect: cc, Getenv: func(k string) string { return env[k] }}
}

// run runs a hook in-process with stdin.
func (r *rig) run(cfg Config, stdin io.Reader) result {
	r.t.Helper()
	var out, errb closeBuf
	start := time.Now()
	code := Run(context.Background(), cfg, stdin, &out, &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
}

// hook runs event with its captured payload.
func (r *rig) hook(event, fixture string, set map[string]any) result {
	r.t.Helper()
	return r.run(r.config(event), bytes.NewReader(r.payload(fixture, set)))
}

// bind runs SessionStart(startup) and checks that it bound.
func (r *rig) bind() string {
	r.t.Helper()
	res := r.hook("SessionStart", "SessionStart.real-2.1.330.json", nil)
	ctx := res.context(r.t, "SessionStart")
	if res.code != 0 || res.stderr != "" || !strings.Contains(ctx, "this session is member") {
		r.t.Fatalf("SessionStart: code %d stderr %q context:\n%s\nlog:\n%s", res.code, res.stderr, ctx, r.hookLog())
	}
	return ctx
}

func (r *rig) send(from, to, body string) uint64 {
	r.t.Helper()
	res, err := r.svc.Send(context.Background(), teamapi.SendRequest{Actor: team.Actor{Team: "alpha", Member: from}, To: to, Type: teambus.MsgInfo, Body: body})
	if err != nil {
		r.t.Fatalf("send: %v", err)
	}
	return res.Seq
}

func (r *rig) binding() *binding.Binding {
	r.t.Helper()
	b, err := binding.Load(r.state, r.pid())
	if err != nil {
		r.t.Fatalf("binding: %v", err)
	}
	return b
}

func (r *rig) hookLog() string {
	b, _ := os.ReadFile(filepath.Join(r.state, "logs", "hooks.log"))
	return string(b)
}

// unread leases the member's inbox, releases it, and returns the seqs.
func (r *rig) unread(member string) []uint64 {
	r.t.Helper()
	l, err := r.svc.Mailbox("alpha").Lease(context.Background(), member, mailbox.LeaseOptions{Max: 100, Self: member})
	if err != nil {
		r.t.Fatal(err)
	}
	defer l.Release(context.Background())
	var out []uint64
	for _, m := range l.Messages {
		out = append(out, m.Seq)
	}
	return out
}
