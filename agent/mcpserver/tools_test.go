package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/agent/mcpserver"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/team"
)

var memberTools = []string{"ack", "brief", "checkpoint", "inbox", "read_message", "replay", "send", "task_block", "task_claim", "task_complete", "task_fail", "task_list", "task_next", "task_release", "task_show", "team_status", "whoami"}

func toolNames(t *testing.T, cs *mcp.ClientSession) ([]string, []*mcp.Tool) {
	t.Helper()
	res, err := cs.ListTools(testCtx(t), nil)
	if err != nil {
		t.Fatalf("list tools: %v", err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	sort.Strings(names)
	return names, res.Tools
}

// schemaWalk calls fn for every subschema under properties/items.
func schemaWalk(path string, v any, fn func(path string, v any)) {
	fn(path, v)
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	if props, ok := m["properties"].(map[string]any); ok {
		for k, p := range props {
			schemaWalk(path+"."+k, p, fn)
		}
	}
	if it, ok := m["items"]; ok {
		schemaWalk(path+"[]", it, fn)
	}
	if ap, ok := m["additionalProperties"]; ok {
		if _, isMap := ap.(map[string]any); isMap {
			schemaWalk(path+"{}", ap, fn)
		}
	}
}

func TestServer_ListTools_Member(t *testing.T) {
	f := newFixture(t, 2)
	names, tools := toolNames(t, f.client(member("tm1")))
	if !slices.Equal(names, memberTools) {
		t.Fatalf("tools of a member:\n got %v\nwant %v", names, memberTools)
	}
	for _, tl := range tools {
		if tl.OutputSchema == nil {
			t.Errorf("tool %s has no output schema", tl.Name)
		}
		for _, sch := range []any{tl.InputSchema, tl.OutputSchema} {
			b, _ := json.Marshal(sch)
			var v any
			_ = json.Unmarshal(b, &v)
			// No schema may be a bare boolean (an `any` field): the
			// TypeScript client rejects the whole tool list then.
			schemaWalk(tl.Name, v, func(path string, v any) {
				if _, isBool := v.(bool); isBool {
					t.Errorf("%s: boolean schema %v (an any-typed field)", path, v)
				}
			})
		}
		wantRO := slices.Contains([]string{"whoami", "read_message", "task_list", "task_show", "team_status", "brief", "replay"}, tl.Name)
		if tl.Annotations == nil || tl.Annotations.ReadOnlyHint != wantRO {
			t.Errorf("tool %s: readOnlyHint %v, want %v", tl.Name, tl.Annotations, wantRO)
		}
		wantIdem := slices.Contains([]string{"ack", "send", "checkpoint", "task_complete"}, tl.Name)
		if tl.Annotations != nil && tl.Annotations.IdempotentHint != wantIdem {
			t.Errorf("tool %s: idempotentHint %v, want %v", tl.Name, tl.Annotations.IdempotentHint, wantIdem)
		}
		if tl.Name == "send" {
			b, _ := json.Marshal(tl.InputSchema)
			var s struct {
				Properties map[string]struct {
					Type any `json:"type"`
				} `json:"properties"`
				Required []string `json:"required"`
			}
			_ = json.Unmarshal(b, &s)
			if got := fmt.Sprint(s.Properties["data"].Type); got != "object" {
				t.Errorf("send: data schema type %s, want object (not a byte array)", got)
			}
			if !slices.Equal(s.Required, []string{"to", "body"}) {
				t.Errorf("send: required %v, want [to body]", s.Required)
			}
		}
	}
}

func TestServer_ListTools_ReadOnly(t *testing.T) {
	f := newFixture(t, 1)
	s := f.server(mcpserver.Config{Resolve: mcpserver.StaticIdentity(member("tm1")), Tools: mcpserver.ToolsReadOnly})
	names, _ := toolNames(t, connect(t, s, nil, nil))
	want := []string{"brief", "read_message", "replay", "task_list", "task_show", "team_status", "whoami"}
	if !slices.Equal(names, want) {
		t.Fatalf("readonly tools: got %v, want %v", names, want)
	}
}

func TestServer_LeadTools_BoundLater(t *testing.T) {
	f := newFixture(t, 1)
	var id atomic.Pointer[mcpserver.Identity]
	id.Store(&mcpserver.Identity{})
	s := f.server(mcpserver.Config{Resolve: func(context.Context) (mcpserver.Identity, error) { return *id.Load(), nil }})
	changed := make(chan struct{}, 4)
	cs := connect(t, s, nil, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
	names, _ := toolNames(t, cs)
	if !slices.Equal(names, memberTools) {
		t.Fatalf("tools before binding: got %v", names)
	}
	var who mcpserver.WhoamiOut
	ok(t, cs, "whoami", nil, &who)
	if who.Bound {
		t.Fatalf("whoami before binding: %+v", who)
	}
	id.Store(&mcpserver.Identity{Team: "alpha", Member: teambus.Lead, Session: "s-lead"})
	ok(t, cs, "whoami", nil, &who)
	if !who.Bound || who.Role != "lead" {
		t.Fatalf("whoami after binding: %+v", who)
	}
	select {
	case <-changed:
	case <-testCtx(t).Done():
		t.Fatal("no notifications/tools/list_changed after binding as lead")
	}
	names, _ = toolNames(t, cs)
	for _, lt := range mcpserver.LeadTools {
		if !slices.Contains(names, lt) {
			t.Errorf("lead tool %s not listed after binding: %v", lt, names)
		}
	}
	// The lead tools work.
	var tr mcpserver.TaskResult
	ok(t, cs, "task_add", map[string]any{"id": "t1", "description": "first"}, &tr)
	if tr.Task.ID != "t1" || tr.Task.Status != "available" {
		t.Fatalf("task_add: %+v", tr.Task)
	}
	var rep mcpserver.ReportOut
	ok(t, cs, "team_probe", nil, &rep)
	if rep.Team != "alpha" || rep.Tasks["available"] != 1 {
		t.Fatalf("team_probe: %+v", rep)
	}
	ok(t, cs, "task_reassign", map[string]any{"id": "t1", "to": "tm1"}, &tr)
	if tr.Task.AssignedTo != "tm1" {
		t.Fatalf("task_reassign: %+v", tr.Task)
	}
	// A team that never had a lead is refused; once a lead sidecar
	// attached, the same session re-attaches.
	fails(t, cs, "team_resume", nil, "[permanent]", "never had a lead")
	if _, err := f.svc.Resume(testCtx(t), "alpha", "s-lead", false, true); err != nil {
		t.Fatal(err)
	}
	ok(t, cs, "team_resume", nil, &rep)
	if rep.LeadSession != "s-lead" {
		t.Fatalf("team_resume: %+v", rep)
	}
}

func TestServer_Mail(t *testing.T) { forBackends(t, testServerMail) }

func testServerMail(t *testing.T, newF fixtureFunc) {
	f := newF(t, 2)
	tm1, tm2 := f.client(member("tm1")), f.client(member("tm2"))

	var sent mcpserver.SendOut
	txt := ok(t, tm2, "send", map[string]any{"to": "tm1", "body": "hello\x1b[31m\nsecond line", "type": "question", "id": "q-1", "data": map[string]any{"k": 1}}, &sent)
	if sent.Seq == 0 || sent.Duplicate || !strings.Contains(txt, "stored seq") {
		t.Fatalf("send: %+v %q", sent, txt)
	}
	var again mcpserver.SendOut
	ok(t, tm2, "send", map[string]any{"to": "tm1", "body": "hello", "id": "q-1"}, &again)
	if !again.Duplicate || again.Seq != sent.Seq {
		t.Fatalf("send again with the same id: %+v, want duplicate of %d", again, sent.Seq)
	}

	// A peek returns the mail and leaves it for the next reader.
	var in mcpserver.InboxOut
	txt = ok(t, tm1, "inbox", nil, &in)
	if len(in.Messages) != 1 || in.Messages[0].Seq != sent.Seq || in.Messages[0].From != "tm2" || in.Messages[0].Data["k"] != float64(1) {
		t.Fatalf("inbox: %+v", in)
	}
	if strings.Contains(txt, "\x1b") || !strings.Contains(txt, "    second line") {
		t.Fatalf("inbox text must strip control characters and indent bodies: %q", txt)
	}
	if got := f.unacked("tm1"); !slices.Equal(got, []uint64{sent.Seq}) {
		t.Fatalf("after a peek: unacked %v, want [%d]", got, sent.Seq)
	}

	var msg mcpserver.MessageOut
	ok(t, tm1, "read_message", map[string]any{"seq": sent.Seq}, &msg)
	if msg.Body != "hello\x1b[31m\nsecond line" {
		t.Fatalf("read_message body %q", msg.Body)
	}
	// Another member's direct mail is not readable.
	f.svc.AddMember(testCtx(t), "alpha", team.MemberSpec{ID: "tm3"})
	tm3 := f.client(mcpserver.Identity{Team: "alpha", Member: "tm3"})
	fails(t, tm3, "read_message", map[string]any{"seq": sent.Seq}, "[permanent]", "no message")

	var acked mcpserver.AckOut
	ok(t, tm1, "ack", map[string]any{"seqs": []uint64{sent.Seq}}, &acked)
	if !slices.Equal(acked.Acked, []uint64{sent.Seq}) {
		t.Fatalf("ack: %+v", acked)
	}
	ok(t, tm1, "ack", map[string]any{"seqs": []uint64{sent.Seq}}, &acked)
	if !slices.Equal(acked.Already, []uint64{sent.Seq}) {
		t.Fatalf("ack twice: %+v, want already", acked)
	}
	ok(t, tm1, "inbox", nil, &in)
	if len(in.Messages) != 0 {
		t.Fatalf("inbox after ack: %+v", in)
	}

	var rp mcpserver.MessagesOut
	ok(t, tm1, "replay", map[string]any{"from": "tm2"}, &rp)
	if len(rp.Messages) != 1 || rp.Messages[0].Seq != sent.Seq {
		t.Fatalf("replay: %+v", rp)
	}

	// Bad input is permanent, nothing stored.
	fails(t, tm2, "send", map[string]any{"to": "nobody", "body": "x"}, "[permanent]", "nobody")
	fails(t, tm2, "send", map[string]any{"to": "tm1", "body": "x", "type": "bogus"}, "[permanent]")
	fails(t, tm2, "send", map[string]any{"to": "tm1"}, "[permanent]", "body")
	fails(t, tm2, "send", map[string]any{"to": 7, "body": "x"}, "[permanent]")
	fails(t, tm1, "ack", map[string]any{"seqs": []uint64{}}, "[permanent]")
	fails(t, tm1, "inbox", map[string]any{"limit": -1}, "[permanent]")
	fails(t, tm1, "replay", map[string]any{"since": "yesterday"}, "[permanent]")
	if got := f.unacked("tm1"); len(got) != 0 {
		t.Fatalf("bad sends stored mail: %v", got)
	}
}

func TestServer_InboxLimit(t *testing.T) { forBackends(t, testServerInboxLimit) }

func testServerInboxLimit(t *testing.T, newF fixtureFunc) {
	f := newF(t, 2)
	f.sendN(60, "tm1")
	tm1 := f.client(member("tm1"))
	var in mcpserver.InboxOut
	ok(t, tm1, "inbox", map[string]any{"limit": 500}, &in)
	if len(in.Messages) != 50 || !in.More {
		t.Fatalf("inbox limit 500: %d messages, more %v; want 50 and more", len(in.Messages), in.More)
	}
	ok(t, tm1, "inbox", nil, &in)
	if len(in.Messages) != 20 || !in.More {
		t.Fatalf("inbox default: %d messages, more %v; want 20 and more", len(in.Messages), in.More)
	}
}

// TestServer_InboxResult: inbox builds its own result, which the SDK
// passes through without validating it: every structured content (a
// peek, a cut body, data, more, ack:true, no mail) validates against the
// output schema the tool advertises, the text carries every message, and
// bad arguments are refused as the SDK refuses them for the other tools.
func TestServer_InboxResult(t *testing.T) { forBackends(t, testServerInboxResult) }

func testServerInboxResult(t *testing.T, newF fixtureFunc) {
	t.Run("in-memory", func(t *testing.T) {
		f := newF(t, 2)
		inboxResults(t, f, f.client(member("tm1")), f.client(member("tm2")))
	})
	// Over pipes, as `teambus mcp` serves stdio, the result is spliced
	// into the response.
	t.Run("io", func(t *testing.T) {
		f := newF(t, 2)
		tm1 := connectIO(t, f.server(mcpserver.Config{Resolve: mcpserver.StaticIdentity(member("tm1"))}), nil)
		inboxResults(t, f, tm1, f.client(member("tm2")))
	})
}

func inboxResults(t *testing.T, f *fixture, tm1, tm2 *mcp.ClientSession) {
	long := strings.Repeat("é", 3000) // 6,000 bytes: cut to the preview
	var first, second mcpserver.SendOut
	ok(t, tm2, "send", map[string]any{"to": "tm1", "body": long, "type": "question", "data": map[string]any{"k": []any{1, "x"}}}, &first)
	ok(t, tm2, "send", map[string]any{"to": "tm1", "body": "short\x07 one\nline two"}, &second)

	_, tools := toolNames(t, tm1)
	i := slices.IndexFunc(tools, func(tl *mcp.Tool) bool { return tl.Name == "inbox" })
	if i < 0 {
		t.Fatal("no inbox tool listed")
	}
	b, err := json.Marshal(tools[i].OutputSchema)
	if err != nil {
		t.Fatal(err)
	}
	var schema jsonschema.Schema
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatalf("inbox output schema %s: %v", b, err)
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		t.Fatalf("resolve inbox output schema: %v", err)
	}
	for _, c := range []struct {
		args map[string]any
		seqs []uint64
		more bool
	}{
		{map[string]any{"limit": 1}, []uint64{first.Seq}, true},
		{nil, []uint64{first.Seq, second.Seq}, false},
		{map[string]any{"ack": true}, []uint64{first.Seq, second.Seq}, false},
		{map[string]any{"ack": true}, nil, false},
		{nil, nil, false},
	} {
		res := call(t, tm1, "inbox", c.args)
		if res.IsError {
			t.Fatalf("inbox(%v): %s", c.args, text(res))
		}
		if err := resolved.Validate(res.StructuredContent); err != nil {
			t.Fatalf("inbox(%v): structured content does not match the advertised schema: %v", c.args, err)
		}
		raw, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		var in mcpserver.InboxOut
		if err := json.Unmarshal(raw, &in); err != nil {
			t.Fatalf("inbox(%v): decode %s: %v", c.args, raw, err)
		}
		var got []uint64
		for _, m := range in.Messages {
			got = append(got, m.Seq)
		}
		if in.Messages == nil || !slices.Equal(got, c.seqs) || in.More != c.more {
			t.Fatalf("inbox(%v): %s, want seqs %v more %v", c.args, raw, c.seqs, c.more)
		}
		txt := text(res)
		for _, m := range in.Messages {
			if !strings.Contains(txt, fmt.Sprintf("#%d ", m.Seq)) {
				t.Fatalf("inbox(%v): text does not show seq %d: %q", c.args, m.Seq, txt)
			}
			if m.Seq == first.Seq && (!m.Truncated || m.Data == nil || !strings.Contains(txt, "[question]") || !strings.Contains(txt, "(cut: read_message seq")) {
				t.Fatalf("inbox(%v): the long message: truncated %v data %v, text %q", c.args, m.Truncated, m.Data, txt)
			}
		}
		if len(in.Messages) == 2 && !strings.Contains(txt, "    short one\n    line two") {
			t.Fatalf("inbox(%v): text must strip control characters and indent bodies: %q", c.args, txt)
		}
	}

	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"limit": "x"}, `validating /properties/limit: type: x has type "string", want "integer"`},
		{map[string]any{"limit": 1.5}, `want "integer"`},
		{map[string]any{"ack": "yes"}, `want "boolean"`},
		{map[string]any{"bogus": 1}, `unexpected additional properties ["bogus"]`},
	} {
		fails(t, tm1, "inbox", c.args, `[permanent] validating "arguments": validating root: `, c.want, "fix the arguments to match the tool's input schema")
	}
}

