package eventlog_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/node/nodetest"
)

func evCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// evLog is a declared event log of team alpha on a fresh node.
func evLog(t testing.TB, cfg eventlog.EventsConfig) (*eventlog.Events, *bus.Conn) {
	t.Helper()
	n := nodetest.NewBareServer(t)
	c := nodetest.Connect(t, n)
	ev := eventlog.NewEvents(c.JS, "alpha", cfg)
	if err := ev.Declare(evCtx(t)); err != nil {
		t.Fatal(err)
	}
	return ev, c
}

func evAppend(t testing.TB, ev *eventlog.Events, e eventlog.Event) eventlog.AppendResult {
	t.Helper()
	res, err := ev.Append(evCtx(t), &e)
	if err != nil {
		t.Fatalf("append %s %s/%d: %v", e.Type, e.SID, e.Seq, err)
	}
	return res
}

func evReplay(t testing.TB, ev *eventlog.Events, f eventlog.EventFilter) []eventlog.Event {
	t.Helper()
	var out []eventlog.Event
	err := ev.Replay(evCtx(t), f, func(r *eventlog.EventRecord) error {
		if r.Err != nil {
			return fmt.Errorf("stream seq %d: %w", r.StreamSeq, r.Err)
		}
		out = append(out, copyEv(r.Event))
		return nil
	})
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	return out
}

func copyEv(e eventlog.Event) eventlog.Event {
	e.Data = append([]byte(nil), e.Data...)
	return e
}

func evKeys(evs []eventlog.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%s/%d/%s", e.SID, e.Seq, e.Type))
	}
	return out
}

func TestEvents_Append_AutoSeq(t *testing.T) {
	t.Parallel()
	ev, _ := evLog(t, eventlog.EventsConfig{})
	for i := 0; i < 3; i++ {
		res := evAppend(t, ev, eventlog.Event{SID: "s1", Seq: eventlog.AutoSeq, Type: "task.started", Data: []byte(`{"taskId":"1"}`)})
		if res.Seq != int64(i) || res.Duplicate || res.StreamSeq != uint64(i+1) {
			t.Fatalf("append %d = %+v", i, res)
		}
	}
	// Another session counts from 0; an explicit seq is kept.
	if res := evAppend(t, ev, eventlog.Event{SID: "s2", Seq: eventlog.AutoSeq, Type: "checkpoint"}); res.Seq != 0 {
		t.Errorf("first event of s2 got seq %d, want 0", res.Seq)
	}
	if res := evAppend(t, ev, eventlog.Event{SID: "s1", Seq: 10, Type: "task.failed"}); res.Seq != 10 {
		t.Errorf("explicit seq = %d, want 10", res.Seq)
	}
	if res := evAppend(t, ev, eventlog.Event{SID: "s1", Seq: eventlog.AutoSeq, Type: "warning.logged"}); res.Seq != 11 {
		t.Errorf("seq after an explicit 10 = %d, want 11", res.Seq)
	}
	// Written out of order: the number after the last one written (0) is
	// taken, and so is the one after it: the append goes on to 3.
	evAppend(t, ev, eventlog.Event{SID: "s3", Seq: 1, Type: "checkpoint"})
	evAppend(t, ev, eventlog.Event{SID: "s3", Seq: 2, Type: "checkpoint"})
	evAppend(t, ev, eventlog.Event{SID: "s3", Seq: 0, Type: "checkpoint"})
	if res := evAppend(t, ev, eventlog.Event{SID: "s3", Seq: eventlog.AutoSeq, Type: "checkpoint"}); res.Seq != 3 || res.Duplicate {
		t.Errorf("auto seq after 1, 2, 0 = %+v, want 3 (1 and 2 are taken)", res)
	}
	// The same (sid, seq) again is a duplicate: stored once.
	res := evAppend(t, ev, eventlog.Event{SID: "s1", Seq: 10, Type: "task.failed"})
	if !res.Duplicate {
		t.Errorf("second append of s1/10: %+v, want duplicate", res)
	}
	got := evKeys(evReplay(t, ev, eventlog.EventFilter{}))
	want := []string{"s1/0/task.started", "s1/1/task.started", "s1/2/task.started", "s2/0/checkpoint", "s1/10/task.failed", "s1/11/warning.logged",
		"s3/1/checkpoint", "s3/2/checkpoint", "s3/0/checkpoint", "s3/3/checkpoint"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("log = %v, want %v", got, want)
	}
}

