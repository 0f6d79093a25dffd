package mcpserver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/teambus/teambus/agent/mcpserver"
	"github.com/teambus/teambus/bus/bustest"
	"github.com/teambus/teambus/teamapi"
)

// TestAckAfterWrite_Acks: inbox(ack:true) acks exactly the returned
// messages, after the response was written, and nothing else.
func TestAckAfterWrite_Acks(t *testing.T) { forBackends(t, testAckAfterWriteAcks) }

func testAckAfterWriteAcks(t *testing.T, newF fixtureFunc) {
	f := newF(t, 2)
	seqs := f.sendN(5, "tm1")
	log := newAckLog()
	s := f.server(mcpserver.Config{Resolve: mcpserver.StaticIdentity(member("tm1")), OnAck: log.record})
	cs := connect(t, s, nil, nil)
	var in mcpserver.InboxOut
	ok(t, cs, "inbox", map[string]any{"ack": true, "limit": 2}, &in)
	var got []uint64
	for _, m := range in.Messages {
		got = append(got, m.Seq)
	}
	if !slices.Equal(got, seqs[:2]) {
		t.Fatalf("inbox returned %v, want %v", got, seqs[:2])
	}
	if acked := log.next(t); !slices.Equal(acked, seqs[:2]) {
		t.Fatalf("acked after write %v, want %v", acked, seqs[:2])
	}
	if left := f.unacked("tm1"); !slices.Equal(left, seqs[2:]) {
		t.Fatalf("unacked after the call %v, want %v", left, seqs[2:])
	}
}

// TestAckAfterWrite_Spliced: over pipes, as `teambus mcp` serves stdio,
// inbox results are encoded ahead and spliced into the response by the
// write, and ack after write holds the same: a written response acks
// exactly its mail, a failed write acks nothing and releases it.
func TestAckAfterWrite_Spliced(t *testing.T) { forBackends(t, testAckAfterWriteSpliced) }

func testAckAfterWriteSpliced(t *testing.T, newF fixtureFunc) {
	f := newF(t, 2)
	seqs := f.sendN(5, "tm1")
	log := newAckLog()
	logs := &spliceLog{}
	var fail atomic.Bool
	s := f.server(mcpserver.Config{Resolve: mcpserver.StaticIdentity(member("tm1")), OnAck: log.record, Logger: slog.New(logs)})
	cs := connectIO(t, s, func(w io.WriteCloser) io.WriteCloser { return &failingWriter{WriteCloser: w, fail: &fail} })
	var in mcpserver.InboxOut
	ok(t, cs, "inbox", map[string]any{"ack": true, "limit": 2}, &in)
	var got []uint64
	for _, m := range in.Messages {
		got = append(got, m.Seq)
	}
	if !slices.Equal(got, seqs[:2]) {
		t.Fatalf("inbox returned %v, want %v", got, seqs[:2])
	}
	if acked := log.next(t); !slices.Equal(acked, seqs[:2]) {
		t.Fatalf("acked after write %v, want %v", acked, seqs[:2])
	}
	logs.want(t, f, 1)
	// A peek is spliced too, and leaves the mail.
	ok(t, cs, "inbox", nil, &in)
	if len(in.Messages) != 3 {
		t.Fatalf("peek: %+v, want 3 messages", in)
	}
	logs.want(t, f, 2)

	fail.Store(true)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	go func() {
		_, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "inbox", Arguments: map[string]any{"ack": true}})
	}()
	if acked := log.next(t); acked != nil {
		t.Fatalf("acked %v although the spliced write failed", acked)
	}
	f.waitReleased(t, "tm1", seqs[2:])
}

// failingWriter fails every write once fail is set.
type failingWriter struct {
	io.WriteCloser
	fail *atomic.Bool
}

func (w *failingWriter) Write(b []byte) (int, error) {
	if w.fail.Load() {
		return 0, errors.New("broken pipe (test)")
	}
	return w.WriteCloser.Write(b)
}

// spliceLog counts the server's "response spliced" log records.
type spliceLog struct{ spliced atomic.Int64 }

func (l *spliceLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *spliceLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "response spliced" {
		l.spliced.Add(1)
	}
	return nil
}

// want waits until n responses were spliced (the record follows the
// write the client already read).
func (l *spliceLog) want(t *testing.T, f *fixture, n int64) {
	t.Helper()
	bustest.CheckFor(t, time.Duration(f.pol.AckWait)/2, 10*time.Millisecond, func() error {
		if got := l.spliced.Load(); got != n {
			return fmt.Errorf("%d responses spliced, want %d", got, n)
		}
		return nil
	})
}