func TestServer_Tasks(t *testing.T) { forBackends(t, testServerTasks) }

func testServerTasks(t *testing.T, newF fixtureFunc) {
	f := newF(t, 2)
	ctx := testCtx(t)
	for _, spec := range []team.TaskSpec{{ID: "t1", Description: "build"}, {ID: "t2", Deps: []string{"t1"}}, {ID: "t3"}, {ID: "t4"}} {
		if _, err := f.svc.AddTask(ctx, "alpha", spec); err != nil {
			t.Fatal(err)
		}
	}
	tm1, tm2 := f.client(member("tm1")), f.client(member("tm2"))

	var next mcpserver.TaskNextOut
	ok(t, tm1, "task_next", nil, &next)
	if next.Task == nil || next.Task.ID != "t1" || next.Task.Status != "in_progress" {
		t.Fatalf("task_next: %+v", next)
	}
	// A lost claim is a conflict.
	fails(t, tm2, "task_claim", map[string]any{"id": "t1"}, "[conflict]", "already claimed by tm1")
	fails(t, tm2, "task_claim", map[string]any{"id": "no such"}, "[permanent]")
	fails(t, tm2, "task_claim", map[string]any{"id": "t9"}, "[permanent]", "t9")

	var cp mcpserver.CheckpointResult
	ok(t, tm1, "checkpoint", map[string]any{"done": []string{"a"}, "remaining": []string{"b"}, "last_action": "wrote a", "files": []string{"x.go"}, "data": map[string]any{"n": 2}}, &cp)
	if cp.Task != "t1" || cp.Seq != 1 {
		t.Fatalf("checkpoint: %+v", cp)
	}
	// Past a cap: refused, naming the field and the cap; nothing recorded.
	fails(t, tm1, "checkpoint", map[string]any{"done": []string{strings.Repeat("d", 20_000)}}, "[permanent]", "done item 1 is 20000 bytes, at most 16384 (16 KiB)", "files whose paths")
	var tr mcpserver.TaskResult
	ok(t, tm2, "task_show", map[string]any{"id": "t1"}, &tr)
	if tr.Task.Checkpoint == nil || tr.Task.Checkpoint.LastAction != "wrote a" || tr.Task.Checkpoint.Data["n"] != float64(2) {
		t.Fatalf("task_show: %+v", tr.Task)
	}
	var done mcpserver.TaskCompleteOut
	ok(t, tm1, "task_complete", map[string]any{"id": "t1", "commit": "abc123", "summary": "built it"}, &done)
	if done.Task.Status != "complete" || !slices.Equal(done.Unblocked, []string{"t2"}) {
		t.Fatalf("task_complete: %+v", done)
	}
	ok(t, tm1, "task_complete", map[string]any{"id": "t1", "summary": "built it"}, &done)
	if done.Task.Status != "complete" {
		t.Fatalf("task_complete twice: %+v", done)
	}
	// The summary reached the lead once.
	lead := f.client(mcpserver.Identity{Team: "alpha", Member: teambus.Lead, Session: "s-lead"})
	var in mcpserver.InboxOut
	ok(t, lead, "inbox", nil, &in)
	if len(in.Messages) != 1 || in.Messages[0].Type != "report" || !strings.Contains(in.Messages[0].Body, "built it") {
		t.Fatalf("lead inbox after completion: %+v", in)
	}

	ok(t, tm2, "task_claim", map[string]any{"id": "t3"}, &tr)
	ok(t, tm2, "task_release", map[string]any{"id": "t3"}, &tr)
	if tr.Task.Status != "available" {
		t.Fatalf("task_release: %+v", tr.Task)
	}
	ok(t, tm2, "task_claim", map[string]any{"id": "t3"}, &tr)
	ok(t, tm2, "task_block", map[string]any{"id": "t3", "reason": "waiting for a review"}, &tr)
	if tr.Task.Status != "blocked" || tr.Task.BlockedReason != "waiting for a review" {
		t.Fatalf("task_block: %+v", tr.Task)
	}
	ok(t, tm1, "task_claim", map[string]any{"id": "t4"}, &tr)
	ok(t, tm1, "task_fail", map[string]any{"id": "t4", "reason": "tests red"}, &tr)
	if tr.Task.LastError == "" {
		t.Fatalf("task_fail: %+v", tr.Task)
	}
	var list mcpserver.TaskListOut
	ok(t, tm1, "task_list", map[string]any{"status": "complete"}, &list)
	if len(list.Tasks) != 1 || list.Tasks[0].ID != "t1" {
		t.Fatalf("task_list complete: %+v", list)
	}
	fails(t, tm1, "task_list", map[string]any{"status": "nope"}, "[permanent]")

	var st mcpserver.TeamStatusOut
	ok(t, tm1, "team_status", nil, &st)
	if st.Team != "alpha" || len(st.Members) != 2 || st.Tasks["complete"] != 1 || st.Progress != 25 {
		t.Fatalf("team_status: %+v", st)
	}
	var br mcpserver.BriefOut
	ok(t, tm2, "brief", nil, &br)
	if !strings.Contains(br.Text, "tm2") {
		t.Fatalf("brief: %q", br.Text)
	}
	var who mcpserver.WhoamiOut
	ok(t, tm2, "whoami", nil, &who)
	if !who.Bound || who.Member != "tm2" || who.Role != "teammate" || who.Epoch != 1 || who.Task == nil || who.Task.ID != "t3" {
		t.Fatalf("whoami: %+v", who)
	}
	// The lead tools are not there for a member.
	res, err := tm1.CallTool(testCtx(t), &mcp.CallToolParams{Name: "task_add", Arguments: map[string]any{"id": "t5"}})
	if err == nil && !res.IsError {
		t.Fatalf("task_add by a member succeeded")
	}
}

