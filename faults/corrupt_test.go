package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node"
)

// streamDir is the store directory of a stream of the node in dir.
func streamDir(dir, stream string) string {
	return filepath.Join(dir, node.StoreDir, "jetstream", "$G", "streams", stream)
}

// storeFiles lists a stream's files matching pattern (relative to its
// directory), sorted.
func storeFiles(t *testing.T, dir, stream, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(streamDir(dir, stream), pattern))
	if err != nil {
		t.Fatal(err)
	}
	if len(m) == 0 {
		t.Fatalf("no %s in the store of %s", pattern, stream)
	}
	sort.Strings(m)
	return m
}

func rewrite(t *testing.T, path string, f func(b []byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, f(b), 0o600); err != nil {
		t.Fatal(err)
	}
}

// flip inverts n bytes at fraction at of the file.
func flip(t *testing.T, path string, at float64, n int) {
	rewrite(t, path, func(b []byte) []byte {
		i := int(float64(len(b)) * at)
		for k := 0; k < n && i+k < len(b); k++ {
			b[i+k] ^= 0xff
		}
		return b
	})
}

// cut truncates the file to fraction at of its size.
func cut(t *testing.T, path string, at float64) {
	rewrite(t, path, func(b []byte) []byte { return b[:int(float64(len(b))*at)] })
}

func zero(t *testing.T, path string) {
	rewrite(t, path, func(b []byte) []byte { return make([]byte, len(b)) })
}

// corruption damages a stopped node's store; loses says whether messages
// may be lost (a rebuildable file loses none).
type corruption struct {
	name     string
	kill9    bool   // stop the node with kill -9 instead of a clean close
	loses    bool   // messages may be lost
	consumer string // a durable consumer the damage drops
	gone     bool   // the whole stream is lost
	// oldData: the damage is in messages written before the last clean
	// stop, which the start-up check trusts the stream's state for and
	// does not read; `teambus bus scrub` (node.Scrub) finds it.
	oldData bool
	apply   func(t *testing.T, dir, stream string)
}

