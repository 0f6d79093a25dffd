package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/team"
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
func (r *run) mcpClient(ctx context.Context, node *bus.Node, teamID, member string) (*mcp.ClientSession, func(), error) {
	logf, err := os.Create(filepath.Join(r.logs, "mcp-"+member+".log"))
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(r.cfg.Exe, "mcp", "--dir", node.Dir(), "--team", teamID, "--member", member, "--session", "s-"+member)
	cmd.Env = childEnv()
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

// callTool calls a tool and decodes its structured result into out; a
// tool error is an error.
func callTool(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any, out any) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if res.IsError {
		text := ""
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				text += t.Text
			}
		}
		return fmt.Errorf("%s: tool error: %s", name, text)
	}
	if out == nil {
		return nil
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return json.Unmarshal(raw, out)
}

// mcpCalls times tool calls through a running `teambus mcp` process, as
// an agent makes them, against a node of this process with sync always:
// the send tool beside team.Service.Send of the same message from this
// process (both over loopback TCP, taking turns call by call), and the
// inbox tool returning 50 waiting messages (a peek: the server releases
// them before it answers, so every call finds the same 50).
func (r *run) mcpCalls(ctx context.Context) error {
	node, svc, stop, err := r.teamNode(ctx, "node-mcp", bus.SyncModeAlways, team.Config{})
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

	cs, closeCS, err := r.mcpClient(ctx, node, teamID, "tm2")
	if err != nil {
		return err
	}
	defer closeCS()
	// Warm-up, untimed: one call each opens the buckets and streams.
	if err := callTool(ctx, cs, "send", map[string]any{"to": "tm1", "body": body(size)}, nil); err != nil {
		return err
	}
	if _, err := svc.Send(ctx, sender, team.SendSpec{To: "tm1", Body: body(size)}); err != nil {
		return err
	}
	var viaMCP, direct sample
	for i := 0; i < calls; i++ {
		t0 := time.Now()
		var out struct {
			Seq uint64 `json:"seq"`
		}
		if err := callTool(ctx, cs, "send", map[string]any{"to": "tm1", "body": body(size)}, &out); err != nil {
			return err
		}
		viaMCP.lat = append(viaMCP.lat, time.Since(t0))
		if out.Seq == 0 {
			return fmt.Errorf("send tool returned no seq")
		}
		t0 = time.Now()
		if _, err := svc.Send(ctx, sender, team.SendSpec{To: "tm1", Body: body(size)}); err != nil {
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
	if err := r.inbox50(ctx, node, svc, sender, "tm3", size, calls, keyMCPInbox50); err != nil {
		return err
	}
	return r.inbox50(ctx, node, svc, sender, "tm4", shortBody, calls, keyMCPInbox50Short)
}

// shortBody is the body size of the short-mail inbox row: a status line.
const shortBody = 100

// inbox50 sends 50 messages of size bytes to member, then times calls of
// the inbox tool returning them through a running `teambus mcp`.
func (r *run) inbox50(ctx context.Context, node *bus.Node, svc *team.Service, sender team.Actor, member string, size, calls int, key string) error {
	for i := 0; i < inbox50; i++ {
		if _, err := svc.Send(ctx, sender, team.SendSpec{To: member, Body: body(size)}); err != nil {
			return err
		}
	}
	reader, closeReader, err := r.mcpClient(ctx, node, sender.Team, member)
	if err != nil {
		return err
	}
	defer closeReader()
	var inbox sample
	short := 0
	for i := -1; i < calls; i++ {
		var out struct {
			Messages []struct {
				Seq uint64 `json:"seq"`
			} `json:"messages"`
		}
		t0 := time.Now()
		if err := callTool(ctx, reader, "inbox", map[string]any{"limit": inbox50}, &out); err != nil {
			return err
		}
		d := time.Since(t0)
		if len(out.Messages) != inbox50 {
			// The previous call's release had not reached the consumer
			// yet: not a call of 50, not counted.
			short++
			if short > calls {
				return fmt.Errorf("inbox returned %d of %d messages %d times", len(out.Messages), inbox50, short)
			}
			i--
			continue
		}
		if i >= 0 {
			inbox.lat = append(inbox.lat, d)
		}
	}
	inbox.n = len(inbox.lat)
	note := fmt.Sprintf("a peek (limit 50): the server leases the 50, renders them, releases them and answers; %d-byte bodies, a result of about %d KiB (text and structured content)", size, 2*inbox50*(size+200)/1024)
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
