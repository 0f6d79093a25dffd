package node_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node"
)

// TestStartup_Measure is the measurement of issue 15 item 3: a node with
// 4 streams of N stored messages each is stopped cleanly and started
// again; it prints how long the start took until the node accepts
// clients (ready) and until its start-up store check is done, then the
// time of a full `bus scrub` for scale. It runs only when asked:
//
//	TEAMBUS_STARTUP_MSGS=1000000 go test ./node/ -run TestStartup_Measure -v -timeout 1h
//
// TEAMBUS_STARTUP_DIR keeps the store (filled once, measured again on
// later runs); TEAMBUS_STARTUP_SCRUB=0 leaves the full scrub out. The fill uses the interval sync mode: it is setup.
func TestStartup_Measure(t *testing.T) {
	per, _ := strconv.Atoi(os.Getenv("TEAMBUS_STARTUP_MSGS"))
	if per <= 0 {
		t.Skip("set TEAMBUS_STARTUP_MSGS (messages per stream) to measure the start-up")
	}
	// The dedupe window of mailboxes and event logs: on every start the
	// server reads the messages stored within it (rebuildDedupe) before
	// the stream is ready, so a restart right after the fill reads the
	// fill; one a window later reads nothing.
	const streams, dupWindow = 4, 10 * time.Minute
	dir := os.Getenv("TEAMBUS_STARTUP_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := func(sync string) (*node.Node, time.Duration) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		t0 := time.Now()
		n, err := node.Start(ctx, node.NodeConfig{Dir: dir, Listen: "127.0.0.1:-1", Sync: sync, MaxStore: 64 << 30, MaxMemory: 64 << 20, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		return n, time.Since(t0)
	}
	n, _ := start(bus.SyncModeInterval)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	c, err := n.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 256)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	t0 := time.Now()
	for s := 1; s <= streams; s++ {
		name := fmt.Sprintf("%sstartup%d", mailbox.MailboxPrefix, s)
		st, err := c.JS.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{fmt.Sprintf("startup.%d.>", s)}, Storage: jetstream.FileStorage, Duplicates: dupWindow})
		if err != nil {
			t.Fatal(err)
		}
		have := int(st.CachedInfo().State.Msgs)
		subj := fmt.Sprintf("startup.%d.m", s)
		for i := have; i < per; i++ {
			if _, err := c.JS.PublishAsync(subj, body, jetstream.WithStallWait(time.Minute)); err != nil {
				t.Fatal(err)
			}
			if i%100_000 == 0 {
				t.Logf("fill %s: %d", name, i)
			}
		}
		select {
		case <-c.JS.PublishAsyncComplete():
		case <-ctx.Done():
			t.Fatal("fill timed out")
		}
	}
	t.Logf("fill: %s", time.Since(t0).Round(time.Millisecond))
	var newest time.Time
	for s := 1; s <= streams; s++ {
		st, err := c.JS.Stream(ctx, fmt.Sprintf("%sstartup%d", mailbox.MailboxPrefix, s))
		if err != nil {
			t.Fatal(err)
		}
		if lt := st.CachedInfo().State.LastTime; lt.After(newest) {
			newest = lt
		}
	}
	within := "older than the dedupe window"
	if age := time.Since(newest); age < dupWindow {
		within = fmt.Sprintf("newest %s old: within the %s dedupe window, which the server reads at start", age.Round(time.Second), dupWindow)
	}
	c.Close()
	t0 = time.Now()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("clean stop: %s", time.Since(t0).Round(time.Millisecond))

	for run := 1; run <= 2; run++ {
		t0 := time.Now()
		n, ready := start(bus.SyncModeAlways)
		var damage []node.StoreDamage
		for {
			var done bool
			if damage, done = n.StoreDamage(); done {
				break
			}
			time.Sleep(time.Millisecond) // measuring: poll the check's end finely
		}
		checked := time.Since(t0)
		if len(damage) > 0 {
			t.Errorf("damage on a healthy store: %v", damage)
		}
		load, _ := os.ReadFile("/proc/loadavg")
		t.Logf("ROW clean restart %d, %d × %d stored messages (%s): node ready %.1f ms, start-up check done %.1f ms (load average %s)",
			run, streams, per, within, float64(ready.Microseconds())/1000, float64(checked.Microseconds())/1000, string(load[:len(load)-1]))
		if run == 2 && os.Getenv("TEAMBUS_STARTUP_SCRUB") != "0" {
			c, err := n.Connect(ctx)
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			res, err := node.Scrub(ctx, c.JS, node.ScrubConfig{})
			if err != nil || len(res.Damage) > 0 {
				t.Errorf("scrub = %+v, %v", res, err)
			}
			t.Logf("ROW full scrub (bus scrub) of %d messages: %s", res.Read, time.Since(t0).Round(time.Millisecond))
			c.Close()
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
