package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/teambus/teambus/node/credstore"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/agent/mcpserver"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// testPolicy is a team policy in seconds; the ack wait is long so that a
// leased message never comes back by itself during a test.
func testPolicy() teambus.Policy {
	p := teambus.DefaultPolicy()
	p.Heartbeat = 500 * time.Millisecond
	p.MemberTimeout = 2 * time.Second
	p.ProbeTimeout = time.Second
	p.LeadTimeout = 2 * time.Second
	p.TakeoverAfter = 2 * time.Second
	p.AckWait = 30 * time.Second
	return p
}

// fixture is team alpha on a real node: members tm1..tmN joined with
// sessions s-tm1..., lead session s-lead.
type fixture struct {
	t    testing.TB
	node *node.Node
	conn *bus.Conn
	svc  *team.Service
	pol  teambus.Policy
	// viaService: the node hosts the team service and each identity's
	// server runs on a teamapi.Client over that member's own credential.
	viaService bool

	mu    sync.Mutex
	creds map[string]*bus.Conn // member credential connections
}

// fixtureFunc builds a fixture with members tm1..tmN.
type fixtureFunc func(t testing.TB, members int) *fixture

// newFixture is the fixture on team.Service (team.Service.API, the
// operator's JetStream).
func newFixture(t testing.TB, members int) *fixture {
	t.Helper()
	return buildFixture(t, members, false)
}

// newClientFixture is the fixture on a node hosting the team service: each
// server calls it through a teamapi.Client with its member's credential, as
// `teambus mcp --creds` does.
func newClientFixture(t testing.TB, members int) *fixture {
	t.Helper()
	return buildFixture(t, members, true)
}

// forBackends runs test once on each backend.
func forBackends(t *testing.T, test func(t *testing.T, newF fixtureFunc)) {
	t.Run("service", func(t *testing.T) { test(t, newFixture) })
	t.Run("client", func(t *testing.T) { test(t, newClientFixture) })
}

func buildFixture(t testing.TB, members int, viaService bool) *fixture {
	t.Helper()
	var nd *node.Node
	if viaService {
		nd = nodetest.NewServer(t)
	} else {
		nd = nodetest.NewBareServer(t)
	}
	conn := nodetest.Connect(t, nd)
	f := &fixture{t: t, node: nd, conn: conn, svc: team.New(conn.JS, team.Config{}), pol: testPolicy(), viaService: viaService, creds: map[string]*bus.Conn{}}
	var specs []team.MemberSpec
	for i := 1; i <= members; i++ {
		specs = append(specs, team.MemberSpec{ID: fmt.Sprintf("tm%d", i)})
	}
	ctx := testCtx(t)
	if _, err := f.svc.CreateTeam(ctx, "alpha", "s-lead", specs, f.pol); err != nil {
		t.Fatalf("create team: %v", err)
	}
	for _, s := range specs {
		if _, err := f.svc.Join(ctx, "alpha", s.ID, "s-"+s.ID); err != nil {
			t.Fatalf("join %s: %v", s.ID, err)
		}
	}
	return f
}

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// member is the identity of member m in its joined session.
func member(m string) mcpserver.Identity {
	return mcpserver.Identity{Team: "alpha", Member: m, Session: "s-" + m}
}

// credsFile issues a credential for member m of alpha and writes it to a
// 0600 file, as `teambus team creds alpha --member m` does.
func (f *fixture) credsFile(m string) string {
	f.t.Helper()
	cr, err := credstore.IssueCreds(testCtx(f.t), f.conn, "alpha", m, []string{f.node.URL()})
	if err != nil {
		f.t.Fatalf("issue credential of %s: %v", m, err)
	}
	path := filepath.Join(f.t.TempDir(), m+".creds")
	if err := bus.WriteCreds(path, cr); err != nil {
		f.t.Fatalf("write credential of %s: %v", m, err)
	}
	return path
}

// memberConn is a connection with member m's credential, over TCP.
func (f *fixture) memberConn(m string) *bus.Conn {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.creds[m]; ok {
		return c
	}
	c, err := bus.Connect(testCtx(f.t), bus.ConnectConfig{Creds: f.credsFile(m), Timeout: 5 * time.Second})
	if err != nil {
		f.t.Fatalf("connect with the credential of %s: %v", m, err)
	}
	f.t.Cleanup(c.Close)
	f.creds[m] = c
	return c
}

// backend is the member API and team state of a server acting as id:
// team.Service, or on a service fixture a teamapi.Client on id's
// credential (tm1's without a member) and no team state.
func (f *fixture) backend(id mcpserver.Identity) (teamapi.API, *team.Service) {
	f.t.Helper()
	if !f.viaService {
		return f.svc.API(), f.svc
	}
	m := id.Member
	if m == "" {
		m = "tm1"
	}
	return f.memberAPI(m), nil
}

// memberAPI is the member API over the credential of m.
func (f *fixture) memberAPI(m string) teamapi.API {
	f.t.Helper()
	c := f.memberConn(m)
	ct, cm, _ := c.MemberOf()
	cl, err := teamapi.ForConn(c, ct, cm, "")
	if err != nil {
		f.t.Fatalf("client of %s: %v", m, err)
	}
	return cl
}

