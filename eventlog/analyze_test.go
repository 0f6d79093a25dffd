package eventlog_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/metrics"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/eventlog"
)

func analyzeFile(t testing.TB, path string, opts eventlog.AnalyzeOptions) *eventlog.Analysis {
	t.Helper()
	res, err := eventlog.AnalyzeJSONL(func() (io.ReadCloser, error) { return os.Open(path) }, opts)
	if err != nil {
		t.Fatalf("analyze %s: %v", path, err)
	}
	return res
}

func analyzeTestdata(t testing.TB, name string) *eventlog.Analysis {
	t.Helper()
	return analyzeFile(t, filepath.Join("testdata", "events", name), eventlog.AnalyzeOptions{})
}

func seqsOf(evs []eventlog.Event) []int64 {
	out := []int64{}
	for _, e := range evs {
		out = append(out, e.Seq)
	}
	return out
}

func taskStatuses(tasks map[string]eventlog.TaskState) string {
	var ids []string
	for id := range tasks {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var parts []string
	for _, id := range ids {
		parts = append(parts, id+"="+tasks[id].Status)
	}
	return strings.Join(parts, " ")
}

// The seed's example: the documented analysis of its interrupted session.
func TestAnalyze_SeedExample(t *testing.T) {
	t.Parallel()
	a := analyzeTestdata(t, "seed-interrupted.jsonl")
	// Detection: session f4e3d2c1 has no session.end: interrupted; 11
	// events, seq 0-10, no gaps.
	if a.Interrupted == nil || *a.Interrupted != "f4e3d2c1" || a.Analyzed == nil || *a.Analyzed != "f4e3d2c1" {
		t.Fatalf("interrupted %v analyzed %v, want f4e3d2c1", a.Interrupted, a.Analyzed)
	}
	if len(a.Sessions) != 1 {
		t.Fatalf("sessions = %+v", a.Sessions)
	}
	s := a.Sessions[0]
	if s.EventCount != 11 || s.FirstSeq != 0 || s.LastSeq != 10 || s.Gaps != 0 || !s.HasStart || s.HasEnd || !s.Interrupted ||
		!s.FirstTS.Equal(time.Date(2026, 2, 14, 10, 0, 0, 0, time.UTC)) || !s.LastTS.Equal(time.Date(2026, 2, 14, 10, 8, 0, 0, time.UTC)) {
		t.Errorf("session = %+v", s)
	}
	if len(a.Gaps) != 0 {
		t.Errorf("gaps = %+v, want none", a.Gaps)
	}
	// Last checkpoint: seq 7 "wave-1-complete", next step wave-2-start.
	if a.LastCheckpoint == nil || a.LastCheckpoint.Seq != 7 || !strings.Contains(string(a.LastCheckpoint.Data), `"label":"wave-1-complete"`) {
		t.Errorf("last checkpoint = %+v", a.LastCheckpoint)
	}
	// Task state: #1 COMPLETE, #2 IN_PROGRESS (interrupted).
	if got := taskStatuses(a.Tasks); got != "1=COMPLETE 2=IN_PROGRESS" {
		t.Errorf("tasks = %s", got)
	}
	if t2 := a.Tasks["2"]; t2.Agent != "service-eng" || !reflect.DeepEqual(t2.Files, []string{"src/api/service.ts"}) || t2.Seq != 9 {
		t.Errorf("task 2 = %+v", t2)
	}
	if t1 := a.Tasks["1"]; !reflect.DeepEqual(t1.FilesChanged, []string{"src/db/schema.ts", "src/db/migrations/001.ts"}) {
		t.Errorf("task 1 = %+v", t1)
	}
	// Active agents: service-eng (spawned at seq 8, no agent.completed).
	if !reflect.DeepEqual(a.ActiveAgents, []string{"service-eng"}) {
		t.Errorf("active agents = %v", a.ActiveAgents)
	}
	// Post-checkpoint: the error at seq 10 was resolved: no issues.
	if len(a.Issues) != 0 || !reflect.DeepEqual(seqsOf(a.Resolved), []int64{10}) || len(a.Warnings) != 0 {
		t.Errorf("issues %v, resolved %v, warnings %v", seqsOf(a.Issues), seqsOf(a.Resolved), seqsOf(a.Warnings))
	}
	// Decision: auto-resume from wave-2-start.
	if a.Decision != eventlog.DecisionAutoResume || !strings.Contains(strings.Join(a.Reasons, "\n"), "wave-2-start") {
		t.Errorf("decision %s, reasons %q", a.Decision, a.Reasons)
	}
	if a.Lines != 11 || a.Events != 11 || len(a.Damaged) != 0 || len(a.Duplicates) != 0 {
		t.Errorf("lines %d events %d damaged %v duplicates %v", a.Lines, a.Events, a.Damaged, a.Duplicates)
	}
}

// The seed's resumed session appended to the same file: two sessions
// without session.end; the most recent one is analyzed. It was itself
// interrupted before a checkpoint.
func TestAnalyze_TwoInterrupted(t *testing.T) {
	t.Parallel()
	a := analyzeTestdata(t, "seed-resumed.jsonl")
	if !reflect.DeepEqual(a.InterruptedSessions, []string{"b5a4c3d2", "f4e3d2c1"}) || *a.Interrupted != "b5a4c3d2" {
		t.Fatalf("interrupted %v (%v), want b5a4c3d2 then f4e3d2c1", a.InterruptedSessions, *a.Interrupted)
	}
	if !a.Sessions[0].Resumed || a.Sessions[1].Resumed {
		t.Errorf("resumed flags: %+v", a.Sessions)
	}
	if a.Decision != eventlog.DecisionNoCheckpoint || a.LastCheckpoint != nil || taskStatuses(a.Tasks) != "2=IN_PROGRESS" || !reflect.DeepEqual(a.ActiveAgents, []string{"service-eng"}) {
		t.Errorf("decision %s, checkpoint %v, tasks %s, agents %v", a.Decision, a.LastCheckpoint, taskStatuses(a.Tasks), a.ActiveAgents)
	}
	// The older session can be analyzed by name.
	old := analyzeFile(t, filepath.Join("testdata", "events", "seed-resumed.jsonl"), eventlog.AnalyzeOptions{SID: "f4e3d2c1"})
	if *old.Analyzed != "f4e3d2c1" || *old.Interrupted != "b5a4c3d2" || old.Decision != eventlog.DecisionAutoResume {
		t.Errorf("analysis of f4e3d2c1: analyzed %v interrupted %v decision %s", *old.Analyzed, *old.Interrupted, old.Decision)
	}
	_, err := eventlog.AnalyzeJSONL(func() (io.ReadCloser, error) {
		return os.Open(filepath.Join("testdata", "events", "seed-resumed.jsonl"))
	}, eventlog.AnalyzeOptions{SID: "nope"})
	if !errors.Is(err, teambus.ErrNotFound) {
		t.Errorf("unknown sid: %v", err)
	}
}

// Damaged logs give the seed's analysis, with the damage reported.
func TestAnalyze_Damaged(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file    string
		lines   int64
		blank   int64
		damaged []int64
		reasons []string
	}{
		{"damaged-truncated.jsonl", 12, 0, []int64{12}, []string{"truncated last line"}},
		{"damaged-junk.jsonl", 18, 3, []int64{5, 10, 11, 12}, []string{"malformed JSON", "truncated", "not an event: not a JSON object", "not an event: missing sid"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			a := analyzeTestdata(t, tt.file)
			var lines []int64
			for i, d := range a.Damaged {
				lines = append(lines, d.Line)
				if i < len(tt.reasons) && !strings.Contains(d.Reason, tt.reasons[i]) {
					t.Errorf("damaged line %d: %q, want %q", d.Line, d.Reason, tt.reasons[i])
				}
			}
			if !reflect.DeepEqual(lines, tt.damaged) || a.Lines != tt.lines || a.Blank != tt.blank || a.Events != 11 {
				t.Errorf("damaged lines %v (want %v), lines %d (want %d), blank %d (want %d), events %d", lines, tt.damaged, a.Lines, tt.lines, a.Blank, tt.blank, a.Events)
			}
			if a.Decision != eventlog.DecisionAutoResume || taskStatuses(a.Tasks) != "1=COMPLETE 2=IN_PROGRESS" || a.LastCheckpoint.Seq != 7 {
				t.Errorf("decision %s tasks %s", a.Decision, taskStatuses(a.Tasks))
			}
		})
	}
}

