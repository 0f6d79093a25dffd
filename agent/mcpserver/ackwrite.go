package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
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

// pendingAck is the mail an inbox(ack:true) call returned, waiting for the
// write of the call's response.
type pendingAck struct {
	lease     Lease
	seqs      []uint64
	cancelled bool
}

// acks holds the pending acks of one connection keyed by JSON-RPC request
// id. A key exists from the Read of a tools/call to the Write of its
// response.
type acks struct {
	log *slog.Logger
	// onAck, if set, is told what was acked after a write (tests).
	onAck func(seqs []uint64, err error)

	mu      sync.Mutex
	pending map[string]*pendingAck
}

func newAcks(log *slog.Logger, onAck func([]uint64, error)) *acks {
	return &acks{log: log, onAck: onAck, pending: map[string]*pendingAck{}}
}

// idKey is the map key of a JSON-RPC id: its type and value, so the
// number 1 and the string "1" differ.
func idKey(id jsonrpc.ID) string {
	return fmt.Sprintf("%T:%v", id.Raw(), id.Raw())
}

// open starts tracking a call.
func (a *acks) open(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.pending[key]; !ok {
		a.pending[key] = &pendingAck{}
	}
}

// hold attaches leased mail to the call key. It reports false, and holds
// nothing, when the call is unknown (no wrapper) or already cancelled.
func (a *acks) hold(key string, l Lease, seqs []uint64) bool {
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

// ackTransport wraps an mcp.Transport so that the connection tags each
// tools/call with its id and acks held mail after the response's write.
type ackTransport struct {
	inner mcp.Transport
	acks  *acks
	conn  int64 // connection number: ids are unique per connection only
}

// Connect implements mcp.Transport.
func (t *ackTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &ackConn{Connection: c, acks: t.acks, prefix: fmt.Sprintf("%d/", t.conn)}, nil
}

type ackConn struct {
	mcp.Connection
	acks   *acks
	prefix string
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
		c.acks.open(key)
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
// and releases it otherwise.
func (c *ackConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		return c.Connection.Write(ctx, msg)
	}
	p := c.acks.take(c.key(resp.ID))
	err := c.Connection.Write(ctx, msg)
	if p != nil && p.lease != nil {
		ok := err == nil && resp.Error == nil && !isErrorResult(resp.Result)
		c.acks.finish(ctx, p, ok)
	}
	return err
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