func (l *spliceLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *spliceLog) WithGroup(string) slog.Handler      { return l }

// failingTransport fails the write of every response once fail is set.
type failingTransport struct {
	mcp.Transport
	fail *atomic.Bool
}

func (t failingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	return failingConn{Connection: c, fail: t.fail}, err
}

type failingConn struct {
	mcp.Connection
	fail *atomic.Bool
}

func (c failingConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if _, ok := msg.(*jsonrpc.Response); ok && c.fail.Load() {
		return errors.New("broken pipe (test)")
	}
	return c.Connection.Write(ctx, msg)
}

// waitReleased waits until the unacked mail of to is want, for at most half
// the ack wait: released mail is back at once, not redelivered after the
// ack wait. A release's Naks are flushed to the server, which hands them
// to the consumer in its own time, so the next read may come a moment
// before the last of them (CI saw [3 4] for [3 4 5]).
func (f *fixture) waitReleased(t *testing.T, to string, want []uint64) {
	t.Helper()
	bustest.CheckFor(t, time.Duration(f.pol.AckWait)/2, 20*time.Millisecond, func() error {
		if left := f.unacked(to); !slices.Equal(left, want) {
			return fmt.Errorf("unacked mail of %s %v, want %v (released, not acked)", to, left, want)
		}
		return nil
	})
}

// TestAckAfterWrite_WriteFails: when the response can not be written,
// nothing is acked and the mail is back in the inbox at once.
func TestAckAfterWrite_WriteFails(t *testing.T) { forBackends(t, testAckAfterWriteWriteFails) }

func testAckAfterWriteWriteFails(t *testing.T, newF fixtureFunc) {
	f := newF(t, 2)
	seqs := f.sendN(3, "tm1")
	log := newAckLog()
	var fail atomic.Bool
	s := f.server(mcpserver.Config{Resolve: mcpserver.StaticIdentity(member("tm1")), OnAck: log.record})
	cs := connect(t, s, func(tr mcp.Transport) mcp.Transport { return failingTransport{Transport: tr, fail: &fail} }, nil)
	fail.Store(true)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	go func() {
		_, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "inbox", Arguments: map[string]any{"ack": true}})
	}()
	if acked := log.next(t); acked != nil {
		t.Fatalf("acked %v although the response write failed", acked)
	}
	f.waitReleased(t, "tm1", seqs)
}

// holdingAPI leases for real, then holds the call until its context
// ends, so a test can cancel a call that holds mail.
type holdingAPI struct {
	teamapi.API
	leased chan []uint64
}

func (b holdingAPI) Inbox(ctx context.Context, req teamapi.InboxRequest) (teamapi.InboxReply, error) {
	res, err := b.API.Inbox(ctx, req)
	if err != nil || req.Mode != teamapi.InboxLease {
		return res, err
	}
	var seqs []uint64
	for _, m := range res.Messages {
		seqs = append(seqs, m.Seq)
	}
	b.leased <- seqs
	<-ctx.Done()
	return res, nil
}

// TestAckAfterWrite_Cancelled: a call the client cancels acks nothing;
// the mail it leased is back in the inbox.
func TestAckAfterWrite_Cancelled(t *testing.T) {
	f := newFixture(t, 2)
	seqs := f.sendN(3, "tm1")
	log := newAckLog()
	b := holdingAPI{API: f.svc.API(), leased: make(chan []uint64, 1)}
	s := f.server(mcpserver.Config{API: b, Direct: f.svc, Resolve: mcpserver.StaticIdentity(member("tm1")), OnAck: log.record})
	cs := connect(t, s, nil, nil)
	ctx, cancel := context.WithCancel(testCtx(t))
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "inbox", Arguments: map[string]any{"ack": true}})
		errc <- err
	}()
	if got := <-b.leased; !slices.Equal(got, seqs) {
		t.Fatalf("leased %v, want %v", got, seqs)
	}
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("cancelled call returned no error")
	}
	// The server releases as soon as it sees the cancellation.
	f.waitReleased(t, "tm1", seqs)
	select {
	case acked := <-log.ch:
		if acked != nil {
			t.Fatalf("a cancelled call acked %v", acked)
		}
	default:
	}
}
