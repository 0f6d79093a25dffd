package mcpserver_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/agent/mcpserver"
	"github.com/teambus/teambus/bus/bustest"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/teamapi"
)

// These tests run the built teambus binary as the MCP server process.

// teambusBin builds cmd/teambus once per test run.
func teambusBin(t testing.TB) string {
	t.Helper()
	return bustest.Binary(t)
}

func TestMain(m *testing.M) {
	code := m.Run()
	bustest.RemoveBinary()
	os.Exit(code)
}

// syncBuffer is a bytes.Buffer safe for a process writing while a test
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestCommand_Stdio: the built binary over mcp.CommandTransport: the
// handshake, tool calls, debug logs on stderr only, exit when stdin closes.
func TestCommand_Stdio(t *testing.T) {
	f := newFixture(t, 2)
	bin := teambusBin(t)
	var stderr syncBuffer
	cmd := exec.Command(bin, "mcp", "--dir", f.node.Dir(), "--team", "alpha", "--member", "tm1", "--session", "s-tm1", "--log-level", "debug")
	cmd.Stderr = &stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(testCtx(t), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to teambus mcp: %v (stderr: %s)", err, stderr.String())
	}
	init := cs.InitializeResult()
	if init.ServerInfo.Name != "teambus" || init.ServerInfo.Version == "" || len(strings.Split(init.Instructions, "\n")) != 5 {
		t.Fatalf("initialize: %+v, instructions %q", init.ServerInfo, init.Instructions)
	}
	seqs := f.sendN(2, "tm1")
	var in mcpserver.InboxOut
	ok(t, cs, "inbox", map[string]any{"ack": true}, &in)
	if len(in.Messages) != 2 {
		t.Fatalf("inbox: %+v", in)
	}
	bustest.CheckFor(t, f.pol.AckWait/2, 20*time.Millisecond, func() error {
		if left := f.unacked("tm1"); len(left) != 0 {
			return fmt.Errorf("unacked %v of %v after inbox(ack:true)", left, seqs)
		}
		return nil
	})
	if err := cs.Close(); err != nil {
		t.Fatalf("close (the server must exit when stdin closes): %v", err)
	}
	if !strings.Contains(stderr.String(), `msg="mcp serving"`) {
		t.Fatalf("stderr has no logs: %q", stderr.String())
	}
}

