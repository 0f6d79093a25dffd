package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/proc"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// Row keys of the mcp section.
const (
	keyMCPDirect  = "ref.mcp.send.direct"
	keyMCPSend    = "mcp.send"
	keyMCPInbox50 = "mcp.inbox50"
	// keyMCPInbox50Short is the same with 100-byte bodies: no target.
	keyMCPInbox50Short = "mcp.inbox50.short"
)

// inbox50 is how many messages wait for the inbox call.
const inbox50 = 50

// mcpClient starts `teambus mcp` for a member as an agent does (stdio
// JSON-RPC, the go-sdk client over CommandTransport) and returns the
// client session and its close, which closes the server's stdin and waits
// for its exit. Its stderr goes to a log file of the run.
func (r *run) mcpClient(ctx context.Context, nd *node.Node, teamID, member string) (*mcp.ClientSession, func(), error) {
	logf, err := os.Create(filepath.Join(r.logs, "mcp-"+member+".log"))
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(r.cfg.Exe, "mcp", "--dir", nd.Dir(), "--team", teamID, "--member", member, "--session", "s-"+member)
	cmd.Env = proc.CleanEnv()
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "teambus-bench", Version: "0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		logf.Close()
		b, _ := os.ReadFile(logf.Name())
		return nil, nil, fmt.Errorf("start teambus mcp for %s: %w (stderr: %s)", member, err, b)
	}
	return cs, func() {
		_ = cs.Close()
		logf.Close()
	}, nil
}

// callTool calls a tool and returns its structured result as the SDK
// client decoded it (a JSON object); a tool error is an error. The
// client's own decode of the whole result is part of the round trip; the
// caller reads the fields it checks from the decoded value, as an agent
// does, without encoding it again.
func callTool(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if res.IsError {
		text := ""
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				text += t.Text
			}
		}
		return nil, fmt.Errorf("%s: tool error: %s", name, text)
	}
	out, ok := res.StructuredContent.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: structured content is %T, want a JSON object", name, res.StructuredContent)
	}
	return out, nil
}

// seqOf returns the positive integer field seq of a decoded JSON object,
// or 0.
func seqOf(v any) uint64 {
	m, _ := v.(map[string]any)
	if f, ok := m["seq"].(float64); ok && f >= 1 {
		return uint64(f)
	}
	return 0
}

// inboxSeqs returns the seqs of a decoded inbox result; an entry without
// a seq is an error.
func inboxSeqs(out map[string]any) ([]uint64, error) {
	msgs, ok := out["messages"].([]any)
	if !ok {
		return nil, fmt.Errorf("inbox: messages is %T, want an array", out["messages"])
	}
	seqs := make([]uint64, len(msgs))
	for i, m := range msgs {
		if seqs[i] = seqOf(m); seqs[i] == 0 {
			return nil, fmt.Errorf("inbox: message %d has no seq", i)
		}
	}
	return seqs, nil
}

