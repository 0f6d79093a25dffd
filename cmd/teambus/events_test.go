package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/teambus/teambus/bus/bustest"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/node/nodetest"
)

func evTestdata(name string) string {
	return filepath.Join("..", "..", "eventlog", "testdata", "events", name)
}

// evOK runs the CLI and fails the test unless it exits 0.
func evOK(t *testing.T, args ...string) string {
	t.Helper()
	r := runCLI(t, args...)
	if r.code != 0 {
		t.Fatalf("teambus %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// evTeam starts a node and creates team id on it; it returns the --dir
// flag pair to reach it.
func evTeam(t *testing.T, id string, extra ...string) []string {
	t.Helper()
	n := nodetest.NewServer(t)
	dir := []string{"--dir", n.Dir()}
	evOK(t, append(append([]string{"team", "create", id, "--member", "tm1", "--member", "tm2"}, dir...), extra...)...)
	return dir
}

func TestEventsAnalyze_FileNeedsNoBus(t *testing.T) {
	t.Parallel()
	// No node runs in this directory and the server does not exist:
	// analyzing a file must not try either.
	noBus := []string{"--dir", t.TempDir(), "--server", "nats://127.0.0.1:1", "--timeout", "1s"}
	out := evOK(t, append([]string{"events", "analyze", "--file", evTestdata("seed-interrupted.jsonl")}, noBus...)...)
	for _, want := range []string{"INTERRUPTED (no session.end)", `Last checkpoint: seq 7 "wave-1-complete", next step wave-2-start`,
		"2: IN_PROGRESS (service-eng)", "Active agents at interruption: service-eng", "Decision: auto_resume"} {
		if !strings.Contains(out, want) {
			t.Errorf("analyze output lacks %q:\n%s", want, out)
		}
	}
	out = evOK(t, append([]string{"events", "analyze", "--json", "--file", evTestdata("needs-decision.jsonl")}, noBus...)...)
	var a eventlog.Analysis
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatalf("decode %s: %v", out, err)
	}
	if a.Decision != eventlog.DecisionNeedsDecision || len(a.Issues) != 3 || *a.Interrupted != "f4e3d2c1" {
		t.Errorf("analysis = %+v", a)
	}
	out = evOK(t, append([]string{"events", "analyze", "--file", evTestdata("damaged-junk.jsonl")}, noBus...)...)
	if !strings.Contains(out, "4 damaged line(s) skipped") || !strings.Contains(out, "skipped line 5: malformed JSON") {
		t.Errorf("damaged lines not reported:\n%s", out)
	}

	runCLI(t, append([]string{"events", "analyze", "--file", filepath.Join(t.TempDir(), "none.jsonl")}, noBus...)...).wantError(t, 2, "events file", "no such file")
	runCLI(t, "events", "analyze", "--dir", t.TempDir()).wantError(t, 2, "--team", "--file")
	runCLI(t, append([]string{"events", "analyze", "--sid", "nope", "--file", evTestdata("seed-interrupted.jsonl")}, noBus...)...).wantError(t, 2, `no events of session "nope"`)
}

// Import then export gives the file back byte for byte; importing again
// stores nothing.
func TestEvents_ImportExport(t *testing.T) {
	t.Parallel()
	dir := evTeam(t, "imp")
	in := evTestdata("seed-resumed.jsonl")
	out := evOK(t, append([]string{"events", "import", "--team", "imp", "--file", in}, dir...)...)
	if !strings.HasPrefix(out, "imported 14 event(s)") || !strings.Contains(out, "0 duplicate(s)") {
		t.Errorf("first import: %s", out)
	}
	out = evOK(t, append([]string{"events", "import", "--team", "imp", "--file", in, "--json"}, dir...)...)
	var res struct {
		Imported, Duplicates int
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Imported != 0 || res.Duplicates != 14 {
		t.Errorf("second import: %s (%v)", out, err)
	}

	want, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	// The team's log also holds teambus's own events (team create); export
	// them all and find the imported lines, in order, byte for byte.
	file := filepath.Join(t.TempDir(), "out.jsonl")
	if out := evOK(t, append([]string{"events", "export", "--team", "imp", "--file", file}, dir...)...); !strings.Contains(out, "exported") {
		t.Errorf("export: %s", out)
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if stdout := evOK(t, append([]string{"events", "export", "--team", "imp"}, dir...)...); stdout != string(got) {
		t.Errorf("export to stdout differs from export to a file")
	}
	var imported []string
	for _, l := range strings.SplitAfter(string(got), "\n") {
		if strings.Contains(l, `"feature":"auth-system"`) {
			imported = append(imported, l)
		}
	}
	if strings.Join(imported, "") != string(want) {
		t.Errorf("exported lines differ from the imported file:\n%s\nwant\n%s", strings.Join(imported, ""), want)
	}

	// The seed sessions are the most recent: b5a4c3d2 is analyzed.
	out = evOK(t, append([]string{"events", "analyze", "--team", "imp", "--json"}, dir...)...)
	var a eventlog.Analysis
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatal(err)
	}
	if *a.Interrupted != "b5a4c3d2" || a.Decision != eventlog.DecisionNoCheckpoint || len(a.Sessions) != 3 {
		t.Errorf("team analysis: interrupted %v decision %s sessions %d", *a.Interrupted, a.Decision, len(a.Sessions))
	}
	out = evOK(t, append([]string{"events", "analyze", "--team", "imp", "--sid", "f4e3d2c1"}, dir...)...)
	if !strings.Contains(out, "Decision: auto_resume") {
		t.Errorf("analysis of f4e3d2c1:\n%s", out)
	}

	runCLI(t, append([]string{"events", "import", "--team", "nope", "--file", in}, dir...)...).wantError(t, 2, "team nope not found")
	runCLI(t, append([]string{"events", "import", "--team", "imp"}, dir...)...).wantError(t, 2, "missing --file")
}

func TestEvents_AppendReplay(t *testing.T) {
	t.Parallel()
	dir := evTeam(t, "app")
	base := append([]string{"--team", "app"}, dir...)
	out := evOK(t, append([]string{"events", "append", "--session", "sess-1", "--type", "task.started", "--agent", "tm1", "--data", `{"taskId": "1",  "files": ["a.go"]}`}, base...)...)
	if out != "stored event sess-1 seq 0 at log seq 2\n" {
		t.Errorf("append: %q", out)
	}
	evOK(t, append([]string{"events", "append", "--sid", "sess-1", "--type", "error.encountered", "--agent", "tm1", "--data", `{"error":"boom"}`}, base...)...)
	out = evOK(t, append([]string{"events", "append", "--sid", "sess-1", "--seq", "1", "--type", "error.encountered", "--json"}, base...)...)
	var res struct {
		Seq       int64 `json:"seq"`
		Duplicate bool  `json:"duplicate"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Seq != 1 || !res.Duplicate {
		t.Errorf("append of an existing seq: %s", out)
	}
	evOK(t, append([]string{"events", "append", "--sid", "other", "--type", "warning.logged", "--ts", "2026-02-14T10:00:00Z", "--pane-id", "%3"}, base...)...)

	out = evOK(t, append([]string{"events", "replay", "--sid", "sess-1"}, base...)...)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.Contains(lines[0], `sess-1/0 [task.started] tm1 {"taskId":"1","files":["a.go"]}`) {
		t.Errorf("replay --sid:\n%s", out)
	}
	out = evOK(t, append([]string{"events", "replay", "--json", "--type", "warning.logged"}, base...)...)
	if out != `{"v":1,"ts":"2026-02-14T10:00:00.000Z","sid":"other","seq":0,"type":"warning.logged","feature":"app","agent":null,"pane_id":"%3","data":null}`+"\n" {
		t.Errorf("replay --json --type: %q", out)
	}
	out = evOK(t, append([]string{"events", "replay", "--agent", "tm1", "--limit", "1"}, base...)...)
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, "task.started") {
		t.Errorf("replay --agent --limit: %q", out)
	}
	out = evOK(t, append([]string{"events", "replay", "--since", "3", "--until", "3"}, base...)...)
	if !strings.HasPrefix(out, "#3 ") || strings.Count(out, "\n") != 1 {
		t.Errorf("replay --since 3 --until 3: %q", out)
	}
	out = evOK(t, append([]string{"events", "replay", "--until", "2026-02-14T10:00:00Z"}, base...)...)
	if !strings.Contains(out, "other/0") || strings.Count(out, "\n") != 1 {
		t.Errorf("replay --until TIME: %q", out)
	}

	for _, tt := range []struct {
		args  []string
		parts []string
	}{
		{[]string{"events", "append", "--sid", "s"}, []string{"missing --type"}},
		{[]string{"events", "append", "--type", "x"}, []string{"missing --sid"}},
		{[]string{"events", "append", "--sid", "s", "--type", "Bad.Type"}, []string{"invalid event type"}},
		{[]string{"events", "append", "--sid", "s", "--type", "x", "--data", "{"}, []string{"not valid JSON"}},
		{[]string{"events", "append", "--sid", "s", "--type", "x", "--ts", "today"}, []string{"invalid --ts"}},
		{[]string{"events", "append", "--sid", "s", "--type", "x", "--seq", "-5"}, []string{"invalid --seq"}},
		{[]string{"events", "replay", "--since", "yesterday"}, []string{"invalid --since"}},
		{[]string{"events", "replay", "--limit", "-1"}, []string{"invalid --limit"}},
	} {
		runCLI(t, append(tt.args, base...)...).wantError(t, 2, tt.parts...)
	}
	runCLI(t, append([]string{"events", "append", "--team", "ghost", "--sid", "s", "--type", "x"}, dir...)...).wantError(t, 2, "team ghost not found")
}

// evBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type evBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *evBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *evBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// evFollow runs the CLI in-process in the background until the returned
// stop is called; stop returns its exit code and stderr.
func evFollow(t *testing.T, args ...string) (*evBuffer, func() (int, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr evBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"teambus"}, args...), strings.NewReader(""), &stdout, &stderr)
	}()
	return &stdout, func() (int, string) {
		cancel()
		select {
		case code := <-done:
			return code, stderr.String()
		case <-time.After(15 * time.Second):
			t.Fatal("follow did not stop after cancel")
			return -1, ""
		}
	}
}

func waitLines(t *testing.T, b *evBuffer, n int) []string {
	t.Helper()
	var lines []string
	bustest.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		lines = strings.Split(strings.TrimSpace(b.String()), "\n")
		if b.String() == "" || len(lines) < n {
			return fmt.Errorf("printed %d line(s), want %d", len(lines), n)
		}
		return nil
	})
	return lines
}

// `events replay --follow` prints events appended while it runs.
func TestEventsReplay_Follow(t *testing.T) {
	t.Parallel()
	dir := evTeam(t, "fol")
	base := append([]string{"--team", "fol"}, dir...)
	out, stop := evFollow(t, append([]string{"events", "replay", "--follow", "--json", "--type", "task.started"}, base...)...)
	for i := 0; i < 3; i++ {
		evOK(t, append([]string{"events", "append", "--sid", "live", "--type", "task.started", "--data", `{"taskId":"` + strconv.Itoa(i) + `"}`}, base...)...)
		evOK(t, append([]string{"events", "append", "--sid", "live", "--type", "warning.logged"}, base...)...)
	}
	lines := waitLines(t, out, 3)
	if code, stderr := stop(); code != 0 {
		t.Fatalf("follow exited %d: %s", code, stderr)
	}
	if len(lines) != 3 {
		t.Fatalf("followed %d lines: %q", len(lines), lines)
	}
	for i, l := range lines {
		e, err := eventlog.Parse([]byte(l))
		if err != nil || e.Type != "task.started" || e.SID != "live" || e.Seq != int64(2*i) {
			t.Errorf("line %d = %s (%v)", i, l, err)
		}
	}
}

// `teambus replay --follow` prints mail sent while it runs.
func TestReplay_FollowMailbox(t *testing.T) {
	t.Parallel()
	dir := evTeam(t, "mfol")
	base := append([]string{"--team", "mfol"}, dir...)
	evOK(t, append([]string{"send", "--member", "tm1", "--to", "tm2", "before"}, base...)...)
	out, stop := evFollow(t, append([]string{"replay", "--follow", "--json", "--from", "tm1"}, base...)...)
	waitLines(t, out, 1)
	evOK(t, append([]string{"send", "--member", "tm2", "--to", "tm1", "from tm2"}, base...)...)
	evOK(t, append([]string{"send", "--member", "tm1", "--to", "lead", "after"}, base...)...)
	lines := waitLines(t, out, 2)
	if code, stderr := stop(); code != 0 {
		t.Fatalf("follow exited %d: %s", code, stderr)
	}
	var bodies []string
	for _, l := range lines {
		var m struct {
			Seq  uint64 `json:"seq"`
			From string `json:"from"`
			Body string `json:"body"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil || m.From != "tm1" {
			t.Fatalf("line %s: %v", l, err)
		}
		bodies = append(bodies, m.Body)
	}
	if strings.Join(bodies, ",") != "before,after" {
		t.Errorf("followed %v, want before, after", bodies)
	}
}

func TestTeamCheckpoint(t *testing.T) {
	t.Parallel()
	dir := evTeam(t, "tcp")
	out := evOK(t, append([]string{"team", "checkpoint", "tcp"}, dir...)...)
	if out != "team tcp checkpoint 1 recorded\n" {
		t.Errorf("checkpoint: %q", out)
	}
	evOK(t, append([]string{"send", "--team", "tcp", "--member", "tm1", "hello"}, dir...)...)
	exp := filepath.Join(t.TempDir(), "cp")
	out = evOK(t, append([]string{"team", "checkpoint", "tcp", "--export", exp, "--label", "wave-1-complete", "--json"}, dir...)...)
	var res struct {
		CheckpointSeq int64 `json:"checkpoint_seq"`
		Export        struct {
			Messages int64 `json:"messages"`
			Events   int64 `json:"events"`
		} `json:"export"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.CheckpointSeq != 2 || res.Export.Messages != 1 || res.Export.Events < 3 {
		t.Errorf("checkpoint --export --json: %s (%v)", out, err)
	}
	for _, f := range []string{"state.json", "mailbox.jsonl", "events.jsonl"} {
		b, err := os.ReadFile(filepath.Join(exp, f))
		if err != nil || len(b) == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	// The exported event log analyzes on its own, without the bus.
	out = evOK(t, "events", "analyze", "--file", filepath.Join(exp, "events.jsonl"), "--dir", t.TempDir())
	if !strings.Contains(out, `Last checkpoint: seq 2 "wave-1-complete"`) || !strings.Contains(out, "Decision: auto_resume") {
		t.Errorf("analysis of the export:\n%s", out)
	}
	runCLI(t, append([]string{"team", "checkpoint", "ghost"}, dir...)...).wantError(t, 2, "team ghost not found")
}
