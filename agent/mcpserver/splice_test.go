package mcpserver

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sdkLine is the line the SDK writes for a response with result res: the
// JSON-RPC layer marshals the result without HTML escaping, the stdio
// connection encodes the message around it.
func sdkLine(t *testing.T, id jsonrpc.ID, res *mcp.CallToolResult) []byte {
	t.Helper()
	b, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Result: sdkResult(t, res)})
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// sdkResult is res as the SDK's JSON-RPC layer marshals it.
func sdkResult(t *testing.T, res *mcp.CallToolResult) json.RawMessage {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// TestSpliced_SameLine: a result encoded ahead and spliced into the
// placeholder's response is byte for byte the line the SDK writes for the
// result itself, whatever the text and the data hold.
func TestSpliced_SameLine(t *testing.T) {
	a := newAcks(slog.New(slog.DiscardHandler), nil)
	long := strings.Repeat("é<&>\u2028 ", 900)
	for i, out := range []InboxOut{
		{Messages: []MessageOut{}},
		{Messages: []MessageOut{{Seq: 7, ID: "m-1", From: "tm2", To: "tm1", Type: "info", Body: "hi <b> & \"q\"\n\tnext\x1b[31m", Data: map[string]any{"k": []any{1.5, "x<y", nil}}, Epoch: 2, TS: "2026-11-24T22:00:00Z"}}, More: true},
		{Messages: []MessageOut{{Seq: 8, Body: long, Truncated: true}, {Seq: 9, Body: "teambus-splice-"}}},
	} {
		res := inboxResult(out, i == 1)
		for _, id := range []any{float64(3), "x\"id", "teambus-splice-"} {
			jid, err := jsonrpc.MakeID(id)
			if err != nil {
				t.Fatal(err)
			}
			sp := encodeAhead(res)
			if sp == nil {
				t.Fatalf("case %d: result not encoded ahead", i)
			}
			got, ok, err := a.spliced(&jsonrpc.Response{ID: jid, Result: sdkResult(t, a.placeholder(res))}, sp)
			if err != nil || !ok {
				t.Fatalf("case %d id %v: spliced ok %v err %v", i, id, ok, err)
			}
			if want := sdkLine(t, jid, res); !bytes.Equal(got, want) {
				t.Fatalf("case %d id %v: spliced line differs from the SDK's:\n got %s\nwant %s", i, id, got, want)
			}
		}
	}
}

// TestSpliced_NoPlaceholder: a response without the placeholder (an error
// result) is not spliced.
func TestSpliced_NoPlaceholder(t *testing.T) {
	a := newAcks(slog.New(slog.DiscardHandler), nil)
	res := inboxResult(InboxOut{Messages: []MessageOut{{Seq: 1, Body: "x"}}}, false)
	jid, _ := jsonrpc.MakeID(float64(1))
	if _, ok, err := a.spliced(&jsonrpc.Response{ID: jid, Result: json.RawMessage(`{"content":[{"type":"text","text":"[transient] x"}],"isError":true}`)}, encodeAhead(res)); ok || err != nil {
		t.Fatalf("an error result was spliced (ok %v, err %v)", ok, err)
	}
}