// Lost events show as a gap; the analysis goes on from the checkpoint.
func TestAnalyze_Gap(t *testing.T) {
	t.Parallel()
	a := analyzeTestdata(t, "gap.jsonl")
	want := []eventlog.Gap{{AfterSeq: 4, ExpectedSeq: 5, ActualSeq: 7, MissingCount: 2}}
	if !reflect.DeepEqual(a.Gaps, want) || a.Sessions[0].Missing != 2 || a.Sessions[0].Gaps != 1 {
		t.Fatalf("gaps = %+v, session %+v", a.Gaps, a.Sessions[0])
	}
	if a.Decision != eventlog.DecisionAutoResume || !strings.Contains(strings.Join(a.Reasons, "\n"), "2 event(s) missing") {
		t.Errorf("decision %s reasons %q", a.Decision, a.Reasons)
	}
	// agent.completed of schema-designer was lost: it still looks active.
	if !reflect.DeepEqual(a.ActiveAgents, []string{"schema-designer", "service-eng"}) {
		t.Errorf("active agents = %v", a.ActiveAgents)
	}
}

// Of two lines with the same sid and seq the later wins, exactly: the
// earlier line's effects are gone (a second pass over the log).
func TestAnalyze_DuplicateLaterWins(t *testing.T) {
	t.Parallel()
	a := analyzeTestdata(t, "duplicate.jsonl")
	if got := a.Duplicates; len(got) != 2 || got[0].Seq != 9 || got[0].Line != 12 || got[1].Seq != 10 || got[1].Line != 13 {
		t.Fatalf("duplicates = %+v", got)
	}
	// seq 10 first said resolved:false (an issue), the later line says
	// resolved:true.
	if len(a.Issues) != 0 || !reflect.DeepEqual(seqsOf(a.Resolved), []int64{10}) || a.Decision != eventlog.DecisionAutoResume {
		t.Errorf("issues %v resolved %v decision %s", seqsOf(a.Issues), seqsOf(a.Resolved), a.Decision)
	}
	if files := a.Tasks["2"].Files; !reflect.DeepEqual(files, []string{"src/api/service.ts", "src/api/routes.ts"}) {
		t.Errorf("task 2 files = %v, want the later line's", files)
	}
	if s := a.Sessions[0]; s.EventCount != 11 || s.Duplicates != 2 || a.Events != 13 {
		t.Errorf("session %+v, events %d", s, a.Events)
	}
}

