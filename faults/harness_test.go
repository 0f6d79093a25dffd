package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/bus/bustest"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node"
)

// soak reports whether the soak tier runs (TEAMBUS_SOAK=1).
func soak() bool { return os.Getenv("TEAMBUS_SOAK") == "1" }

// tier picks the fast or the soak value.
func tier[T any](fast, long T) T {
	if soak() {
		return long
	}
	return fast
}

// checkFor polls f until it returns nil; the deadline is generous, the
// tests never assert on timing.
func checkFor(t testing.TB, timeout time.Duration, f func() error) {
	t.Helper()
	bustest.CheckFor(t, timeout, 20*time.Millisecond, f)
}

// result logs a scenario's numbers in one greppable line.
func result(t testing.TB, scenario string, format string, args ...any) {
	t.Helper()
	t.Logf("RESULT %s: %s", scenario, fmt.Sprintf(format, args...))
}

// freePort returns a loopback port that was free a moment ago: a node
// restarted on it keeps its clients' URL.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// testToken is the auth token of the nodes the scenarios start.
const testToken = "faults-test-token-0123456789abcdef"

// Helper processes: the test binary re-executes itself to run a node, a
// sender or a consumer in a process the test can kill -9 or SIGSTOP.
const (
	envHelper = "TEAMBUS_FAULTS_HELPER"
	envDir    = "TEAMBUS_FAULTS_DIR"
	envListen = "TEAMBUS_FAULTS_LISTEN"
	envStore  = "TEAMBUS_FAULTS_MAX_STORE"
)

// TestHelperProcess is not a test: it is the body of the helper processes.
func TestHelperProcess(t *testing.T) {
	switch os.Getenv(envHelper) {
	case "":
		t.Skip("helper process for the fault scenarios")
	case "node":
		helperNode()
	case "sender":
		helperSender()
	case "consumer":
		helperConsumer()
	default:
		fmt.Fprintf(os.Stderr, "unknown helper %q\n", os.Getenv(envHelper))
		os.Exit(2)
	}
	os.Exit(0)
}

// helperNode runs a node until SIGTERM, as `teambus bus start` does.
func helperNode() {
	ctx, stop := signalContext()
	defer stop()
	maxStore, _ := strconv.ParseInt(os.Getenv(envStore), 10, 64)
	if maxStore == 0 {
		maxStore = 1 << 30
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	err := node.Run(ctx, node.NodeConfig{Dir: os.Getenv(envDir), Listen: os.Getenv(envListen), Token: testToken, MaxStore: maxStore, Logger: log, Attach: node.Attach(node.Config{Logger: log})})
	if err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		os.Exit(1)
	}
}

// proc is a helper process.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

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

// startHelper re-executes the test binary as helper kind with env. The
// process is killed when the test ends.
func startHelper(t testing.TB, name, kind string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1", "-test.v=false")
	cmd.Env = append(append(os.Environ(), envHelper+"="+kind), env...)
	return startProc(t, name, cmd)
}

func startProc(t testing.TB, name string, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{name: name, cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.signal(syscall.SIGCONT)
		p.kill()
		if t.Failed() {
			t.Logf("--- %s output:\n%s", name, tail(p.out.String(), 6000))
		}
	})
	return p
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) signal(sig syscall.Signal) {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(sig)
	}
}

// kill sends SIGKILL and waits for the exit.
func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	<-p.done
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitCode waits up to within for the exit and returns its code, -1 when
// killed by a signal.
func (p *proc) exitCode(t testing.TB, within time.Duration) int {
	t.Helper()
	if !p.exited() {
		select {
		case <-p.done:
		case <-time.After(within):
			t.Fatalf("%s still runs after %s; output:\n%s", p.name, within, tail(p.out.String(), 4000))
		}
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		return -1
	}
	return 0
}

// nodeProc runs a bus node in a helper process on a fixed port and store
// directory, so it can be killed and restarted under its clients.
type nodeProc struct {
	t        testing.TB
	dir      string
	listen   string
	maxStore int64
	p        *proc
	starts   int
}

