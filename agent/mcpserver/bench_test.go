package mcpserver_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/teambus/teambus/agent/mcpserver"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// The numbers of issue 14: a send tool call round trip through a running
// `teambus mcp` process against a direct in-process send of the same
// message, and the p50 of an inbox call returning 50 messages. They are
// measured here and reported in the README; no test asserts timing.

const benchBody = "a status line of about a hundred bytes, as agents send them: task t1 done, tests green, next t2"

// BenchmarkSend_Direct is team.Service.Send in process (in-process
// connection to the node).
func BenchmarkSend_Direct(b *testing.B) {
	f := newFixture(b, 2)
	ctx := context.Background()
	a := member("tm2").Actor()
	d := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: a, To: "tm1", Body: benchBody}); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(start))
	}
	p50(b, d)
}

// BenchmarkSend_DirectTCP is team.Service.Send over a loopback TCP
// connection, as the teambus mcp process connects.
func BenchmarkSend_DirectTCP(b *testing.B) {
	f := newFixture(b, 2)
	ctx := context.Background()
	conn, err := bus.Connect(ctx, bus.ConnectConfig{Dir: f.node.Dir(), Timeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	svc := team.New(conn.JS, team.Config{})
	a := member("tm2").Actor()
	d := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := svc.Send(ctx, teamapi.SendRequest{Actor: a, To: "tm1", Body: benchBody}); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(start))
	}
	p50(b, d)
}

// BenchmarkSend_MCPInMemory is the send tool through the SDK over
// in-memory transports: the MCP layer's own cost on top of Direct.
func BenchmarkSend_MCPInMemory(b *testing.B) {
	f := newFixture(b, 2)
	cs := f.client(member("tm2"))
	benchCall(b, cs, "send", map[string]any{"to": "tm1", "body": benchBody})
}

// BenchmarkSend_MCPProcess is the send tool round trip through a running
// `teambus mcp` (the built binary over stdio, connected to the node over
// TCP), as an agent calls it.
func BenchmarkSend_MCPProcess(b *testing.B) {
	f := newFixture(b, 2)
	cs := processClient(b, f, "tm2")
	benchCall(b, cs, "send", map[string]any{"to": "tm1", "body": benchBody})
}

// BenchmarkInbox50_MCPProcess is inbox (a peek) returning 50 messages
// through a running `teambus mcp`; it reports the p50.
func BenchmarkInbox50_MCPProcess(b *testing.B) {
	f := newFixture(b, 2)
	f.sendN(50, "tm1")
	cs := processClient(b, f, "tm1")
	benchCall(b, cs, "inbox", map[string]any{"limit": 50})
}

// BenchmarkInbox50Ack_MCPProcess is inbox(ack:true) of 50 messages
// through a running `teambus mcp`; the 50 are sent again between calls
// (not timed). The ack runs after the response is written, so it is not
// in the caller's round trip.
func BenchmarkInbox50Ack_MCPProcess(b *testing.B) {
	f := newFixture(b, 2)
	cs := processClient(b, f, "tm1")
	ctx := context.Background()
	d := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		f.sendN(50, "tm1")
		// Wait until the previous call's acks are done.
		for len(f.unacked("tm1")) != 50 {
			time.Sleep(time.Millisecond)
		}
		b.StartTimer()
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "inbox", Arguments: map[string]any{"limit": 50, "ack": true}})
		d = append(d, time.Since(start))
		if err != nil || res.IsError {
			b.Fatalf("inbox: %v %v", err, res)
		}
	}
	p50(b, d)
}

func processClient(b *testing.B, f *fixture, m string) *mcp.ClientSession {
	b.Helper()
	cmd := exec.Command(teambusBin(b), "mcp", "--dir", f.node.Dir(), "--team", "alpha", "--member", m, "--session", "s-"+m, "--log-level", os.Getenv("BENCH_MCP_LOG"))
	cmd.Stderr = os.Stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cs.Close() })
	return cs
}

// benchCall times one tool call per iteration and reports the p50.
func benchCall(b *testing.B, cs *mcp.ClientSession, name string, args map[string]any) {
	ctx := context.Background()
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	d := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		res, err := cs.CallTool(ctx, p)
		d = append(d, time.Since(start))
		if err != nil || res.IsError {
			b.Fatalf("%s: %v %v", name, err, res)
		}
	}
	p50(b, d)
}

// p50 reports the median of d in milliseconds.
func p50(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, "p50-ms")
}

var _ = mcpserver.InboxOut{}

// BenchmarkPing_MCPProcess is an MCP ping through a running `teambus
// mcp`: the stdio round trip without a bus call.
func BenchmarkPing_MCPProcess(b *testing.B) {
	f := newFixture(b, 2)
	cs := processClient(b, f, "tm2")
	ctx := context.Background()
	d := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if err := cs.Ping(ctx, nil); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(start))
	}
	p50(b, d)
}