// Concurrent writers to one session each get their own seq: no gaps, no
// duplicates.
func TestEvents_Append_AutoSeqConcurrent(t *testing.T) {
	t.Parallel()
	ev, _ := evLog(t, eventlog.EventsConfig{})
	const writers, each = 6, 15
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				e := &eventlog.Event{SID: "shared", Seq: eventlog.AutoSeq, Type: "task.claimed", Agent: fmt.Sprintf("w%d", w)}
				if _, err := ev.Append(evCtx(t), e); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := evReplay(t, ev, eventlog.EventFilter{})
	if len(got) != writers*each {
		t.Fatalf("%d events stored, want %d", len(got), writers*each)
	}
	for i, e := range got {
		if e.Seq != int64(i) {
			t.Fatalf("event %d has seq %d: seqs must be 0..%d in log order", i, e.Seq, writers*each-1)
		}
	}
}

func TestEvents_Append_Invalid(t *testing.T) {
	t.Parallel()
	ev, _ := evLog(t, eventlog.EventsConfig{})
	for _, e := range []eventlog.Event{
		{SID: "s", Type: "Task.Started"},
		{SID: "s", Type: "a..b"},
		{SID: "s", Type: "tb.x>"},
		{SID: "", Type: "checkpoint"},
		{SID: "s\n", Type: "checkpoint"},
		{SID: strings.Repeat("s", 129), Type: "checkpoint"},
		{SID: "s", Type: "checkpoint", Data: []byte("{nope")},
		{SID: "s", Type: "checkpoint", Agent: "a\tb"},
		{SID: "s", Type: "checkpoint", Seq: -2},
		{SID: "s", Type: "checkpoint", Data: []byte(`"` + strings.Repeat("x", eventlog.MaxSize) + `"`)},
	} {
		if _, err := ev.Append(evCtx(t), &e); !errors.Is(err, teambus.ErrInvalid) {
			t.Errorf("append %+.60v = %v, want ErrInvalid", e, err)
		}
	}
	if got := evReplay(t, ev, eventlog.EventFilter{}); len(got) != 0 {
		t.Errorf("refused appends stored %d events", len(got))
	}
}