// TestServer_TaskNext_None: no task is an answer, not an error.
func TestServer_TaskNext_None(t *testing.T) { forBackends(t, testServerTaskNextNone) }

func testServerTaskNextNone(t *testing.T, newF fixtureFunc) {
	f := newF(t, 1)
	var next mcpserver.TaskNextOut
	ok(t, f.client(member("tm1")), "task_next", nil, &next)
	if next.Task != nil || next.Reason == "" {
		t.Fatalf("task_next without tasks: %+v", next)
	}
}

// TestServer_ClaimRace: eight members claim the same task at once through
// eight servers; exactly one wins, the others get [conflict].
func TestServer_ClaimRace(t *testing.T) { forBackends(t, testServerClaimRace) }

func testServerClaimRace(t *testing.T, newF fixtureFunc) {
	f := newF(t, 8)
	if _, err := f.svc.AddTask(testCtx(t), "alpha", team.TaskSpec{ID: "t1"}); err != nil {
		t.Fatal(err)
	}
	var clients []*mcp.ClientSession
	for i := 1; i <= 8; i++ {
		clients = append(clients, f.client(member(fmt.Sprintf("tm%d", i))))
	}
	var wg sync.WaitGroup
	results := make([]*mcp.CallToolResult, 8)
	for i, cs := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], _ = cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: "task_claim", Arguments: map[string]any{"id": "t1"}})
		}()
	}
	wg.Wait()
	wins := 0
	for i, r := range results {
		switch {
		case r == nil:
			t.Fatalf("client %d: protocol error", i)
		case !r.IsError:
			wins++
		case !strings.HasPrefix(text(r), "[conflict]"):
			t.Errorf("client %d: %q, want [conflict]", i, text(r))
		}
	}
	if wins != 1 {
		t.Fatalf("%d claims won, want exactly 1", wins)
	}
}

