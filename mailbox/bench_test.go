package mailbox_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/node/nodetest"
)

// benchBody is the ~1 KiB body every benchmark sends.
var benchBody = strings.Repeat("x", 1000)

// benchLine is one mailbox message as stored: ~1 KiB of JSON.
func benchLine(b *testing.B) []byte {
	b.Helper()
	line, err := json.Marshal(teambus.Message{ID: "bench-0000000", From: "tm1", To: teambus.Lead, Type: teambus.MsgInfo, Body: benchBody, Epoch: 1, TS: time.Now().UTC()})
	if err != nil {
		b.Fatal(err)
	}
	return line
}

// benchMailbox starts a node with the sync mode and a mailbox large enough
// for a few seconds of sends, and returns the mailbox and the connection.
func benchMailbox(b *testing.B, sync string) (*mailbox.Mailbox, *bus.Conn) {
	b.Helper()
	n := nodetest.NewBareServerConfig(b, node.NodeConfig{Sync: sync, MaxStore: 16 << 30})
	c := nodetest.Connect(b, n)
	mb := mailbox.NewMailbox(c.JS, "bench", mailbox.MailboxConfig{MaxBytes: 8 << 30})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := mb.Declare(ctx); err != nil {
		b.Fatal(err)
	}
	if err := mb.AddRecipient(ctx, teambus.Lead, time.Minute); err != nil {
		b.Fatal(err)
	}
	return mb, c
}

func reportRate(b *testing.B) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "msgs/s")
	}
}

// BenchmarkSend_OneAtATime is Mailbox.Send called sequentially, each
// waiting for its PubAck: one agent sending mail through an in-process
// connection. With sync=always every message is fsynced before the ack.
func BenchmarkSend_OneAtATime(b *testing.B) {
	for _, sync := range []string{bus.SyncModeAlways, bus.SyncModeInterval} {
		b.Run("sync="+sync, func(b *testing.B) {
			mb, _ := benchMailbox(b, sync)
			ctx := context.Background()
			b.SetBytes(int64(len(benchLine(b))))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m := &teambus.Message{ID: "b" + strconv.Itoa(i), From: "tm1", To: teambus.Lead, Type: teambus.MsgInfo, Body: benchBody, Epoch: 1}
				if _, err := mb.Send(ctx, m, false); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			reportRate(b)
		})
	}
}

// BenchmarkSend_Pipelined publishes mailbox messages with PublishAsync and
// a window of 256 in flight, each with its own idempotency key, then waits
// for every PubAck: the durable pipelined throughput of one stream.
func BenchmarkSend_Pipelined(b *testing.B) {
	for _, sync := range []string{bus.SyncModeAlways, bus.SyncModeInterval} {
		b.Run("sync="+sync, func(b *testing.B) {
			mb, c := benchMailbox(b, sync)
			var failed atomic.Int64
			js, err := jetstream.New(c.NC,
				jetstream.WithPublishAsyncMaxPending(256),
				jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, _ *nats.Msg, _ error) { failed.Add(1) }))
			if err != nil {
				b.Fatal(err)
			}
			subject := "tb.bench.mbx.lead.info.tm1"
			payload := benchLine(b)
			b.SetBytes(int64(len(payload)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// A full window blocks until an ack frees a slot (with sync=always
				// on a slow disk that takes longer than the 200ms default).
				if _, err := js.PublishAsync(subject, payload, jetstream.WithMsgID("p"+strconv.Itoa(i)), jetstream.WithStallWait(time.Minute)); err != nil {
					b.Fatal(err)
				}
			}
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(2 * time.Minute):
				b.Fatalf("%d publishes still pending", js.PublishAsyncPending())
			}
			b.StopTimer()
			reportRate(b)
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d of %d publishes failed", n, b.N)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			st, err := c.JS.Stream(ctx, mb.Stream())
			if err != nil {
				b.Fatal(err)
			}
			if got := st.CachedInfo().State.Msgs; got != uint64(b.N) {
				b.Fatalf("stream holds %d messages after %d acknowledged publishes", got, b.N)
			}
		})
	}
}

// BenchmarkJSONLAppendFsync is the file baseline: append one ~1 KiB JSON
// line and fsync it, per message. fd=open keeps the file open; fd=per-op
// opens and closes it for every message as separate writers would.
func BenchmarkJSONLAppendFsync(b *testing.B) {
	line := append(benchLine(b), '\n')
	b.Run("fd=open", func(b *testing.B) {
		f, err := os.OpenFile(filepath.Join(b.TempDir(), "mail.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		b.SetBytes(int64(len(line)))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := f.Write(line); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		reportRate(b)
	})
	b.Run("fd=per-op", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "mail.jsonl")
		b.SetBytes(int64(len(line)))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := f.Write(line); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		reportRate(b)
	})
}
