package mcpserver_test

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/teambus/teambus/agent/mcpserver"
)

// TestCommand_BadLinesAnswered: a real `teambus mcp` fed lines that are
// not JSON, not a JSON-RPC 2.0 message, or too long answers each with a
// Parse error (-32700) or an Invalid Request (-32600), in order, and goes
// on serving: initialize, tools/list and a tool call after them work, and
// it exits 0 when stdin closes.
func TestCommand_BadLinesAnswered(t *testing.T) {
	f := newFixture(t, 2)
	bin := teambusBin(t)
	cmd := exec.Command(bin, "mcp", "--dir", f.node.Dir())
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
	type step struct {
		line string
		id   string // the id of the answer, as JSON
		code int    // 0: a result
	}
	huge := `{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"send","arguments":{"to":"tm1","body":"` + strings.Repeat("x", mcpserver.MaxRequestLine) + `"}}}`
	steps := []step{
		{`{not json`, "null", -32700},
		{`[]`, "null", -32600},
		{`[{"jsonrpc":"2.0","id":9,"method":"tools/list"}]`, "null", -32600},
		{`{"jsonrpc":"1.0","id":7,"method":"initialize"}`, "7", -32600},
		{`{"jsonrpc":"2.0","id":{"x":1},"method":"initialize"}`, "null", -32600},
		{`42`, "null", -32600},
		{huge, "null", -32600},
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`, "1", 0},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "", 0},
		{`{bad again`, "null", -32700},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, "2", 0},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"whoami"}}`, "3", 0},
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	// One line at a time, each answer read before the next line: the
	// answers to bad lines are written at once, the SDK's a moment later.
	for _, s := range steps {
		if _, err := io.WriteString(stdin, s.line+"\n"); err != nil {
			t.Fatalf("write %.80q: %v (stderr %s)", s.line, err, stderr.String())
		}
		if s.id == "" {
			continue // a notification has no answer
		}
		if !sc.Scan() {
			t.Fatalf("no answer to %.80q: %v (stderr %s)", s.line, sc.Err(), stderr.String())
		}
		var resp struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Result  json.RawMessage `json:"result"`
			Error   *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &resp); err != nil || resp.JSONRPC != "2.0" {
			t.Fatalf("answer to %.80q is not JSON-RPC 2.0: %q", s.line, sc.Bytes())
		}
		if string(resp.ID) != s.id {
			t.Fatalf("answer to %.80q has id %s, want %s: %s", s.line, resp.ID, s.id, sc.Bytes())
		}
		switch {
		case s.code == 0 && (resp.Error != nil || len(resp.Result) == 0):
			t.Fatalf("answer to %.80q: %s; want a result", s.line, sc.Bytes())
		case s.code != 0 && (resp.Error == nil || resp.Error.Code != s.code || resp.Error.Message == ""):
			t.Fatalf("answer to %.80q: %s; want error %d", s.line, sc.Bytes(), s.code)
		}
		if s.code == 0 && s.id == "3" && !strings.Contains(string(resp.Result), "tm2") {
			t.Fatalf("whoami after the bad lines: %s", resp.Result)
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("teambus mcp exit after stdin closed: %v (stderr %s)", err, stderr.String())
	}
}