// Issues after the checkpoint need a decision (seed 004, case B).
func TestAnalyze_NeedsDecision(t *testing.T) {
	t.Parallel()
	a := analyzeTestdata(t, "needs-decision.jsonl")
	if a.Decision != eventlog.DecisionNeedsDecision {
		t.Fatalf("decision = %s", a.Decision)
	}
	var types []string
	for _, e := range a.Issues {
		types = append(types, e.Type)
	}
	if !reflect.DeepEqual(types, []string{"error.encountered", "task.failed", "blocker.reported"}) || !reflect.DeepEqual(seqsOf(a.Warnings), []int64{11}) {
		t.Errorf("issues %v, warnings %v", types, seqsOf(a.Warnings))
	}
	if t2 := a.Tasks["2"]; t2.Status != eventlog.TaskStateFailed || t2.Error != "QA failed 3 rounds" || t2.Attempts == nil || *t2.Attempts != 3 {
		t.Errorf("task 2 = %+v", t2)
	}
}

func TestAnalyze_Clean(t *testing.T) {
	t.Parallel()
	a := analyzeTestdata(t, "clean.jsonl")
	if a.Decision != eventlog.DecisionClean || a.Interrupted != nil || a.Analyzed != nil || len(a.InterruptedSessions) != 0 {
		t.Errorf("decision %s interrupted %v analyzed %v", a.Decision, a.Interrupted, a.Analyzed)
	}
	b, err := json.Marshal(a)
	if err != nil || !strings.Contains(string(b), `"interrupted":null`) || !strings.Contains(string(b), `"last_checkpoint":null`) || !strings.Contains(string(b), `"tasks":{}`) {
		t.Errorf("clean analysis JSON = %s, %v", b, err)
	}
}

