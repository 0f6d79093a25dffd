package eventlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/node/nodetest"
)

// evBenchLog is a JSONL log of n events of about 300 bytes in 50
// sessions, like seed 004's.
func evBenchLog(n int) []byte {
	var buf bytes.Buffer
	t0 := time.Date(2026, 2, 14, 10, 0, 0, 0, time.UTC)
	var line []byte
	for i := 0; i < n; i++ {
		e := eventlog.Event{V: 1, TS: t0.Add(time.Duration(i) * time.Millisecond), SID: fmt.Sprintf("bench-%02d", i%50), Seq: int64(i / 50),
			Type: "task.started", Feature: "auth-system", Agent: "service-eng",
			Data: json.RawMessage(fmt.Sprintf(`{"taskId":"%d","summary":"Build API part %d","agent":"service-eng","files":["src/api/service.ts","src/api/p%d.ts"]}`, i/10, i/10, i))}
		if i%100 == 0 {
			e.Type, e.Data = "checkpoint", json.RawMessage(fmt.Sprintf(`{"label":"wave-%d-complete","branch":"feature/auth-system","plan_step":"wave-%d-start","resumable":true}`, i/100, i/100+1))
		}
		line = e.AppendJSON(line[:0])
		buf.Write(line)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// evBenchStream is a node (sync interval: filling is not what is measured)
// with a team event log large enough for the benchmarks.
func evBenchStream(b *testing.B) *eventlog.Events {
	b.Helper()
	n := nodetest.NewBareServerConfig(b, node.NodeConfig{Sync: bus.SyncModeInterval, MaxStore: 16 << 30})
	c := nodetest.Connect(b, n)
	ev := eventlog.NewEvents(c.JS, "bench", eventlog.EventsConfig{MaxBytes: 4 << 30})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ev.Declare(ctx); err != nil {
		b.Fatal(err)
	}
	return ev
}

// BenchmarkEvents_Import imports a 100,000-line log into an empty stream:
// two passes over the file, a scan of the stream, pipelined publishes.
func BenchmarkEvents_Import(b *testing.B) {
	const n = 100_000
	log := evBenchLog(n)
	b.SetBytes(int64(len(log)))
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ev := evBenchStream(b)
		b.StartTimer()
		res, err := ev.Import(context.Background(), bytes.NewReader(log))
		if err != nil || res.Imported != n {
			b.Fatalf("import: %+v, %v", res.Imported, err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkEvents_Replay replays a stream of 500,000 events through the
// ordered consumer, decoding each. It reports events per second and the
// peak heap, which stays flat however long the stream is.
func BenchmarkEvents_Replay(b *testing.B) {
	const n = 500_000
	ev := evBenchStream(b)
	ctx := context.Background()
	if res, err := ev.Import(ctx, bytes.NewReader(evBenchLog(n))); err != nil || res.Imported != n {
		b.Fatalf("fill: %+v, %v", res, err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		count := 0
		err := ev.Replay(ctx, eventlog.EventFilter{}, func(r *eventlog.EventRecord) error {
			if r.Err != nil {
				return r.Err
			}
			count++
			return nil
		})
		if err != nil || count != n {
			b.Fatalf("replay: %d events, %v", count, err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkEvents_Analyze runs the analysis over a stream of 500,000
// events.
func BenchmarkEvents_Analyze(b *testing.B) {
	const n = 500_000
	ev := evBenchStream(b)
	ctx := context.Background()
	if res, err := ev.Import(ctx, bytes.NewReader(evBenchLog(n))); err != nil || res.Imported != n {
		b.Fatalf("fill: %+v, %v", res, err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a, err := ev.Analyze(ctx, eventlog.AnalyzeOptions{})
		if err != nil || a.Events != n || len(a.Sessions) != 50 {
			b.Fatalf("analyze: %v", err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
}
