package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus/bustest"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/node/nodetest"
)

func storeDamage(t *testing.T, n *node.Node) []node.StoreDamage {
	t.Helper()
	var d []node.StoreDamage
	bustest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		var done bool
		if d, done = n.StoreDamage(); !done {
			return fmt.Errorf("store check still running")
		}
		return nil
	})
	return d
}

// The store check finds nothing on a healthy store, finds a message
// missing from a mailbox (teambus never deletes mail), and, through the
// marks of the last run, a mailbox whose tail is gone after a restart.
func TestCheckStore(t *testing.T) {
	dir := t.TempDir()
	n := nodetest.NewBareServerConfig(t, node.NodeConfig{Dir: dir})
	if d := storeDamage(t, n); len(d) != 0 {
		t.Fatalf("damage on a new store: %v", d)
	}
	c := nodetest.Connect(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mb := mailbox.NewMailbox(c.JS, "chk", mailbox.MailboxConfig{})
	// A mailbox denies deleting messages; this one is made by hand so the
	// test can lose one.
	if _, err := c.JS.CreateStream(ctx, jetstream.StreamConfig{Name: mb.Stream(), Subjects: []string{"tb.chk.mbx.>", "tb.chk.ctl.>", "tb.chk.held.>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 20; i++ {
		m := &teambus.Message{ID: fmt.Sprint(i), From: "a", To: "b", Type: teambus.MsgInfo, Body: "hello"}
		if _, err := mb.Send(ctx, m, false); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := node.CheckStore(ctx, c.JS); err != nil || len(d) != 0 {
		t.Fatalf("CheckStore on a healthy mailbox = %v, %v", d, err)
	}
	st, err := c.JS.Stream(ctx, mb.Stream())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(ctx, 7); err != nil {
		t.Fatal(err)
	}
	d, err := node.CheckStore(ctx, c.JS)
	if err != nil || len(d) != 1 || d[0].Lost != 1 || d[0].First != 7 || d[0].Last != 7 || !strings.Contains(d[0].String(), "lost 1") {
		t.Fatalf("CheckStore after deleting seq 7 = %v, %v", d, err)
	}
	c.Close()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, node.MarksFile)); err != nil {
		t.Fatalf("no marks after a clean close: %v", err)
	}

	// The tail of the mailbox disappears while the node is down.
	if err := os.RemoveAll(filepath.Join(dir, node.StoreDir, "jetstream", "$G", "streams", mb.Stream())); err != nil {
		t.Fatal(err)
	}
	n2 := nodetest.NewBareServerDir(t, dir)
	d = storeDamage(t, n2)
	if len(d) != 1 || !d[0].Gone || d[0].Last != 20 {
		t.Fatalf("damage after the mailbox vanished = %v", d)
	}
	if h := n2.Health(); h.OK || !strings.Contains(strings.Join(h.Errors, " "), "gone") {
		t.Fatalf("health = %+v, want the gone mailbox", h)
	}
}

// fillStream makes a stream teambus never deletes from (a mailbox name)
// by hand and stores n messages of 200 bytes in it. A small maxBytes
// makes the server use small blocks (its size over 4, at least 32 KiB).
func fillStream(t *testing.T, ctx context.Context, js jetstream.JetStream, name string, n int, maxBytes int64) {
	t.Helper()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Storage: jetstream.FileStorage, MaxBytes: maxBytes}); err != nil {
		t.Fatal(err)
	}
	body := []byte(strings.Repeat("0123456789", 20))
	for i := 0; i < n; i++ {
		if _, err := js.PublishAsync(name+".m", body, jetstream.WithStallWait(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 999 || i == n-1 {
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
		}
	}
}

// flipMiddle flips bytes in the middle of the stream's second message
// block (not the first nor the last: the server reads those at start), inside one record: reading it fails its checksum, while the
// stream's state (kept in its index after a clean stop) still counts it.
func flipMiddle(t *testing.T, dir, stream string) {
	t.Helper()
	blk := filepath.Join(dir, node.StoreDir, "jetstream", "$G", "streams", stream, "msgs", "2.blk")
	b, err := os.ReadFile(blk)
	if err != nil {
		t.Fatal(err)
	}
	// Inside a message body: the record's framing stays readable.
	at := bytes.Index(b[len(b)/2:], []byte(strings.Repeat("0123456789", 20)))
	if at < 0 {
		t.Fatalf("no message body in the second half of %s", blk)
	}
	for i := len(b)/2 + at + 100; i < len(b)/2+at+104; i++ {
		b[i] ^= 0xff
	}
	if err := os.WriteFile(blk, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// setMark rewrites the marks of the last run as a kill -9 leaves them: the
// stream's last periodic mark at seq, not a clean stop.
func setMark(t *testing.T, dir, stream string, seq uint64) {
	t.Helper()
	p := filepath.Join(dir, node.MarksFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["clean"] != true {
		t.Fatalf("marks after a clean stop not marked clean: %s", b)
	}
	m["clean"] = false
	m["streams"].(map[string]any)[stream].(map[string]any)["last_seq"] = seq
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// The start-up check reads only what was written since the marks of the
// last run: damage in old data after a clean stop is not read at start
// (the node is ready and checked at once) but found by a scrub; the same
// damage in messages written after the marks (as after a kill -9 whose
// last marks were older) is found at start.
func TestCheckStore_SinceMarks(t *testing.T) {
	const n = 400
	stream := mailbox.MailboxPrefix + "since"
	for _, tc := range []struct {
		name   string
		markAt uint64 // 0: the marks of the clean stop
	}{
		{name: "clean stop, damage in old data"},
		{name: "marks older than the damage", markAt: 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			n1 := nodetest.NewBareServerConfig(t, node.NodeConfig{Dir: dir})
			storeDamage(t, n1)
			c := nodetest.Connect(t, n1)
			fillStream(t, ctx, c.JS, stream, n, 120_000)
			c.Close()
			if err := n1.Close(); err != nil {
				t.Fatal(err)
			}
			if blks, _ := filepath.Glob(filepath.Join(dir, node.StoreDir, "jetstream", "$G", "streams", stream, "msgs", "*.blk")); len(blks) < 3 {
				t.Fatalf("blocks %v, want three or more", blks)
			}
			flipMiddle(t, dir, stream)
			if tc.markAt > 0 {
				setMark(t, dir, stream, tc.markAt)
			}

			n2 := nodetest.NewBareServerDir(t, dir)
			d := storeDamage(t, n2)
			c2 := nodetest.Connect(t, n2)
			res, err := node.Scrub(ctx, c2.JS, node.ScrubConfig{})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Damage) != 1 || res.Damage[0].Lost == 0 || res.Damage[0].Stream != stream || res.Read != n {
				t.Fatalf("scrub = %+v, want the flipped record lost in %s", res, stream)
			}
			if tc.markAt == 0 {
				if len(d) != 0 || !n2.Health().OK {
					t.Fatalf("start-up check after a clean stop read old data: %v", d)
				}
				return
			}
			if len(d) != 1 || d[0].Lost != res.Damage[0].Lost || d[0].First != res.Damage[0].First || n2.Health().OK {
				t.Fatalf("start-up check = %v, want what the scrub found: %v", d, res.Damage)
			}
		})
	}
}

// A scrub cancelled midway records its position and its findings; the
// next one continues there, does not read the first part again, reports
// the damage the first part found, and removes the position when done.
func TestScrub_Resumes(t *testing.T) {
	const n = 6000
	dir := t.TempDir()
	nd := nodetest.NewBareServerConfig(t, node.NodeConfig{Dir: dir})
	c := nodetest.Connect(t, nd)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b := mailbox.MailboxPrefix+"a", eventlog.EventsPrefix+"b"
	fillStream(t, ctx, c.JS, a, n, 0)
	fillStream(t, ctx, c.JS, b, n, 0)
	st, err := c.JS.Stream(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(ctx, 100); err != nil {
		t.Fatal(err)
	}
	pos := filepath.Join(dir, node.ScrubFile)

	// Cancelled in the second stream.
	sctx, stop := context.WithCancel(ctx)
	var seen []node.ScrubProgress
	_, err = node.Scrub(sctx, c.JS, node.ScrubConfig{PositionFile: pos, Progress: func(p node.ScrubProgress) {
		seen = append(seen, p)
		if p.Done >= n+2000 {
			stop()
		}
	}})
	stop()
	if err == nil {
		t.Fatal("cancelled scrub returned no error")
	}
	if _, err := os.Stat(pos); err != nil {
		t.Fatalf("no position recorded by a cancelled scrub: %v", err)
	}
	if len(seen) == 0 || seen[0].Total != 2*n {
		t.Fatalf("progress = %v, want the total %d", seen, 2*n)
	}

	// A stream made meanwhile is read by the continued scrub.
	fillStream(t, ctx, c.JS, mailbox.MailboxPrefix+"c", 10, 0)

	res, err := node.Scrub(ctx, c.JS, node.ScrubConfig{PositionFile: pos})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Resumed || res.Read == 0 || res.Read > n-2000+10 || res.Total != 2*n+10 {
		t.Fatalf("resumed scrub = %+v, want the rest of %s and the new stream only (under %d of %d)", res, b, n-2000+10, 2*n+10)
	}
	if len(res.Damage) != 1 || res.Damage[0].Stream != a || res.Damage[0].Lost != 1 || res.Damage[0].First != 100 {
		t.Fatalf("resumed scrub damage = %v, want seq 100 of %s", res.Damage, a)
	}
	if _, err := os.Stat(pos); !os.IsNotExist(err) {
		t.Fatalf("position kept after a complete scrub: %v", err)
	}

	// A new scrub starts from the beginning, and reads the new stream too.
	res, err = node.Scrub(ctx, c.JS, node.ScrubConfig{PositionFile: pos})
	if err != nil || res.Resumed || res.Read != 2*n+10 {
		t.Fatalf("new scrub = %+v, %v, want all %d read", res, err, 2*n+10)
	}
	if _, err := node.Scrub(ctx, c.JS, node.ScrubConfig{Stream: "TB_AUTH"}); err == nil {
		t.Fatal("scrub of a stream teambus deletes from: no error")
	}
}

// A consumer made on demand (with an InactiveThreshold, as a mailbox
// recipient's) that the server removed when idle after the last marks is
// not damage: the check does not make it again, health stays ok. A durable
// consumer without one that is gone the same way is recreated from the
// marks, as before.
func TestCheckStore_IdleConsumerGoneIsNotDamage(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream := mailbox.MailboxPrefix + "idle"
	n1 := nodetest.NewBareServerConfig(t, node.NodeConfig{Dir: dir})
	storeDamage(t, n1)
	c := nodetest.Connect(t, n1)
	fillStream(t, ctx, c.JS, stream, 10, 1<<20)
	for _, cfg := range []jetstream.ConsumerConfig{
		{Durable: "on_demand", AckPolicy: jetstream.AckExplicitPolicy, InactiveThreshold: time.Hour},
		{Durable: "kept", AckPolicy: jetstream.AckExplicitPolicy},
	} {
		if _, err := c.JS.CreateConsumer(ctx, stream, cfg); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	if err := n1.Close(); err != nil { // the marks of the clean stop name both
		t.Fatal(err)
	}
	// Both gone without a trace, as the server removes an idle one.
	for _, name := range []string{"on_demand", "kept"} {
		obs, _ := filepath.Glob(filepath.Join(dir, node.StoreDir, "jetstream", "$G", "streams", stream, "obs", name))
		if len(obs) != 1 {
			t.Fatalf("state directory of %s: %v", name, obs)
		}
		if err := os.RemoveAll(obs[0]); err != nil {
			t.Fatal(err)
		}
	}

	n2 := nodetest.NewBareServerDir(t, dir)
	d := storeDamage(t, n2)
	if len(d) != 1 || fmt.Sprint(d[0].Recreated) != "[kept]" {
		t.Fatalf("store damage %+v, want only the consumer kept recreated", d)
	}
	c2 := nodetest.Connect(t, n2)
	if _, err := c2.JS.Consumer(ctx, stream, "on_demand"); err == nil {
		t.Error("the idle consumer was made again by the check")
	}
}
