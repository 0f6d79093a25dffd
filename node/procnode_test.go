package node_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/bus/bustest"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/node/nodetest"
)

// envNodeDir makes TestHelperNodeProcess run a node in that directory:
// the test binary re-executes itself to get a node in another process.
const envNodeDir = "TEAMBUS_TEST_NODE_DIR"

// TestHelperNodeProcess is not a test: started by startNodeProcess, it runs
// a node until SIGTERM or SIGINT, as `teambus bus start` does.
func TestHelperNodeProcess(t *testing.T) {
	dir := os.Getenv(envNodeDir)
	if dir == "" {
		t.Skip("helper process for the tests that kill or stop a node")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := node.Run(ctx, node.NodeConfig{Dir: dir, Listen: "127.0.0.1:-1", MaxStore: 1 << 30, Logger: log}); err != nil {
		t.Fatal(err)
	}
}

// nodeProcess is a node running in a child process.
type nodeProcess struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	disc *bus.Discovery
	exit chan error
}

// startNodeProcess runs a node in dir in a child process and waits for
// its discovery file. The child is killed when the test ends.
func startNodeProcess(t *testing.T, dir string) *nodeProcess {
	t.Helper()
	p := &nodeProcess{out: &syncBuffer{}, exit: make(chan error, 1)}
	p.cmd = exec.Command(os.Args[0], "-test.run=^TestHelperNodeProcess$", "-test.count=1", "-test.v=false")
	p.cmd.Env = append(os.Environ(), envNodeDir+"="+dir)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exit <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exit
		if t.Failed() {
			t.Logf("node process output:\n%s", p.out.String())
		}
	})
	bustest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		select {
		case err := <-p.exit:
			p.exit <- err
			return fmt.Errorf("node process exited: %v", err)
		default:
		}
		d, err := bus.ReadDiscovery(dir)
		if err != nil {
			return err
		}
		if d.PID != p.cmd.Process.Pid {
			return fmt.Errorf("discovery file of pid %d, want %d", d.PID, p.cmd.Process.Pid)
		}
		p.disc = d
		return nil
	})
	return p
}

// wait returns the exit error of the child, failing after timeout.
func (p *nodeProcess) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case err := <-p.exit:
		p.exit <- err
		return err
	case <-time.After(timeout):
		t.Fatalf("node process %d still runs after %s", p.cmd.Process.Pid, timeout)
		return nil
	}
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

func TestStop_SIGTERM(t *testing.T) {
	dir := t.TempDir()
	p := startNodeProcess(t, dir)
	ctx := testCtx(t)

	// The running node refuses a second one, naming itself.
	_, err := node.Start(ctx, node.NodeConfig{Dir: dir, Listen: "127.0.0.1:-1"})
	if !errors.Is(err, teambus.ErrState) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", p.cmd.Process.Pid)) {
		t.Errorf("second Open = %v, want ErrState naming pid %d", err, p.cmd.Process.Pid)
	}

	if err := node.Stop(ctx, dir); err != nil {
		t.Fatalf("Stop = %v", err)
	}
	if err := p.wait(t, 5*time.Second); err != nil {
		t.Errorf("node process exit = %v, want a clean exit", err)
	}
	if !strings.Contains(p.out.String(), "bus node ready") {
		t.Errorf("node output lacks the ready line:\n%s", p.out.String())
	}
	if _, err := bus.ReadDiscovery(dir); !errors.Is(err, teambus.ErrUnavailable) {
		t.Errorf("discovery after Stop = %v, want none", err)
	}
	if err := node.Stop(ctx, dir); !errors.Is(err, teambus.ErrUnavailable) {
		t.Errorf("second Stop = %v, want ErrUnavailable", err)
	}
	nodetest.NewBareServerDir(t, dir) // the directory is free again
}

// TestNode_Kill9KeepsAckedMessages kills the node process right after the
// last acknowledged publish and checks, on a restarted node, that every
// acknowledged message is there and that dedupe still knows their ids.
func TestNode_Kill9KeepsAckedMessages(t *testing.T) {
	dir := t.TempDir()
	p := startNodeProcess(t, dir)
	ctx := testCtx(t)

	c, err := bus.Connect(ctx, bus.ConnectConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.NC.ConnectedUrl(), p.disc.URL) {
		t.Fatalf("connected to %s, want %s", c.NC.ConnectedUrl(), p.disc.URL)
	}
	_, err = c.JS.CreateStream(ctx, jetstream.StreamConfig{
		Name:       "CRASH",
		Subjects:   []string{"crash.>"},
		Storage:    jetstream.FileStorage,
		Replicas:   1,
		Discard:    jetstream.DiscardNew,
		MaxBytes:   64 << 20,
		Duplicates: 10 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	const total = 2000
	body := func(i int) string {
		return fmt.Sprintf("message %d of the kill -9 test %s", i, strings.Repeat("x", i%97))
	}
	acked := make(map[uint64]int, total) // seq -> message index
	for i := 1; i <= total; i++ {
		ack, err := c.JS.Publish(ctx, "crash.msg", []byte(body(i)), jetstream.WithMsgID(fmt.Sprintf("m-%d", i)))
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		if ack.Duplicate {
			t.Fatalf("publish %d: duplicate", i)
		}
		acked[ack.Sequence] = i
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = p.wait(t, 5*time.Second)
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("node process exit = %v, want killed", err)
	}
	c.NC.Close() // not Conn.Close: no flush towards a dead server

	// The dead node left its discovery file; Stop finds no node and cleans up.
	if err := node.Stop(ctx, dir); !errors.Is(err, teambus.ErrUnavailable) {
		t.Errorf("Stop after kill -9 = %v, want ErrUnavailable", err)
	}
	if _, err := bus.ReadDiscovery(dir); !errors.Is(err, teambus.ErrUnavailable) {
		t.Errorf("stale discovery file after Stop: %v", err)
	}

	n := nodetest.NewBareServerDir(t, dir)
	rc := nodetest.Connect(t, n)
	st, err := rc.JS.Stream(ctx, "CRASH")
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().State.Msgs; got < total {
		t.Errorf("stream holds %d messages after kill -9, want at least %d", got, total)
	}
	// Read the whole stream in one batch and check every acked seq.
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(total, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	stored := make(map[uint64]jetstream.Msg, total)
	for m := range batch.Messages() {
		md, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		stored[md.Sequence.Stream] = m
	}
	if err := batch.Error(); err != nil {
		t.Fatal(err)
	}
	missing := 0
	for seq, i := range acked {
		m, ok := stored[seq]
		if !ok {
			missing++
			if missing <= 5 {
				t.Errorf("acked message %d (seq %d) is gone", i, seq)
			}
			continue
		}
		if string(m.Data()) != body(i) || m.Headers().Get(jetstream.MsgIDHeader) != fmt.Sprintf("m-%d", i) {
			t.Errorf("seq %d = %q (id %q), want message %d", seq, m.Data(), m.Headers().Get(jetstream.MsgIDHeader), i)
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged messages lost", missing, total)
	}

	// Dedupe survives the crash: re-sending an acknowledged id is a duplicate.
	var lastSeq uint64
	for seq, i := range acked {
		if i == total {
			lastSeq = seq
		}
	}
	ack, err := rc.JS.Publish(ctx, "crash.msg", []byte("again"), jetstream.WithMsgID(fmt.Sprintf("m-%d", total)))
	if err != nil {
		t.Fatal(err)
	}
	if !ack.Duplicate || ack.Sequence != lastSeq {
		t.Errorf("re-publish of m-%d = %+v, want duplicate of seq %d", total, ack, lastSeq)
	}
}