func TestAnalyzer_InMemory(t *testing.T) {
	t.Parallel()
	ev := func(sid string, seq int64, typ, data string) *eventlog.Event {
		return &eventlog.Event{SID: sid, Seq: seq, Type: typ, Data: json.RawMessage(data), TS: time.Unix(seq, 0)}
	}
	a := eventlog.NewAnalyzer(eventlog.AnalyzeOptions{MaxListed: 2})
	a.Add(1, ev("s", 0, "session.start", `{}`))
	a.Add(2, ev("s", 1, "checkpoint", `{"label":"one"}`))
	for i := int64(2); i < 7; i++ {
		a.Add(i+1, ev("s", i, "error.encountered", `{"error":"x"}`))
	}
	a.Add(8, ev("s", 7, "agent.spawned", `{"name":"tm1"}`))
	a.Add(9, ev("s", 8, "agent.crashed", `{"name":"tm1"}`))
	a.Add(10, ev("s", 9, "agent.spawned", `{"name":"tm1"}`))
	a.Add(11, ev("s", 10, "task.claimed", `{"taskId":"t1","agent":"tm1"}`))
	a.Add(12, ev("s", 11, "task.requeued", `{"taskId":"t1"}`))
	a.Add(13, ev("s", 12, "task.added", `{"taskId":"t2","status":"pending"}`))
	res, err := a.Result()
	if err != nil {
		t.Fatal(err)
	}
	// 5 errors and a crash after the checkpoint; 2 listed, 4 left out.
	if res.Decision != eventlog.DecisionNeedsDecision || len(res.Issues) != 2 || res.Omitted["issues"] != 4 || res.Issues[1].Type != "agent.crashed" {
		t.Errorf("decision %s issues %v omitted %v", res.Decision, seqsOf(res.Issues), res.Omitted)
	}
	if !reflect.DeepEqual(res.ActiveAgents, []string{"tm1"}) || taskStatuses(res.Tasks) != "t1=AVAILABLE t2=PENDING" {
		t.Errorf("agents %v tasks %s", res.ActiveAgents, taskStatuses(res.Tasks))
	}
	// A later checkpoint clears what came before it.
	a.Add(14, ev("s", 13, "checkpoint", `{"label":"two","resumable":false}`))
	res, _ = a.Result()
	if res.Decision != eventlog.DecisionNeedsDecision || len(res.Issues) != 0 || res.Omitted["issues"] != 0 || !strings.Contains(res.Reasons[0], "resumable:false") {
		t.Errorf("after second checkpoint: %s %v %v %q", res.Decision, seqsOf(res.Issues), res.Omitted, res.Reasons)
	}
}

func TestSeqSet(t *testing.T) {
	t.Parallel()
	var s eventlog.SeqSet
	for _, n := range []int64{5, 7, 6, 1, 3, 2, 10, 0, 4, 9} {
		if s.Add(n) {
			t.Fatalf("%d reported present", n)
		}
	}
	for _, n := range []int64{0, 5, 7, 10} {
		if !s.Add(n) || !s.Has(n) {
			t.Fatalf("%d not present", n)
		}
	}
	if s.Has(8) || s.Has(11) || s.Has(-1) || s.Len() != 10 {
		t.Errorf("has 8 %t, has 11 %t, len %d", s.Has(8), s.Has(11), s.Len())
	}
}