// server builds an MCP server for the fixture with cfg's gaps filled; on
// a service fixture the backend is the credential of the identity cfg
// resolves at build time.
func (f *fixture) server(cfg mcpserver.Config) *mcpserver.Server {
	f.t.Helper()
	if cfg.API == nil {
		var id mcpserver.Identity
		if cfg.Resolve != nil {
			id, _ = cfg.Resolve(testCtx(f.t))
		}
		cfg.API, cfg.Direct = f.backend(id)
	}
	s, err := mcpserver.New(cfg)
	if err != nil {
		f.t.Fatalf("new server: %v", err)
	}
	return s
}

// connect connects a client to s over in-memory transports, the server's
// side wrapped by wrap if given.
func connect(t testing.TB, s *mcpserver.Server, wrap func(mcp.Transport) mcp.Transport, copts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx := testCtx(t)
	st, ct := mcp.NewInMemoryTransports()
	var server mcp.Transport = st
	if wrap != nil {
		server = wrap(st)
	}
	ss, err := s.Connect(ctx, server)
	if err != nil {
		t.Fatalf("server connect: %v", err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, copts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatalf("client connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// connectIO connects a client to s over newline-delimited JSON pipes
// (mcp.IOTransport), as `teambus mcp` serves stdio: the path on which the
// server splices results encoded ahead. w, if set, wraps the server's
// writer.
func connectIO(t testing.TB, s *mcpserver.Server, w func(io.WriteCloser) io.WriteCloser) *mcp.ClientSession {
	t.Helper()
	ctx := testCtx(t)
	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	var out io.WriteCloser = sw
	if w != nil {
		out = w(sw)
	}
	ss, err := s.Connect(ctx, &mcp.IOTransport{Reader: sr, Writer: out})
	if err != nil {
		t.Fatalf("server connect: %v", err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, &mcp.IOTransport{Reader: cr, Writer: cw}, nil)
	if err != nil {
		t.Fatalf("client connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// client is a client of a fresh server acting as id.
func (f *fixture) client(id mcpserver.Identity) *mcp.ClientSession {
	f.t.Helper()
	return connect(f.t, f.server(mcpserver.Config{Resolve: mcpserver.StaticIdentity(id)}), nil, nil)
}

// call calls a tool and fails the test on a protocol error.
func call(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

// ok calls a tool that must succeed and decodes its structured content
// into out.
func ok(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any, out any) string {
	t.Helper()
	res := call(t, cs, name, args)
	if res.IsError {
		t.Fatalf("call %s(%v): error %s", name, args, text(res))
	}
	if out != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatalf("%s: marshal structured content: %v", name, err)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: decode structured content %s: %v", name, b, err)
		}
	}
	return text(res)
}

// fails calls a tool that must fail with an error text starting with
// prefix and containing every one of want.
func fails(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any, prefix string, want ...string) string {
	t.Helper()
	res := call(t, cs, name, args)
	got := text(res)
	if !res.IsError {
		t.Fatalf("call %s(%v): no error, got %s", name, args, got)
	}
	if !strings.HasPrefix(got, prefix) {
		t.Fatalf("call %s(%v): got %q, want prefix %q", name, args, got, prefix)
	}
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Fatalf("call %s(%v): got %q, want it to contain %q", name, args, got, w)
		}
	}
	return got
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// sendN stores n messages from tm2 to tm1 and returns their seqs.
func (f *fixture) sendN(n int, to string) []uint64 {
	f.t.Helper()
	var seqs []uint64
	for i := 0; i < n; i++ {
		res, err := f.svc.Send(testCtx(f.t), teamapi.SendRequest{Actor: member("tm2").Actor(), To: to, Body: fmt.Sprintf("message %d", i)})
		if err != nil {
			f.t.Fatalf("send: %v", err)
		}
		seqs = append(seqs, res.Seq)
	}
	return seqs
}

// unacked returns the seqs of to's unacknowledged mail, read without
// acking (every read returns it to the inbox).
func (f *fixture) unacked(to string) []uint64 {
	f.t.Helper()
	msgs, err := f.svc.Inbox(testCtx(f.t), member(to).Actor(), mailbox.InboxOptions{Max: 100})
	if err != nil {
		f.t.Fatalf("inbox of %s: %v", to, err)
	}
	var seqs []uint64
	for _, m := range msgs {
		seqs = append(seqs, m.Seq)
	}
	return seqs
}

// ackLog records what the server acked or released after writes.
type ackLog struct {
	mu     sync.Mutex
	events [][]uint64
	ch     chan []uint64
}

func newAckLog() *ackLog { return &ackLog{ch: make(chan []uint64, 16)} }

func (l *ackLog) record(acked []uint64, _ error) {
	l.mu.Lock()
	l.events = append(l.events, acked)
	l.mu.Unlock()
	l.ch <- acked
}

// next waits for the next ack (nil: a release).
func (l *ackLog) next(t testing.TB) []uint64 {
	t.Helper()
	select {
	case a := <-l.ch:
		return a
	case <-testCtx(t).Done():
		t.Fatal("no ack or release after the write")
		return nil
	}
}