// TestServer_Fenced: a session replaced by a newer incarnation is refused
// with [conflict] naming the incarnation, on every member tool.
func TestServer_Fenced(t *testing.T) { forBackends(t, testServerFenced) }

func testServerFenced(t *testing.T, newF fixtureFunc) {
	f := newF(t, 2)
	tm1 := f.client(member("tm1"))
	ok(t, tm1, "send", map[string]any{"to": "lead", "body": "before"}, nil)
	if _, err := f.svc.Join(testCtx(t), "alpha", "tm1", "s-tm1-new"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"send", map[string]any{"to": "lead", "body": "after"}},
		{"inbox", nil},
		{"inbox", map[string]any{"ack": true}},
		{"ack", map[string]any{"seqs": []uint64{1}}},
		{"task_next", nil},
		{"checkpoint", map[string]any{"last_action": "x"}},
	} {
		fails(t, tm1, c.tool, c.args, "[conflict] this session was replaced by incarnation 2")
	}
	var who mcpserver.WhoamiOut
	ok(t, tm1, "whoami", nil, &who)
	if !strings.Contains(who.Hint, "replaced by incarnation 2") {
		t.Fatalf("whoami of a fenced session: %+v", who)
	}
	// A fenced lead likewise.
	lead := f.client(mcpserver.Identity{Team: "alpha", Member: teambus.Lead, Session: "old-lead"})
	fails(t, lead, "send", map[string]any{"to": "tm1", "body": "x"}, "[conflict]")
}