// genLog writes a log of n lines: 100 sessions of n/100 events each,
// written one after the other like a long-lived project's log, the last
// session interrupted. Each event is about 300 bytes, like the seed's.
func genLog(tb testing.TB, path string, n int) int64 {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	const sessions = 100
	per := n / sessions
	t0 := time.Date(2026, 2, 14, 10, 0, 0, 0, time.UTC)
	var buf []byte
	line := 0
	for s := 0; s < sessions; s++ {
		sid := fmt.Sprintf("%08x", 0xf4e3d2c1+s)
		for i := 0; i < per; i++ {
			e := eventlog.Event{V: 1, TS: t0.Add(time.Duration(line) * time.Millisecond), SID: sid, Seq: int64(i), Feature: "auth-system"}
			task := fmt.Sprintf("%d", i/10)
			switch {
			case i == 0:
				e.Type, e.Data = "session.start", json.RawMessage(`{"command":"implement","feature":"auth-system","branch":"feature/auth-system","mode":"strict"}`)
			case i == per-1 && s < sessions-1:
				e.Type, e.Data = "session.end", json.RawMessage(`{"reason":"done"}`)
			case i%100 == 1:
				e.Type, e.Data = "checkpoint", json.RawMessage(fmt.Sprintf(`{"label":"wave-%d-complete","branch":"feature/auth-system","plan_step":"wave-%d-start","resumable":true}`, i/100, i/100+1))
			case i%10 == 2:
				e.Type, e.Data = "agent.spawned", json.RawMessage(fmt.Sprintf(`{"name":"eng-%d","role":"Standard Coding Agent","task":"%s","branch":"work/auth-system/t%s"}`, i%7, task, task))
			case i%10 == 3:
				e.Type, e.Agent, e.Data = "task.started", fmt.Sprintf("eng-%d", i%7), json.RawMessage(fmt.Sprintf(`{"taskId":"%s","summary":"Build part %s","agent":"eng-%d","files":["src/api/p%s.ts"]}`, task, task, i%7, task))
			case i%10 == 7:
				e.Type, e.Agent, e.Data = "task.completed", fmt.Sprintf("eng-%d", i%7), json.RawMessage(fmt.Sprintf(`{"taskId":"%s","summary":"Build part %s","files_changed":["src/api/p%s.ts","src/api/p%s.test.ts"]}`, task, task, task, task))
			case i%10 == 8:
				e.Type, e.Data = "agent.completed", json.RawMessage(fmt.Sprintf(`{"name":"eng-%d","result":"success"}`, i%7))
			case i%50 == 9:
				e.Type, e.Agent, e.Data = "error.encountered", "eng-1", json.RawMessage(`{"file":"src/api/service.ts","line":42,"error":"Import path not found: ../db/schema","attempts":1,"resolved":true}`)
			case i%50 == 19:
				e.Type, e.Data = "warning.logged", json.RawMessage(`{"message":"test suite took 4 minutes","context":{"suite":"api","slowest":"auth.test.ts"}}`)
			default:
				e.Type, e.Data = "branch.merged", json.RawMessage(fmt.Sprintf(`{"name":"work/auth-system/t%s","target":"feature/auth-system","conflicts":false}`, task))
			}
			buf = e.AppendJSON(buf[:0])
			buf = append(buf, '\n')
			if _, err := w.Write(buf); err != nil {
				tb.Fatal(err)
			}
			line++
		}
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return st.Size()
}

// bigLog generates a 1,000,000-line log in a temporary directory.
func bigLog(b *testing.B) (string, int64) {
	b.Helper()
	path := filepath.Join(b.TempDir(), "events.jsonl")
	return path, genLog(b, path, 1_000_000)
}

// heapPeak samples the live heap every millisecond until stopped and
// returns the highest reading, in bytes.
func heapPeak(ctx context.Context) func() uint64 {
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var (
		peak uint64
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(samples)
			if v := samples[0].Value.Uint64(); v > peak {
				peak = v
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 { <-done; return peak }
}

// BenchmarkAnalyzeJSONL_1M analyzes a 1,000,000-line log (about 280 MB)
// from disk. It reports the peak heap (sampled every millisecond) next to
// time and allocation.
func BenchmarkAnalyzeJSONL_1M(b *testing.B) {
	path, size := bigLog(b)
	runtime.GC()
	b.SetBytes(size)
	b.ReportAllocs()
	ctx, stop := context.WithCancel(context.Background())
	peak := heapPeak(ctx)
	b.ResetTimer()
	var res *eventlog.Analysis
	for i := 0; i < b.N; i++ {
		res = analyzeFile(b, path, eventlog.AnalyzeOptions{})
	}
	b.StopTimer()
	stop()
	if res.Events != 1_000_000 || res.Decision != eventlog.DecisionAutoResume || len(res.Sessions) != 100 || *res.Interrupted != "f4e3d324" {
		b.Fatalf("analysis: %d events, decision %s, %d sessions, interrupted %v", res.Events, res.Decision, len(res.Sessions), *res.Interrupted)
	}
	b.ReportMetric(float64(peak())/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(res.Events)/b.Elapsed().Seconds()*float64(b.N), "lines/s")
}

func analyzeString(t testing.TB, log string, opts eventlog.AnalyzeOptions) *eventlog.Analysis {
	t.Helper()
	res, err := eventlog.AnalyzeJSONL(func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(log)), nil }, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A later line that replaces a session.end makes the session interrupted
// again: its state, dropped at the session.end, is rebuilt.
func TestAnalyze_DuplicateUndoesEnd(t *testing.T) {
	t.Parallel()
	line := func(seq int, typ, data string) string {
		return fmt.Sprintf(`{"v":1,"ts":"2026-02-14T10:00:0%d.000Z","sid":"s","seq":%d,"type":%q,"feature":null,"agent":null,"pane_id":null,"data":%s}`, seq, seq, typ, data)
	}
	log := strings.Join([]string{
		line(0, "session.start", `{}`),
		line(1, "task.started", `{"taskId":"7","agent":"tm1"}`),
		line(2, "session.end", `{}`),
		line(2, "warning.logged", `{"message":"the end was written too early"}`),
	}, "\n") + "\n"
	a := analyzeString(t, log, eventlog.AnalyzeOptions{})
	if a.Interrupted == nil || *a.Interrupted != "s" || a.Sessions[0].HasEnd {
		t.Fatalf("interrupted %v, session %+v", a.Interrupted, a.Sessions[0])
	}
	if taskStatuses(a.Tasks) != "7=IN_PROGRESS" || a.Decision != eventlog.DecisionNoCheckpoint || !reflect.DeepEqual(seqsOf(a.Warnings), []int64{2}) {
		t.Errorf("tasks %s, decision %s, warnings %v", taskStatuses(a.Tasks), a.Decision, seqsOf(a.Warnings))
	}
	// A session that ended keeps its state when it is asked for by name.
	b := analyzeTestdata(t, "clean.jsonl")
	if b.Decision != eventlog.DecisionClean {
		t.Fatal(b.Decision)
	}
	c := analyzeFile(t, filepath.Join("testdata", "events", "clean.jsonl"), eventlog.AnalyzeOptions{SID: "f4e3d2c1"})
	if c.Decision != eventlog.DecisionClean || *c.Analyzed != "f4e3d2c1" || taskStatuses(c.Tasks) != "1=COMPLETE 2=IN_PROGRESS" || c.LastCheckpoint == nil {
		t.Errorf("named ended session: decision %s tasks %s", c.Decision, taskStatuses(c.Tasks))
	}
}
