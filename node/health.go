package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus/bus"
)

// Health reports the node's JetStream health, with every stream's write
// error (a stream whose store failed to write, for example with no space
// left on device, takes no message until the node restarts) and the
// damage the store check found.
func (n *Node) Health() bus.Health {
	hs := n.s.Healthz(&server.HealthzOptions{Details: true})
	h := bus.Health{OK: hs.Status == "ok" && hs.Error == "" && len(hs.Errors) == 0}
	if hs.Error != "" {
		h.Errors = append(h.Errors, hs.Error)
	}
	for _, e := range hs.Errors {
		h.Errors = append(h.Errors, e.Error)
	}
	if !h.OK {
		// A write error with the store's disk (nearly) full: the
		// operator's to fix, told apart by the disk, not by the text.
		if free, ok := freeBytes(filepath.Join(n.dir, StoreDir)); ok && free < noSpaceBelow {
			h.NoSpace = true
		}
	}
	damage, _ := n.StoreDamage()
	for _, d := range damage {
		h.OK = false
		h.Errors = append(h.Errors, d.String())
	}
	return h
}

// noSpaceBelow is the free space under which a node with write errors
// reports its disk as full (bus.Health.NoSpace).
const noSpaceBelow = 4 << 20

// healthState is the node's health responder and its store check.
type healthState struct {
	conn  *nats.Conn
	js    jetstream.JetStream
	marks *marksKeeper
	stop  context.CancelFunc
	done  chan struct{}

	mu      sync.Mutex
	checked bool
	marking bool // the marks file is kept up to date
	damage  []StoreDamage
}

// StoreDamage returns what the store check that runs after the start
// found; done is false while it still runs.
func (n *Node) StoreDamage() (damage []StoreDamage, done bool) {
	n.health.mu.Lock()
	defer n.health.mu.Unlock()
	return append([]StoreDamage(nil), n.health.damage...), n.health.checked
}

// serveHealth answers HealthSubject on an in-process connection of the
// node and runs the store check (CheckStore) in the background; damage is
// logged as an error and reported by Health. Without the connection the
// node still runs; clients then only see timeouts.
func (n *Node) serveHealth(token string) {
	nc, err := nats.Connect("", nats.InProcessServer(n.s), nats.Token(token), nats.Name("teambus-node-health"))
	if err != nil {
		n.log.Warn("health responder", "err", err)
		return
	}
	_, err = nc.Subscribe(bus.HealthSubject, func(m *nats.Msg) {
		b, _ := json.Marshal(n.Health())
		_ = m.Respond(b) // a health probe that misses its answer times out and asks again
	})
	if err != nil {
		nc.Close()
		n.log.Warn("health responder", "err", err)
		return
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		n.log.Warn("health responder", "err", err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.health.conn, n.health.js, n.health.stop, n.health.done = nc, js, cancel, make(chan struct{})
	n.health.marks = &marksKeeper{dir: n.dir}
	go func() {
		defer close(n.health.done)
		if !n.checkStore(ctx, js) {
			return // keep the marks of the last run for the next start
		}
		// Every second, when anything changed (messages, streams,
		// consumers, API calls other than its own), else every 30s for the
		// consumers' ack floors.
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		fp, full := n.storeFingerprint(), time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if n.storeFingerprint() == fp && time.Since(full) < 30*time.Second {
					continue
				}
				if err := n.health.marks.update(ctx, js, false); err != nil && ctx.Err() == nil {
					n.log.Debug("store marks", "err", err)
				}
				fp, full = n.storeFingerprint(), time.Now()
			}
		}
	}()
}

// checkStore runs the store check of a start. Its cost does not grow
// with the history: per stream teambus never deletes from, it trusts the
// stream's own state (sequences deleted or below its first one) and reads
// only the messages written since the marks of the last run (MarksFile):
// none after a clean stop, the last second's after a kill -9. Without
// marks (the first start of a store, a cluster) it reads every message.
// Then it compares with the marks: streams gone, messages below the last
// high-water mark, durable consumers the server dropped (recreated).
// Old data is verified by an explicit scrub (Scrub, `teambus bus scrub`).
// It reports whether the marks are kept from now on: not in a cluster (a
// starting member's view is partial), not after a failed check.
func (n *Node) checkStore(ctx context.Context, js jetstream.JetStream) bool {
	start := time.Now()
	useMarks := !n.s.JetStreamIsClustered()
	old, err := readMarks(n.dir)
	if err != nil {
		n.log.Warn("store check: marks of the last run unreadable", "err", err)
	}
	if !useMarks {
		old = nil
	}
	var (
		damage []StoreDamage
		read   uint64
	)
	names, err := neverDeleteStreams(ctx, js)
	for _, name := range names {
		if err != nil {
			break
		}
		from := uint64(1)
		if old != nil {
			if om, ok := old.Streams[name]; ok {
				from = om.LastSeq + 1
			}
		}
		var (
			d StoreDamage
			r uint64
		)
		d, r, err = checkSince(ctx, js, name, from)
		read += r
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			err = nil
			continue // deleted meanwhile
		}
		if err != nil {
			err = fmt.Errorf("check stream %s: %w", name, err)
			break
		}
		if d.Lost > 0 {
			damage = append(damage, d)
		}
	}
	if err == nil && old != nil {
		var now *storeMarks
		if now, err = collectMarks(ctx, js); err == nil {
			damage, err = compareMarks(ctx, js, old, now, damage, n.disc.StoreDir, filepath.Join(n.dir, QuarantineDir))
		}
	}
	if ctx.Err() != nil {
		return false
	}
	if err != nil {
		n.log.Warn("store check failed", "err", err)
		useMarks = false
	}
	for _, d := range damage {
		n.log.Error("store damaged", "stream", d.Stream, "lost", d.Lost, "first_seq", d.First, "last_seq", d.Last, "gone", d.Gone, "recreated", d.Recreated, "what", d.String())
	}
	n.log.Info("store checked", "streams", len(names), "read", read, "after_clean_stop", old != nil && old.Clean, "damaged_streams", len(damage), "took", time.Since(start))
	n.health.mu.Lock()
	n.health.damage, n.health.checked, n.health.marking = damage, true, useMarks
	n.health.mu.Unlock()
	if !useMarks {
		return false
	}
	if err := n.health.marks.update(ctx, js, false); err != nil && ctx.Err() == nil {
		n.log.Warn("store marks", "err", err)
	}
	return true
}

// storeFingerprint changes when the store may have: messages, bytes,
// streams, consumers or JetStream API calls.
func (n *Node) storeFingerprint() string {
	jsz, err := n.s.Jsz(nil)
	if err != nil {
		return ""
	}
	// Not the byte count: a heartbeat replaces its key's one message (the
	// count stays) with one of another length, so with bytes in it every
	// beat changed the fingerprint and the marks (every stream's
	// consumers, listed) were collected every second: 20% of a core for a
	// node of 100 teams (teambus bench). The streams the marks are about
	// never delete, so their changes show in the message count.
	return fmt.Sprint(jsz.Streams, jsz.Consumers, jsz.Messages, jsz.API.Total)
}

// stopHealth stops the responder and the store check, and records the
// final marks while the server still runs.
func (n *Node) stopHealth() {
	if n.health.conn == nil {
		return
	}
	n.health.stop()
	<-n.health.done
	n.health.mu.Lock()
	marking := n.health.marking
	n.health.mu.Unlock()
	if marking {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := n.health.marks.update(ctx, n.health.js, true); err != nil {
			n.log.Warn("store marks", "err", err)
		}
		cancel()
	}
	n.health.conn.Close()
}