// S7: corrupted and truncated store files of a stopped node. The node
// starts (or fails with a clear error, the same every time: no crash
// loop), every message it returns decodes and is what was sent, every
// durable consumer is still there, and every lost message is detected and
// reported: the store check logs an error naming the stream and the lost
// sequences, and Health says so. A file the server rebuilds loses nothing
// and raises no alarm.
func TestS7_CorruptStore(t *testing.T) {
	t.Parallel() // no timing criterion: runs beside the other parallel scenarios
	const n = 400
	cases := []corruption{
		{name: "flip bytes in the middle of a block", loses: true, oldData: true, apply: func(t *testing.T, dir, s string) {
			b := storeFiles(t, dir, s, "msgs/*.blk")
			flip(t, b[len(b)/2], 0.5, 16)
		}},
		{name: "truncate the last block", loses: true, apply: func(t *testing.T, dir, s string) {
			b := storeFiles(t, dir, s, "msgs/*.blk")
			cut(t, b[len(b)-1], 0.6)
		}},
		{name: "zero a block", loses: true, apply: func(t *testing.T, dir, s string) {
			zero(t, storeFiles(t, dir, s, "msgs/*.blk")[0])
		}},
		{name: "delete the index", apply: func(t *testing.T, dir, s string) {
			if err := os.Remove(storeFiles(t, dir, s, "msgs/index.db")[0]); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "flip bytes in the index", apply: func(t *testing.T, dir, s string) {
			flip(t, storeFiles(t, dir, s, "msgs/index.db")[0], 0.5, 8)
		}},
		{name: "zero a consumer's state", consumer: mailbox.InboxConsumer("r1"), apply: func(t *testing.T, dir, s string) {
			zero(t, storeFiles(t, dir, s, "obs/"+mailbox.InboxConsumer("r1")+"/o.dat")[0])
		}},
		{name: "delete a stream's directory", gone: true, loses: true, apply: func(t *testing.T, dir, s string) {
			if err := os.RemoveAll(streamDir(dir, s)); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "kill -9 then truncate the last block", kill9: true, loses: true, apply: func(t *testing.T, dir, s string) {
			b := storeFiles(t, dir, s, "msgs/*.blk")
			cut(t, b[len(b)-1], 0.5)
		}},
		{name: "kill -9 then flip bytes in a block", kill9: true, loses: true, apply: func(t *testing.T, dir, s string) {
			b := storeFiles(t, dir, s, "msgs/*.blk")
			flip(t, b[len(b)/2], 0.3, 16)
		}},
	}
	if soak() {
		for _, at := range []float64{0.05, 0.25, 0.75, 0.95} {
			cases = append(cases, corruption{name: fmt.Sprintf("flip bytes at %.0f%%", at*100), loses: true, apply: func(t *testing.T, dir, s string) {
				b := storeFiles(t, dir, s, "msgs/*.blk")
				flip(t, b[0], at, 64)
			}}, corruption{name: fmt.Sprintf("truncate at %.0f%%", at*100), loses: true, apply: func(t *testing.T, dir, s string) {
				b := storeFiles(t, dir, s, "msgs/*.blk")
				cut(t, b[len(b)-1], at)
			}})
		}
	}
	var lines []string
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			h := NewHistory()
			fillStore(t, dir, c.kill9, n, h)
			c.apply(t, dir, mailbox.MailboxPrefix+"cx")

			log := &memLogger{}
			t.Cleanup(func() {
				if t.Failed() {
					for _, l := range log.matching("level=warn", "level=error") {
						t.Log(l)
					}
				}
			})
			nd, err := openNode(t, dir, log, 1<<30)
			if err != nil {
				// Failing is allowed, with a clear error, and the same error on
				// every attempt: no crash loop, no half-started node.
				_, err2 := openNode(t, dir, &memLogger{}, 1<<30)
				if err2 == nil || err2.Error() != err.Error() || !strings.Contains(err.Error(), dir) {
					t.Fatalf("start on a damaged store: %v, then %v: want the same clear error naming the store", err, err2)
				}
				lines = append(lines, fmt.Sprintf("%s: refused to start: %v", c.name, err))
				return
			}
			defer nd.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			conn, err := nd.Connect(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			var damage []node.StoreDamage
			checkFor(t, time.Minute, func() error {
				var done bool
				if damage, done = nd.StoreDamage(); !done {
					return fmt.Errorf("store check still running")
				}
				return nil
			})
			if c.gone {
				// Nothing to read: the loss of the whole mailbox is reported.
				if len(damage) != 1 || !damage[0].Gone || damage[0].Lost != n || len(log.matching("store damaged")) == 0 || nd.Health().OK {
					t.Fatalf("stream gone: damage %v, health %v", damage, nd.Health())
				}
				lines = append(lines, fmt.Sprintf("%s: started, the mailbox is gone, reported gone with %d messages", c.name, damage[0].Lost))
				return
			}
			checkResources(t, conn.JS, teamResources("cx", []string{"r1"}))
			st, err := scanMailbox(ctx, conn.JS, mailbox.MailboxPrefix+"cx", h)
			if err != nil {
				t.Fatal(err)
			}
			r := h.Check()
			// Nothing served silently wrong.
			if len(st.Undecodable) > 0 || len(r.Corrupt) > 0 || len(r.Unexpected) > 0 || len(r.DuplicateStored) > 0 || len(r.Misrouted) > 0 {
				t.Fatalf("damaged store served wrong messages: undecodable %v, %v", st.Undecodable, r.Err())
			}
			if !c.loses && len(r.Lost) > 0 {
				t.Errorf("%s lost %d messages; it should rebuild", c.name, len(r.Lost))
			}
			// Every loss detected and reported; no false alarm.
			reported, recreated := 0, 0
			for _, d := range damage {
				reported += d.Lost
				recreated += len(d.Recreated)
			}
			if c.consumer != "" {
				// The server dropped the consumer; the check recreated it from
				// its last acknowledged position: all its mail is there.
				if recreated != 1 || !strings.Contains(fmt.Sprint(damage), c.consumer) {
					t.Errorf("store check damage %v, want consumer %s recreated", damage, c.consumer)
				}
				cons, err := conn.JS.Consumer(ctx, mailbox.MailboxPrefix+"cx", c.consumer)
				if err != nil {
					t.Fatal(err)
				}
				if ci := cons.CachedInfo(); ci.NumPending != n {
					t.Errorf("recreated consumer %s has %d pending, want all %d (never acked)", c.consumer, ci.NumPending, n)
				}
			} else if recreated != 0 {
				t.Errorf("consumers recreated without reason: %v", damage)
			}
			scrubbed := 0
			if c.oldData {
				// Not read at start: the scrub of old data finds it.
				if reported != 0 {
					t.Errorf("start-up check reported %v in old data, which it should not read", damage)
				}
				res, err := node.Scrub(ctx, conn.JS, node.ScrubConfig{})
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range res.Damage {
					scrubbed += d.Lost
				}
				if scrubbed != len(r.Lost) {
					t.Errorf("scrub reported %d lost messages (%v), the checker found %d (%v)", scrubbed, res.Damage, len(r.Lost), r.Lost)
				}
			} else if reported != len(r.Lost) {
				t.Errorf("store check reported %d lost messages (%v), the checker found %d (%v)", reported, damage, len(r.Lost), r.Lost)
			}
			if len(r.Lost) > 0 && !c.oldData {
				if len(log.matching("store damaged")) == 0 {
					t.Errorf("%d messages lost and no error logged", len(r.Lost))
				}
				if hl := nd.Health(); hl.OK {
					t.Errorf("health is ok with %d messages lost", len(r.Lost))
				}
			} else if hl := nd.Health(); hl.OK != (recreated == 0) {
				t.Errorf("health reports %v with nothing lost and %d consumers recreated", hl.Errors, recreated)
			}
			// The node keeps working: a new send is stored and readable.
			mb := mailbox.NewMailbox(conn.JS, "cx", mailbox.MailboxConfig{})
			id := MsgID("s1", n+1)
			if _, err := sendOnce(ctx, h, mb, "s1", "r1", id, sendBody(id, 200), 5*time.Second, nil); err != nil {
				t.Errorf("send after restart on the damaged store: %v", err)
			}
			lines = append(lines, fmt.Sprintf("%s: started, read %d of %d, lost %d (prefix %d, middle %d, postfix %d), reported lost %d at start, %d by bus scrub, consumers recreated %d, served wrong 0",
				c.name, r.ReadIDs, n, len(r.Lost), r.LostPrefix(), r.LostMiddle(), r.LostPostfix(), reported, scrubbed, recreated))
		})
	}
	for _, l := range lines {
		result(t, "S7", "%s", l)
	}
}