// TestServer_NoIdentity: only whoami and (with a team) the read-only
// tools work; member tools say how to bind.
func TestServer_NoIdentity(t *testing.T) { forBackends(t, testServerNoIdentity) }

func testServerNoIdentity(t *testing.T, newF fixtureFunc) {
	f := newF(t, 1)
	none := f.client(mcpserver.Identity{})
	var who mcpserver.WhoamiOut
	txt := ok(t, none, "whoami", nil, &who)
	if who.Bound || !strings.Contains(txt, "TEAMBUS_TEAM") {
		t.Fatalf("whoami unbound: %+v %q", who, txt)
	}
	for _, tool := range []string{"send", "inbox", "ack", "task_next", "task_claim", "checkpoint", "read_message"} {
		args := map[string]any{"to": "lead", "body": "x", "seqs": []uint64{1}, "id": "t1", "seq": 1}
		switch tool {
		case "send":
			args = map[string]any{"to": "lead", "body": "x"}
		case "inbox", "task_next", "checkpoint":
			args = nil
		case "ack":
			args = map[string]any{"seqs": []uint64{1}}
		case "task_claim":
			args = map[string]any{"id": "t1"}
		case "read_message":
			args = map[string]any{"seq": 1}
		}
		fails(t, none, tool, args, "[permanent] not bound", "TEAMBUS_TEAM", "teambus init claude")
	}
	fails(t, none, "task_list", nil, "[permanent] not bound")

	teamOnly := f.client(mcpserver.Identity{Team: "alpha"})
	var st mcpserver.TeamStatusOut
	ok(t, teamOnly, "team_status", nil, &st)
	ok(t, teamOnly, "task_list", nil, nil)
	ok(t, teamOnly, "brief", map[string]any{"member": "tm1"}, nil)
	fails(t, teamOnly, "send", map[string]any{"to": "lead", "body": "x"}, "[permanent] not bound")
}

// TestServer_Transient: a bus the server can not reach is [transient].
func TestServer_Transient(t *testing.T) {
	f := newFixture(t, 1)
	conn := nodetest.Connect(t, f.node)
	svc := team.New(conn.JS, team.Config{})
	s := f.server(mcpserver.Config{API: svc.API(), Direct: svc, Resolve: mcpserver.StaticIdentity(member("tm1"))})
	cs := connect(t, s, nil, nil)
	ok(t, cs, "send", map[string]any{"to": "lead", "body": "up"}, nil)
	conn.Close()
	fails(t, cs, "send", map[string]any{"to": "lead", "body": "down"}, "[transient]", "retry")
}
