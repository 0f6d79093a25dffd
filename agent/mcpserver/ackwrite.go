package mcpserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callHeader carries the JSON-RPC id of a tools/call from the transport
// wrapper to the tool handler (in RequestExtra, never on the wire).
const callHeader = "Teambus-Call"

// ackTimeout bounds an ack or release made after a response was written.
const ackTimeout = 10 * time.Second

// pendingAck is what a call leaves for the write of its response: the
// mail an inbox(ack:true) call returned, and a result encoded ahead.
type pendingAck struct {
	lease     *lease
	seqs      []uint64
	cancelled bool
	// direct: the connection writes lines itself, so a result encoded
	// ahead can be spliced into the response (see presplice).
	direct bool
	splice *splice
}

// acks holds the pending acks of one connection keyed by JSON-RPC request
// id. A key exists from the Read of a tools/call to the Write of its
// response.
type acks struct {
	log *slog.Logger
	// onAck, if set, is told what was acked after a write (tests).
	onAck func(seqs []uint64, err error)

	// sentinel starts the placeholder strings of spliced results: random,
	// so that no id or text of a response can contain it.
	sentinel string

	mu      sync.Mutex
	pending map[string]*pendingAck
}

func newAcks(log *slog.Logger, onAck func([]uint64, error)) *acks {
	var nonce [12]byte
	_, _ = rand.Read(nonce[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return &acks{log: log, onAck: onAck, pending: map[string]*pendingAck{}, sentinel: "teambus-splice-" + hex.EncodeToString(nonce[:]) + "-"}
}

// idKey is the map key of a JSON-RPC id: its type and value, so the
// number 1 and the string "1" differ.
func idKey(id jsonrpc.ID) string {
	return fmt.Sprintf("%T:%v", id.Raw(), id.Raw())
}

// open starts tracking a call; direct says its connection can splice.
func (a *acks) open(key string, direct bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.pending[key]; !ok {
		a.pending[key] = &pendingAck{direct: direct}
	}
}

// hold attaches leased mail to the call key. It reports false, and holds
// nothing, when the call is unknown (no wrapper) or already cancelled.
func (a *acks) hold(key string, l *lease, seqs []uint64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.pending[key]
	if !ok || p.cancelled {
		return false
	}
	p.lease, p.seqs = l, seqs
	return true
}

// cancel marks a call cancelled by the client: its mail is released, not
// acked, whatever happens to the response.
func (a *acks) cancel(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p, ok := a.pending[key]; ok {
		p.cancelled = true
	}
}

// take removes and returns the call's pending entry.
func (a *acks) take(key string) *pendingAck {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.pending[key]
	delete(a.pending, key)
	return p
}

// finish acks p's mail if ok, else releases it.
func (a *acks) finish(ctx context.Context, p *pendingAck, ok bool) {
	if p == nil || p.lease == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
	defer cancel()
	if !ok || p.cancelled {
		if err := p.lease.Release(ctx); err != nil {
			a.log.Warn("release inbox lease", "seqs", p.seqs, "err", err)
		}
		if a.onAck != nil {
			a.onAck(nil, nil)
		}
		return
	}
	acked, err := p.lease.Ack(ctx, p.seqs...)
	if err != nil {
		a.log.Warn("ack after write", "seqs", p.seqs, "acked", acked, "err", err)
	}
	// Whatever could not be acked goes back at once.
	if rerr := p.lease.Release(ctx); rerr != nil {
		a.log.Warn("release inbox lease", "err", rerr)
	}
	if a.onAck != nil {
		a.onAck(acked, err)
	}
}

// releaseAll releases every pending lease of a connection (it closed).
func (a *acks) releaseAll(ctx context.Context, prefix string) {
	a.mu.Lock()
	var all []*pendingAck
	for k, p := range a.pending {
		if strings.HasPrefix(k, prefix) {
			all = append(all, p)
			delete(a.pending, k)
		}
	}
	a.mu.Unlock()
	for _, p := range all {
		a.finish(ctx, p, false)
	}
}

// A large result costs the SDK several passes over its JSON: the tool
// handler's result is marshalled with each content's own MarshalJSON,
// whose output encoding/json compacts again; the JSON-RPC layer marshals
// the result into a raw message (compacting it all once more) and the
// stdio connection marshals the response around that raw message
// (compacting it a third time). For a 50-message inbox (~120 KiB) that
// was more than half of the MCP process's CPU. So on a connection that
// writes newline-delimited JSON through an mcp.IOTransport, a result can
// be encoded ahead, once: the handler hands the SDK a placeholder whose
// text and structured content are two sentinel strings, and the write of
// the response replaces the sentinels in the SDK's encoding by the JSON
// encoded ahead. The line written is the one the SDK would have written
// (the same fields, order and escaping), and the ack-after-write rule is
// unchanged: it sees the same Write.

// splice is a result encoded ahead: its text content as a JSON string and
// its structured content as JSON, and the result itself for a response
// that does not carry the placeholder after all.
type splice struct {
	text, structured []byte
	result           *mcp.CallToolResult
}

// presplice returns the placeholder result to hand the SDK for res, the
// result of call key, and keeps res encoded for the write of the
// response. It returns res itself when the call's connection can not
// splice: not an mcp.IOTransport, or a protocol version that allows
// JSON-RPC batches (whose responses the connection collects itself).
// res has one text content and structured content.
func (a *acks) presplice(key string, session *mcp.ServerSession, res *mcp.CallToolResult) *mcp.CallToolResult {
	if session == nil {
		return res
	}
	if p := session.InitializeParams(); p == nil || p.ProtocolVersion < noBatches {
		return res
	}
	sp := encodeAhead(res)
	if sp == nil {
		return res
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.pending[key]
	if !ok || !p.direct || p.cancelled {
		return res
	}
	p.splice = sp
	return a.placeholder(res)
}

// encodeAhead encodes res's one text content and its structured content
// as the SDK would; nil if res has another shape.
func encodeAhead(res *mcp.CallToolResult) *splice {
	if len(res.Content) != 1 || res.StructuredContent == nil {
		return nil
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok || tc.Meta != nil || tc.Annotations != nil {
		return nil
	}
	text, err := json.Marshal(tc.Text)
	if err != nil {
		return nil
	}
	structured, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return nil
	}
	return &splice{text: text, structured: structured, result: res}
}

// placeholder is res with the sentinels as its text and structured
// content.
func (a *acks) placeholder(res *mcp.CallToolResult) *mcp.CallToolResult {
	ph := *res
	ph.Content = []mcp.Content{&mcp.TextContent{Text: a.sentinel + "text"}}
	ph.StructuredContent = a.sentinel + "structured"
	return &ph
}

// noBatches is the first protocol version without JSON-RPC batches.
const noBatches = "2025-06-18"

// spliced returns the line of resp, whose result is the placeholder of
// sp, with the encoded text and structured content in place of the
// sentinels; ok is false when resp does not carry both sentinels.
func (a *acks) spliced(resp *jsonrpc.Response, sp *splice) ([]byte, bool, error) {
	b, err := jsonrpc.EncodeMessage(resp)
	if err != nil {
		return nil, false, err
	}
	tq, _ := json.Marshal(a.sentinel + "text")
	sq, _ := json.Marshal(a.sentinel + "structured")
	i, j := bytes.Index(b, tq), bytes.Index(b, sq)
	if i < 0 || j < 0 || bytes.Count(b, tq) != 1 || bytes.Count(b, sq) != 1 {
		return nil, false, nil
	}
	first, second := span{i, len(tq), sp.text}, span{j, len(sq), sp.structured}
	if j < i {
		first, second = second, first
	}
	out := make([]byte, 0, len(b)+len(sp.text)+len(sp.structured)+1)
	out = append(out, b[:first.at]...)
	out = append(out, first.with...)
	out = append(out, b[first.at+first.n:second.at]...)
	out = append(out, second.with...)
	out = append(out, b[second.at+second.n:]...)
	return append(out, '\n'), true, nil
}

// span is a sentinel at `at`, n bytes long, and what replaces it.
type span struct {
	at, n int
	with  []byte
}

// lineWriter serializes whole-line writes: the SDK's connection and the
// spliced responses write through it.
type lineWriter struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(b)
}

func (w *lineWriter) Close() error { return w.w.Close() }

// ackTransport wraps an mcp.Transport so that the connection tags each
// tools/call with its id and acks held mail after the response's write.
type ackTransport struct {
	inner mcp.Transport
	acks  *acks
	conn  int64 // connection number: ids are unique per connection only
}

// Connect implements mcp.Transport. The writer of an mcp.IOTransport is
// wrapped so that the connection can write spliced responses itself.
func (t *ackTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	inner := t.inner
	var out *lineWriter
	if it, ok := inner.(*mcp.IOTransport); ok && it.Writer != nil {
		cp := *it
		out = &lineWriter{w: it.Writer}
		cp.Writer = out
		if it.Reader != nil {
			// Bad lines are answered and skipped, not the end of the
			// connection (requestFilter); it bounds the lines itself.
			cp.Reader = newRequestFilter(it.Reader, out, t.acks.log, MaxRequestLine)
			cp.MaxLineLength = -1
		}
		inner = &cp
	}
	c, err := inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &ackConn{Connection: c, acks: t.acks, prefix: fmt.Sprintf("%d/", t.conn), out: out}, nil
}

type ackConn struct {
	mcp.Connection
	acks   *acks
	prefix string
	out    *lineWriter // nil: responses are written by the inner connection only
}

func (c *ackConn) key(id jsonrpc.ID) string { return c.prefix + idKey(id) }

// Read tags tools/call requests with their id and records cancellations.
func (c *ackConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err != nil {
		return msg, err
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return msg, nil
	}
	switch {
	case req.ID.IsValid() && req.Method == "tools/call":
		key := c.key(req.ID)
		c.acks.open(key, c.out != nil)
		extra, _ := req.Extra.(*mcp.RequestExtra)
		if extra == nil {
			extra = &mcp.RequestExtra{}
			req.Extra = extra
		}
		if extra.Header == nil {
			extra.Header = http.Header{}
		}
		extra.Header.Set(callHeader, key)
	case !req.ID.IsValid() && req.Method == "notifications/cancelled":
		var p struct {
			RequestID any `json:"requestId"`
		}
		if json.Unmarshal(req.Params, &p) == nil {
			if id, err := jsonrpc.MakeID(p.RequestID); err == nil && id.IsValid() {
				c.acks.cancel(c.key(id))
			}
		}
	}
	return msg, nil
}

// Write writes a message; for the response of a call that holds mail it
// acks the mail when the write succeeded and the result is not an error,
// and releases it otherwise. A response carrying a placeholder is written
// with the result encoded ahead spliced in.
func (c *ackConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		return c.Connection.Write(ctx, msg)
	}
	p := c.acks.take(c.key(resp.ID))
	var err error
	if p != nil && p.splice != nil && resp.Error == nil && c.out != nil {
		err = c.writeSpliced(ctx, resp, p.splice)
	} else {
		err = c.Connection.Write(ctx, msg)
	}
	if p != nil && p.lease != nil {
		ok := err == nil && resp.Error == nil && !isErrorResult(resp.Result)
		c.acks.finish(ctx, p, ok)
	}
	return err
}

// writeSpliced writes resp with sp spliced in. A response without the
// placeholder (the SDK answered otherwise, say with an error result) is
// written as it is, or, if it is not an error, with sp's result encoded
// as the SDK would.
func (c *ackConn) writeSpliced(ctx context.Context, resp *jsonrpc.Response, sp *splice) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	line, ok, err := c.acks.spliced(resp, sp)
	if err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	if ok {
		_, err = c.out.Write(line)
		c.acks.log.Debug("response spliced", "bytes", len(line), "err", err)
		return err
	}
	if isErrorResult(resp.Result) {
		return c.Connection.Write(ctx, resp)
	}
	c.acks.log.Warn("response without the placeholder: encoding the result again")
	raw, err := json.Marshal(sp.result)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	cp := *resp
	cp.Result = raw
	return c.Connection.Write(ctx, &cp)
}

// Close releases every lease still pending, then closes the connection.
func (c *ackConn) Close() error {
	c.acks.releaseAll(context.Background(), c.prefix)
	return c.Connection.Close()
}

func isErrorResult(raw json.RawMessage) bool {
	var r struct {
		IsError bool `json:"isError"`
	}
	return json.Unmarshal(raw, &r) != nil || r.IsError
}