// A team created before event logs existed gets its stream on first
// append.
func TestEvents_Append_CreatesStreamLazily(t *testing.T) {
	t.Parallel()
	n := nodetest.NewBareServer(t)
	c := nodetest.Connect(t, n)
	ev := eventlog.NewEvents(c.JS, "old", eventlog.EventsConfig{MaxBytes: 8 << 20})
	if got := evReplay(t, ev, eventlog.EventFilter{}); len(got) != 0 {
		t.Fatalf("replay without a stream = %v", got)
	}
	for _, seq := range []int64{eventlog.AutoSeq, 7} {
		if _, err := ev.Append(evCtx(t), &eventlog.Event{SID: "s", Seq: seq, Type: "checkpoint"}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := c.JS.Stream(evCtx(t), ev.Stream())
	if err != nil {
		t.Fatal(err)
	}
	if info := st.CachedInfo(); info.Config.MaxBytes != 8<<20 || info.State.Msgs != 2 {
		t.Errorf("lazily created stream: max bytes %d, %d messages", info.Config.MaxBytes, info.State.Msgs)
	}
}

func TestEvents_Replay_Filters(t *testing.T) {
	t.Parallel()
	ev, _ := evLog(t, eventlog.EventsConfig{})
	t0 := time.Date(2026, 2, 14, 10, 0, 0, 0, time.UTC)
	for i, e := range []eventlog.Event{
		{SID: "a", Type: "task.started", Agent: "tm1"},
		{SID: "a", Type: "task.completed", Agent: "tm1"},
		{SID: "b", Type: "task.started", Agent: "tm2"},
		{SID: "a", Type: "checkpoint"},
		{SID: "b", Type: "task.completed", Agent: "tm2"},
		{SID: "b", Type: "custom type!", Agent: "tm2"},
	} {
		e.Seq, e.TS = eventlog.AutoSeq, t0.Add(time.Duration(i)*time.Minute)
		if e.Type == "custom type!" {
			// Types outside the rule can not be appended, only imported.
			continue
		}
		evAppend(t, ev, e)
	}
	tests := []struct {
		name string
		f    eventlog.EventFilter
		want string
	}{
		{"all", eventlog.EventFilter{}, "a/0/task.started a/1/task.completed b/0/task.started a/2/checkpoint b/1/task.completed"},
		{"type", eventlog.EventFilter{Type: "task.started"}, "a/0/task.started b/0/task.started"},
		{"sid", eventlog.EventFilter{SID: "b"}, "b/0/task.started b/1/task.completed"},
		{"sid and type", eventlog.EventFilter{SID: "a", Type: "task.completed"}, "a/1/task.completed"},
		{"agent", eventlog.EventFilter{Agent: "tm2"}, "b/0/task.started b/1/task.completed"},
		{"since seq", eventlog.EventFilter{SinceSeq: 4}, "a/2/checkpoint b/1/task.completed"},
		{"until seq", eventlog.EventFilter{UntilSeq: 2}, "a/0/task.started a/1/task.completed"},
		{"since time", eventlog.EventFilter{SinceTime: t0.Add(2 * time.Minute)}, "b/0/task.started a/2/checkpoint b/1/task.completed"},
		{"until time", eventlog.EventFilter{UntilTime: t0.Add(time.Minute)}, "a/0/task.started a/1/task.completed"},
		{"limit", eventlog.EventFilter{Limit: 2, Type: "task.completed"}, "a/1/task.completed b/1/task.completed"},
		{"no match", eventlog.EventFilter{Type: "session.end"}, ""},
		{"unknown sid", eventlog.EventFilter{SID: "zz"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := strings.Join(evKeys(evReplay(t, ev, tt.f)), " ")
			if got != tt.want {
				t.Errorf("replay %+v = %q, want %q", tt.f, got, tt.want)
			}
		})
	}
	if err := ev.Replay(evCtx(t), eventlog.EventFilter{Limit: -1}, nil); !errors.Is(err, teambus.ErrInvalid) {
		t.Errorf("negative limit: %v", err)
	}
}

// Follow delivers what is appended while it runs, until its context ends.
func TestEvents_Replay_Follow(t *testing.T) {
	t.Parallel()
	ev, _ := evLog(t, eventlog.EventsConfig{})
	evAppend(t, ev, eventlog.Event{SID: "s", Seq: eventlog.AutoSeq, Type: "session.start"})
	ctx, cancel := context.WithCancel(evCtx(t))
	defer cancel()
	got := make(chan string, 16)
	done := make(chan error, 1)
	go func() {
		done <- ev.Replay(ctx, eventlog.EventFilter{Follow: true, Type: "task.started"}, func(r *eventlog.EventRecord) error {
			got <- fmt.Sprintf("%s/%d", r.Event.SID, r.Event.Seq)
			return nil
		})
	}()
	for i := 0; i < 3; i++ {
		evAppend(t, ev, eventlog.Event{SID: "s", Seq: eventlog.AutoSeq, Type: "task.started"})
		evAppend(t, ev, eventlog.Event{SID: "s", Seq: eventlog.AutoSeq, Type: "warning.logged"})
	}
	for _, want := range []string{"s/1", "s/3", "s/5"} {
		select {
		case g := <-got:
			if g != want {
				t.Fatalf("followed %s, want %s", g, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("follow did not deliver %s", want)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("follow returned %v after cancel", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not stop after cancel")
	}
}

func evReadFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func evImport(t testing.TB, ev *eventlog.Events, data []byte) eventlog.ImportResult {
	t.Helper()
	res, err := ev.Import(evCtx(t), bytes.NewReader(data))
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	return res
}

func evExport(t testing.TB, ev *eventlog.Events) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := ev.Export(evCtx(t), &buf); err != nil {
		t.Fatalf("export: %v", err)
	}
	return buf.Bytes()
}

// Import then export gives back the file byte for byte, and a second
// import stores nothing.
func TestEvents_ImportExport_RoundTrip(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"seed-interrupted.jsonl", "seed-resumed.jsonl"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ev, _ := evLog(t, eventlog.EventsConfig{})
			in := evReadFile(t, filepath.Join("..", "eventlog", "testdata", "events", name))
			res := evImport(t, ev, in)
			lines := int64(bytes.Count(in, []byte("\n")))
			if res.Imported != lines || res.Duplicates != 0 || res.SkippedCount != 0 || res.Superseded != 0 {
				t.Fatalf("first import = %+v, want %d imported", res, lines)
			}
			if out := evExport(t, ev); !bytes.Equal(out, in) {
				t.Fatalf("export differs from the imported file:\n%s\nwant:\n%s", out, in)
			}
			res = evImport(t, ev, in)
			if res.Imported != 0 || res.Duplicates != lines {
				t.Fatalf("second import = %+v, want %d duplicates, nothing imported", res, lines)
			}
			if out := evExport(t, ev); !bytes.Equal(out, in) {
				t.Fatalf("second import changed the log:\n%s", out)
			}
		})
	}
}

// Idempotence does not rest on the dedupe window alone: the log itself is
// checked.
func TestEvents_Import_TwiceAfterWindow(t *testing.T) {
	t.Parallel()
	ev, _ := evLog(t, eventlog.EventsConfig{Duplicates: time.Second})
	in := evReadFile(t, filepath.Join("..", "eventlog", "testdata", "events", "seed-interrupted.jsonl"))
	evImport(t, ev, in)
	time.Sleep(1500 * time.Millisecond) // past the window
	if res := evImport(t, ev, in); res.Imported != 0 || res.Duplicates != 11 {
		t.Fatalf("import after the window = %+v", res)
	}
	if got := evReplay(t, ev, eventlog.EventFilter{}); len(got) != 11 {
		t.Fatalf("%d events stored, want 11", len(got))
	}
}

// Damaged lines are skipped and reported; of duplicate lines the later
// wins; the rest keeps file order.
func TestEvents_Import_Damaged(t *testing.T) {
	t.Parallel()
	ev, _ := evLog(t, eventlog.EventsConfig{})
	in := strings.Join([]string{
		`{"v":1,"ts":"2026-02-14T10:00:00.000Z","sid":"s","seq":0,"type":"session.start","feature":null,"agent":null,"pane_id":null,"data":{}}`,
		``,
		`garbage`,
		`{"v":1,"ts":"2026-02-14T10:00:01.000Z","sid":"s","seq":1,"type":"task.started","feature":null,"agent":null,"pane_id":null,"data":{"taskId":"1"}}`,
		`{"v":1,"ts":"2026-02-14T10:00:02.000Z","sid":"s","seq":1,"type":"task.completed","feature":null,"agent":null,"pane_id":null,"data":{"taskId":"1"}}`,
		`{"v":1,"ts":"2026-02-14T10:00:03.000Z","sid":"s","seq":2,"type":"odd type!","feature":null,"agent":null,"pane_id":null,"data":null}`,
		`{"v":1,"ts":"2026-02-14T10:00:04.000Z","sid":"s","seq":3,"type":"checkpoint","fea`,
	}, "\n")
	res := evImport(t, ev, []byte(in))
	if res.Imported != 3 || res.Superseded != 1 || res.SkippedCount != 2 || res.Lines != 7 || res.Blank != 1 {
		t.Fatalf("import = %+v", res)
	}
	if res.Skipped[0].Line != 3 || res.Skipped[1].Line != 7 || !strings.Contains(res.Skipped[1].Reason, "truncated") {
		t.Errorf("skipped = %+v", res.Skipped)
	}
	got := strings.Join(evKeys(evReplay(t, ev, eventlog.EventFilter{})), " ")
	if want := "s/0/session.start s/1/task.completed s/2/odd type!"; got != want {
		t.Errorf("log = %q, want %q", got, want)
	}
	// A type outside the rule is stored under a hashed subject token and
	// can still be filtered.
	if got := evReplay(t, ev, eventlog.EventFilter{Type: "odd type!"}); len(got) != 1 {
		t.Errorf("filter by imported odd type: %d events", len(got))
	}
}

func TestEvents_Analyze(t *testing.T) {
	t.Parallel()
	ev, _ := evLog(t, eventlog.EventsConfig{})
	evImport(t, ev, evReadFile(t, filepath.Join("..", "eventlog", "testdata", "events", "seed-interrupted.jsonl")))
	res, err := ev.Analyze(evCtx(t), eventlog.AnalyzeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Decision != eventlog.DecisionAutoResume || res.Interrupted == nil || *res.Interrupted != "f4e3d2c1" || res.Events != 11 {
		t.Errorf("analysis of the seed log: decision %s, interrupted %v, %d events", res.Decision, res.Interrupted, res.Events)
	}
}

func TestEventSubject_Safe(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ sid, typ string }{
		{"f4e3d2c1", "task.started"},
		{"a.b.*.>", "x.>"},
		{"sp ace\n", "Task Started"},
		{"", ""},
	} {
		subj := eventlog.EventSubject("alpha", tt.sid, tt.typ)
		parts := strings.Split(subj, ".")
		if len(parts) != 5 || parts[0] != "tb" || parts[1] != "alpha" || parts[2] != "evt" {
			t.Fatalf("EventSubject(%q, %q) = %q", tt.sid, tt.typ, subj)
		}
		for _, p := range parts {
			if p == "" || strings.ContainsAny(p, "*> \t\r\n") {
				t.Fatalf("EventSubject(%q, %q) = %q: unsafe token", tt.sid, tt.typ, subj)
			}
		}
	}
	if got := eventlog.TypeToken("task.started"); got != "task-started" {
		t.Errorf("TypeToken(task.started) = %q", got)
	}
	if a, b := eventlog.TypeToken("a-b"), eventlog.TypeToken("a.b"); a == b {
		t.Errorf("types a-b and a.b share token %q", a)
	}
}

func FuzzEventSubject(f *testing.F) {
	for _, s := range []string{"f4e3d2c1", "task.started", "a.b", "*", ">", "a b", "", "é", "X1234"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, sid, typ string) {
		subj := eventlog.EventSubject("alpha", sid, typ)
		parts := strings.Split(subj, ".")
		if len(parts) != 5 {
			t.Fatalf("EventSubject(%q, %q) = %q: want 5 tokens", sid, typ, subj)
		}
		for _, p := range parts {
			if p == "" {
				t.Fatalf("empty token in %q", subj)
			}
			for _, r := range p {
				if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
					t.Fatalf("EventSubject(%q, %q) = %q: unsafe rune %q", sid, typ, subj, r)
				}
			}
		}
		if eventlog.ValidType(typ) && parts[4] != strings.ReplaceAll(typ, ".", "-") {
			t.Fatalf("type %q has token %q", typ, parts[4])
		}
	})
}

// A log of many sessions is checked against the whole stream; a few
// sessions against their own subjects. Both are idempotent.
func TestEvents_Import_ManySessionsTwice(t *testing.T) {
	t.Parallel()
	ev, _ := evLog(t, eventlog.EventsConfig{Duplicates: time.Second})
	many := evBenchLog(500) // 50 sessions
	few := readFileLines(t)
	for i, in := range [][]byte{many, few} {
		res := evImport(t, ev, in)
		n := int64(bytes.Count(in, []byte("\n")))
		if res.Imported != n {
			t.Fatalf("log %d: first import %+v, want %d imported", i, res, n)
		}
	}
	time.Sleep(1100 * time.Millisecond) // past the dedupe window: the stream decides
	for i, in := range [][]byte{many, few} {
		n := int64(bytes.Count(in, []byte("\n")))
		if res := evImport(t, ev, in); res.Imported != 0 || res.Duplicates != n {
			t.Fatalf("log %d: second import %+v, want %d duplicates", i, res, n)
		}
	}
}

func readFileLines(t testing.TB) []byte {
	return evReadFile(t, filepath.Join("..", "eventlog", "testdata", "events", "seed-resumed.jsonl"))
}