func newNodeProc(t testing.TB, dir string) *nodeProc {
	return &nodeProc{t: t, dir: dir, listen: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
}

// URL is the client URL, the same across restarts.
func (n *nodeProc) URL() string { return "nats://" + n.listen }

// start runs the node and waits for its discovery file.
func (n *nodeProc) start() {
	n.t.Helper()
	n.starts++
	n.p = startHelper(n.t, fmt.Sprintf("node#%d", n.starts), "node",
		envDir+"="+n.dir, envListen+"="+n.listen, envStore+"="+strconv.FormatInt(n.maxStore, 10))
	p := n.p
	checkFor(n.t, 30*time.Second, func() error {
		if p.exited() {
			return fmt.Errorf("node exited: %v\n%s", p.err, tail(p.out.String(), 3000))
		}
		d, err := bus.ReadDiscovery(n.dir)
		if err != nil {
			return err
		}
		if d.PID != p.pid() {
			return fmt.Errorf("discovery of pid %d, want %d", d.PID, p.pid())
		}
		return nil
	})
}

// kill9 kills the node with SIGKILL and waits for the exit.
func (n *nodeProc) kill9() {
	n.p.kill()
}

// connectTCP connects over loopback TCP with the test token; the
// connection reconnects by itself across node restarts.
func connectTCP(t testing.TB, url, name string) *bus.Conn {
	t.Helper()
	var c *bus.Conn
	checkFor(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		c, err = bus.Connect(ctx, bus.ConnectConfig{Server: url, Token: testToken, Name: name, Timeout: 3 * time.Second})
		return err
	})
	t.Cleanup(func() { c.NC.Close() })
	return c
}

// scanStats counts what a scan of a stream found.
type scanStats struct {
	Messages    int
	Undecodable []uint64
}

// scanMailbox reads every message of a mailbox stream once, through an
// ordered consumer, and records each as a Stored read: the copies the
// stream holds.
func scanMailbox(ctx context.Context, js jetstream.JetStream, stream string, h *History) (scanStats, error) {
	var st scanStats
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return st, fmt.Errorf("open stream %s: %w", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return st, err
	}
	last := info.State.LastSeq
	if info.State.Msgs == 0 {
		return st, nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return st, err
	}
	for {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return st, err
		}
		n := 0
		var seq uint64
		for jm := range batch.Messages() {
			n++
			md, err := jm.Metadata()
			if err != nil {
				return st, err
			}
			seq = md.Sequence.Stream
			st.Messages++
			m, err := mailbox.DecodeMessage(jm.Data(), seq, jm.Subject())
			if err != nil {
				st.Undecodable = append(st.Undecodable, seq)
				h.Read(Read{Kind: Stored, ID: fmt.Sprintf("undecodable@%d", seq), Seq: seq})
				continue
			}
			h.Read(Read{Kind: Stored, Mailbox: m.To, ID: m.ID, Seq: seq, Digest: Digest([]byte(m.Body))})
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) {
			return st, err
		}
		if seq >= last || n == 0 {
			return st, nil
		}
	}
}

// sendBody is the body a scenario sends for id: the id itself and some
// filler, so a payload read back can be matched to what was sent.
func sendBody(id string, size int) string {
	b := []byte("msg " + id + " ")
	for len(b) < size {
		b = append(b, byte('a'+len(b)%26))
	}
	return string(b)
}

// sendOnce makes one attempt to send id and records its outcome: an ack,
// or unknown for any error (a timeout or a lost connection leaves it
// ambiguous), or failed when definite reports a definite refusal.
func sendOnce(ctx context.Context, h *History, mb *mailbox.Mailbox, from, to, id, body string, timeout time.Duration, definite func(error) bool) (mailbox.SendResult, error) {
	m := &teambus.Message{ID: id, From: from, To: to, Type: teambus.MsgInfo, Body: body}
	h.Invoke(to, id, []byte(body))
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := mb.Send(actx, m, false)
	switch {
	case err == nil:
		h.Ack(id, res.Seq, res.Duplicate)
	case definite != nil && definite(err):
		h.Fail(id)
	default:
		h.Unknown(id)
	}
	return res, err
}

// memLogger collects log records for assertions.
type memLogger struct {
	mu    sync.Mutex
	lines []string
}

func (l *memLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (l *memLogger) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// matching returns the lines that contain any of the words.
func (l *memLogger) matching(words ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		low := strings.ToLower(line)
		for _, w := range words {
			if strings.Contains(low, w) {
				out = append(out, line)
				break
			}
		}
	}
	return out
}

// teambusBinary builds cmd/teambus once per test run.
func teambusBinary(t testing.TB) string {
	t.Helper()
	return bustest.Binary(t)
}

func TestMain(m *testing.M) {
	code := m.Run()
	bustest.RemoveBinary()
	os.Exit(code)
}

// signalContext is cancelled by SIGTERM or SIGINT.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
}