// TestCommand_StdoutOnlyJSONRPC: every line the server writes on stdout
// is a JSON-RPC message, with debug logging on and a failing tool call.
func TestCommand_StdoutOnlyJSONRPC(t *testing.T) {
	f := newFixture(t, 2)
	bin := teambusBin(t)
	cmd := exec.Command(bin, "mcp", "--dir", f.node.Dir(), "--log-level", "debug")
	cmd.Env = append(os.Environ(), "TEAMBUS_TEAM=alpha", "TEAMBUS_MEMBER=tm2", "TEAMBUS_SESSION=s-tm2")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	requests := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"send","arguments":{"to":"tm1","body":"raw"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"send","arguments":{"to":"nobody","body":"raw"}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"whoami"}}`,
	}
	for _, r := range requests {
		if _, err := io.WriteString(stdin, r+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	// Read until every call has its response, then close stdin.
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	seen := map[string]bool{}
	for len(seen) < 5 && sc.Scan() {
		line := sc.Bytes()
		msg, err := jsonrpc.DecodeMessage(line)
		if err != nil {
			t.Fatalf("stdout line is not JSON-RPC: %q: %v", line, err)
		}
		if resp, ok := msg.(*jsonrpc.Response); ok {
			seen[fmt.Sprint(resp.ID.Raw())] = true
		}
	}
	stdin.Close()
	rest, _ := io.ReadAll(stdout)
	if len(bytes.TrimSpace(rest)) > 0 {
		for _, line := range bytes.Split(bytes.TrimSpace(rest), []byte("\n")) {
			if _, err := jsonrpc.DecodeMessage(line); err != nil {
				t.Fatalf("stdout line is not JSON-RPC: %q", line)
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("teambus mcp exit after stdin closed: %v (stderr %s)", err, stderr.String())
	}
	if len(seen) != 5 {
		t.Fatalf("responses seen %v, want 5", seen)
	}
}

// TestCommand_JoinSidecar: `teambus mcp --join --sidecar` registers a new
// incarnation for its parent process and starts a teammate sidecar that
// heartbeats, detached from the MCP stdout, and stops when the parent
// exits.
func TestCommand_JoinSidecar(t *testing.T) {
	// The node runs the team service: a sidecar's beats are judged there.
	f := newClientFixture(t, 1)
	bin := teambusBin(t)
	// The parent of teambus mcp is a shell that lives as long as it; the
	// sidecar watches the shell.
	cmd := exec.Command("sh", "-c", `"$0" mcp --join --sidecar --log-level debug; exit 0`, bin)
	cmd.Env = append(os.Environ(), "TEAMBUS_DIR="+f.node.Dir(), "TEAMBUS_TEAM=alpha", "TEAMBUS_MEMBER=tm1", "TEAMBUS_SESSION=")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(testCtx(t), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v (stderr %s)", err, stderr.String())
	}
	shell := cmd.Process.Pid
	host, _ := os.Hostname()
	wantSession := fmt.Sprintf("mcp-%s-p%d", host, shell)
	var who mcpserver.WhoamiOut
	ok(t, cs, "whoami", nil, &who)
	if who.Session != wantSession || who.Epoch != 2 || who.Hint != "" {
		t.Fatalf("whoami after --join: %+v, want session %s epoch 2", who, wantSession)
	}
	m := regexp.MustCompile(`msg="mcp sidecar started" pid=(\d+) watch=(\d+)`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no sidecar start logged: %s", stderr.String())
	}
	pid, _ := strconv.Atoi(m[1])
	if m[2] != strconv.Itoa(shell) {
		t.Fatalf("sidecar watches pid %s, want the parent %d", m[2], shell)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	// The sidecar heartbeats: the member is online.
	bustest.CheckFor(t, 2*f.pol.MemberTimeout, 20*time.Millisecond, func() error {
		v, err := f.svc.Show(testCtx(t), "alpha")
		if err != nil {
			return err
		}
		if mv := v.Members[0]; !mv.Online || mv.Session != wantSession {
			return fmt.Errorf("member %+v not online in session %s", mv, wantSession)
		}
		return nil
	})
	logs, _ := filepath.Glob(filepath.Join(f.node.Dir(), "logs", "alpha", "tm1-e2.log"))
	if len(logs) != 1 {
		t.Fatalf("no sidecar log tm1-e2.log under %s", f.node.Dir())
	}
	// Closing stdin ends teambus mcp and its shell; the sidecar sees its
	// parent gone and stops.
	if err := cs.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	bustest.CheckFor(t, 2*f.pol.MemberTimeout, 20*time.Millisecond, func() error {
		if alive(pid) {
			return fmt.Errorf("sidecar %d still runs after its parent %d exited", pid, shell)
		}
		return nil
	})
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestTypeScriptClient: the official TypeScript SDK client (what Claude
// Code uses) lists the tools of two teambus mcp processes and sends,
// peeks and acks across them. It validates every tool schema: an
// any-typed field or a null free-JSON field fails it, where the Go client
// does not notice.
func TestTypeScriptClient(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: the TypeScript MCP client test needs node and npm (scripts/npm-install.sh)")
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not installed: the TypeScript MCP client test needs node and npm (scripts/npm-install.sh)")
	}
	out, err := exec.Command("bash", "../../scripts/npm-install.sh", "testdata/ts").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("scripts/npm-install.sh: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("scripts/npm-install.sh: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	src, err := os.ReadFile("testdata/ts/client.mjs")
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "client.mjs")
	if err := os.WriteFile(script, src, 0o644); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, 2)
	bin := teambusBin(t)
	cmd := exec.CommandContext(testCtx(t), "node", script, bin, "alpha")
	cmd.Env = append(os.Environ(), "TEAMBUS_DIR="+f.node.Dir())
	var stderr syncBuffer
	cmd.Stderr = &stderr
	res, err := cmd.Output()
	if err != nil {
		t.Fatalf("ts client: %v\nstderr: %s", err, stderr.String())
	}
	var got struct {
		Server struct{ Name, Version string }
		Tools  []string
		Tools2 int
		Sent   mcpserver.SendOut
		Dup    bool `json:"duplicate"`
		Peek   mcpserver.InboxOut
		Acked  mcpserver.AckOut
		After  int
		Bad    struct {
			IsError bool
			Text    string
		}
	}
	if err := json.Unmarshal(res, &got); err != nil {
		t.Fatalf("ts client output %q: %v", res, err)
	}
	if got.Server.Name != "teambus" || !slices.Equal(got.Tools, memberTools) || got.Tools2 != len(memberTools) {
		t.Fatalf("ts client: server %+v, tools %v (%d for tm2)", got.Server, got.Tools, got.Tools2)
	}
	if got.Sent.Seq == 0 || !got.Dup {
		t.Fatalf("ts client send: %+v, duplicate %v", got.Sent, got.Dup)
	}
	if len(got.Peek.Messages) != 1 || got.Peek.Messages[0].Seq != got.Sent.Seq || got.Peek.Messages[0].From != "tm2" || got.Peek.Messages[0].Body != "hello from ts" {
		t.Fatalf("ts client inbox: %+v", got.Peek)
	}
	if !slices.Equal(got.Acked.Acked, []uint64{got.Sent.Seq}) || got.After != 0 {
		t.Fatalf("ts client ack: %+v, inbox after %d", got.Acked, got.After)
	}
	if !got.Bad.IsError || !strings.HasPrefix(got.Bad.Text, "[permanent]") {
		t.Fatalf("ts client bad send: %+v", got.Bad)
	}
	// The same store as the Go side sees.
	if left := f.unacked("tm1"); len(left) != 0 {
		t.Fatalf("unacked after the ts client acked: %v", left)
	}
}

// TestCommand_Creds: the built `teambus mcp --creds FILE` of a member on a
// node hosting the team service, driven over CommandTransport: the
// credential alone names team and member; it sends, reads and acks mail
// through the service.
func TestCommand_Creds(t *testing.T) {
	f := newClientFixture(t, 2)
	bin := teambusBin(t)
	var stderr syncBuffer
	cmd := exec.Command(bin, "mcp", "--creds", f.credsFile("tm1"), "--session", "s-tm1", "--log-level", "debug")
	// No node in this state directory: the credential names the bus.
	cmd.Env = append(os.Environ(), "TEAMBUS_DIR="+t.TempDir(), "TEAMBUS_TEAM=", "TEAMBUS_MEMBER=", "TEAMBUS_SESSION=")
	cmd.Stderr = &stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(testCtx(t), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to teambus mcp --creds: %v (stderr: %s)", err, stderr.String())
	}
	var who mcpserver.WhoamiOut
	ok(t, cs, "whoami", nil, &who)
	if !who.Bound || who.Team != "alpha" || who.Member != "tm1" || who.Hint != "" {
		t.Fatalf("whoami with the credential: %+v", who)
	}
	var sent mcpserver.SendOut
	ok(t, cs, "send", map[string]any{"to": "tm2", "body": "from the credential"}, &sent)
	msgs, err := f.svc.Inbox(testCtx(t), member("tm2").Actor(), mailbox.InboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0].Seq != sent.Seq || msgs[0].From != "tm1" || msgs[0].Body != "from the credential" {
		t.Fatalf("tm2 inbox after send: %+v", msgs)
	}
	seqs := f.sendN(2, "tm1")
	var in mcpserver.InboxOut
	ok(t, cs, "inbox", map[string]any{"ack": true}, &in)
	if len(in.Messages) != 2 || in.Messages[0].Seq != seqs[0] || in.Messages[1].Seq != seqs[1] {
		t.Fatalf("inbox: %+v, want %v", in, seqs)
	}
	bustest.CheckFor(t, f.pol.AckWait/2, 20*time.Millisecond, func() error {
		if left := f.unacked("tm1"); len(left) != 0 {
			return fmt.Errorf("unacked %v of %v after inbox(ack:true)", left, seqs)
		}
		return nil
	})
	// Mail between others is not readable with this credential.
	other, err := f.svc.Send(testCtx(t), teamapi.SendRequest{Actor: member("tm2").Actor(), To: teambus.Lead, Body: "not for tm1"})
	if err != nil {
		t.Fatal(err)
	}
	fails(t, cs, "read_message", map[string]any{"seq": other.Seq}, "[permanent]", "no message")
	var msg mcpserver.MessageOut
	ok(t, cs, "read_message", map[string]any{"seq": seqs[0]}, &msg)
	if msg.Body != "message 0" {
		t.Fatalf("read_message of own mail: %+v", msg)
	}
	if err := cs.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if !strings.Contains(stderr.String(), `via="team service"`) {
		t.Fatalf("the server did not log serving via the team service: %s", stderr.String())
	}
}