// mcpCalls times tool calls through a running `teambus mcp` process, as
// an agent makes them, against a node of this process with sync always:
// the send tool beside team.Service.Send of the same message from this
// process (both over loopback TCP, taking turns call by call), and the
// inbox tool returning 50 waiting messages (a peek: they are released
// before the server answers, so every call finds the same 50).
func (r *run) mcpCalls(ctx context.Context) error {
	nd, svc, stop, err := r.teamNode(ctx, "node-mcp", bus.SyncModeAlways, team.Config{})
	if err != nil {
		return err
	}
	defer stop()
	const teamID = "mcp"
	actors, err := sendTeam(ctx, svc, teamID, "tm1", "tm2", "tm3", "tm4")
	if err != nil {
		return err
	}
	sender := actors[1]
	size, calls := r.cfg.MsgSize, r.cfg.MCPCalls

	cs, closeCS, err := r.mcpClient(ctx, nd, teamID, "tm2")
	if err != nil {
		return err
	}
	defer closeCS()
	// Warm-up, untimed: one call each opens the buckets and streams.
	if _, err := callTool(ctx, cs, "send", map[string]any{"to": "tm1", "body": body(size)}); err != nil {
		return err
	}
	if _, err := svc.Send(ctx, teamapi.SendRequest{Actor: sender, To: "tm1", Body: body(size)}); err != nil {
		return err
	}
	var viaMCP, direct sample
	for i := 0; i < calls; i++ {
		t0 := time.Now()
		out, err := callTool(ctx, cs, "send", map[string]any{"to": "tm1", "body": body(size)})
		if err != nil {
			return err
		}
		viaMCP.lat = append(viaMCP.lat, time.Since(t0))
		if seqOf(out) == 0 {
			return fmt.Errorf("send tool returned no seq")
		}
		t0 = time.Now()
		if _, err := svc.Send(ctx, teamapi.SendRequest{Actor: sender, To: "tm1", Body: body(size)}); err != nil {
			return fmt.Errorf("direct send: %w", err)
		}
		direct.lat = append(direct.lat, time.Since(t0))
	}
	viaMCP.n, direct.n = calls, calls
	r.latRow(Row{Group: "ref", Key: keyMCPDirect, Name: "team.Service.Send in this process (loopback TCP), taking turns with the send tool", Short: "direct Service.Send"}, direct)
	r.latRow(Row{Group: "mcp", Key: keyMCPSend, Name: "send tool call round trip through a running `teambus mcp` (stdio JSON-RPC, go-sdk client)",
		Note: fmt.Sprintf("the same message (tm2 to tm1, %d-byte body) as the direct send; the server runs team.Service.Send over loopback TCP", size)}, viaMCP)

	// inbox of 50: tm3 has 50 messages of the run's size waiting, tm4 50
	// short ones (a status line), for comparison.
	if err := r.inbox50(ctx, nd, svc, sender, "tm3", size, calls, keyMCPInbox50); err != nil {
		return err
	}
	return r.inbox50(ctx, nd, svc, sender, "tm4", shortBody, calls, keyMCPInbox50Short)
}

// shortBody is the body size of the short-mail inbox row: a status line.
const shortBody = 100

// inbox50 sends 50 messages of size bytes to member, then times calls of
// the inbox tool returning them through a running `teambus mcp`.
func (r *run) inbox50(ctx context.Context, nd *node.Node, svc *team.Service, sender team.Actor, member string, size, calls int, key string) error {
	for i := 0; i < inbox50; i++ {
		if _, err := svc.Send(ctx, teamapi.SendRequest{Actor: sender, To: member, Body: body(size)}); err != nil {
			return err
		}
	}
	reader, closeReader, err := r.mcpClient(ctx, nd, sender.Team, member)
	if err != nil {
		return err
	}
	defer closeReader()
	var inbox sample
	short := 0
	for i := -1; i < calls; i++ {
		t0 := time.Now()
		out, err := callTool(ctx, reader, "inbox", map[string]any{"limit": inbox50})
		if err != nil {
			return err
		}
		d := time.Since(t0)
		seqs, err := inboxSeqs(out)
		if err != nil {
			return err
		}
		if len(seqs) != inbox50 {
			// The previous call's release had not reached the consumer
			// yet: not a call of 50, not counted.
			short++
			if short > calls {
				return fmt.Errorf("inbox returned %d of %d messages %d times", len(seqs), inbox50, short)
			}
			i--
			continue
		}
		if i >= 0 {
			inbox.lat = append(inbox.lat, d)
		}
	}
	inbox.n = len(inbox.lat)
	note := fmt.Sprintf("a peek (limit 50): the team service reads and releases the 50 in one request, the server renders them and answers; %d-byte bodies, a result of about %d KiB (text and structured content)", size, 2*inbox50*(size+200)/1024)
	if short > 0 {
		note += fmt.Sprintf("; %d calls returned fewer than 50 and were not counted", short)
	}
	r.latRow(Row{Group: "mcp", Key: key, Name: fmt.Sprintf("inbox tool call returning 50 waiting messages of %d bytes through a running `teambus mcp`", size), Note: note}, inbox)
	return nil
}

// latRow adds a row whose value is the p50 latency of s, in ms.
func (r *run) latRow(row Row, s sample) {
	row.P50, row.P99 = perOp(s)
	row.Value, row.Unit, row.N = row.P50, UnitMs, s.n
	r.res.add(row)
	r.cfg.Progress("  %s: p50 %.2f ms, p99 %.2f ms", row.Name, row.P50, row.P99)
}