// fillStore runs a node in dir, stores n messages in team cx's mailbox and
// stops the node: cleanly, or with kill -9 of a node process.
func fillStore(t *testing.T, dir string, kill9 bool, n int, h *History) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		conn  *bus.Conn
		stop  func()
		err   error
		nproc *nodeProc
	)
	if kill9 {
		nproc = newNodeProc(t, dir)
		nproc.start()
		conn = connectTCP(t, nproc.URL(), "fill")
		stop = func() {
			// The node records its high-water marks every second: kill it
			// once they cover every message, so the loss is provable.
			checkFor(t, 30*time.Second, func() error {
				b, err := os.ReadFile(filepath.Join(dir, node.MarksFile))
				if err != nil {
					return err
				}
				if want := fmt.Sprintf(`"last_seq": %d`, n); !strings.Contains(string(b), want) {
					return fmt.Errorf("marks do not have %s yet", want)
				}
				return nil
			})
			nproc.kill9()
		}
	} else {
		nd, err := openNode(t, dir, &memLogger{}, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		if conn, err = nd.Connect(ctx); err != nil {
			t.Fatal(err)
		}
		stop = func() {
			conn.Close()
			if err := nd.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	loadTeam(t, conn, "cx", []string{"r1"}, teambus.DefaultPolicy())
	mb := mailbox.NewMailbox(conn.JS, "cx", mailbox.MailboxConfig{})
	for i := 1; i <= n; i++ {
		id := MsgID("s1", uint64(i))
		if _, err = sendOnce(ctx, h, mb, "s1", "r1", id, sendBody(id, 200), 5*time.Second, nil); err != nil {
			t.Fatal(err)
		}
	}
	stop()
}
