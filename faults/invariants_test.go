package faults

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/team"
)

// S10: the configuration invariants the reliability notes ask for (S0),
// asserted on a node opened with its defaults and a team created the way
// `teambus team create` does.
func TestS10_ConfigInvariants(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Defaults, but a free port: 4222 may be taken on a CI host.
	nd, err := node.Start(ctx, node.NodeConfig{Dir: t.TempDir(), Listen: "127.0.0.1:0", Logger: (&memLogger{}).logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer nd.Close()
	checks := 0
	check := func(ok bool, format string, args ...any) {
		t.Helper()
		checks++
		if !ok {
			t.Errorf(format, args...)
		}
	}

	// Server: fsync before every acknowledgement, explicit limits.
	jsc := nd.Server().JetStreamConfig()
	check(jsc != nil && jsc.SyncAlways, "JetStream runs without sync_always: %+v", jsc)
	check(nd.CheckSync() == nil, "CheckSync: %v", nd.CheckSync())
	check(jsc.MaxStore == node.DefaultMaxStore, "JetStreamMaxStore = %d, want the explicit default %d", jsc.MaxStore, node.DefaultMaxStore)
	check(jsc.MaxMemory == node.DefaultMaxMemory, "JetStreamMaxMemory = %d, want %d", jsc.MaxMemory, node.DefaultMaxMemory)

	// Loopback only, monitoring off, a non-loopback listen refused.
	addr, ok := nd.Server().Addr().(*net.TCPAddr)
	check(ok && addr.IP.IsLoopback(), "listens on %v, want loopback", nd.Server().Addr())
	check(strings.HasPrefix(nd.URL(), "nats://127.0.0.1:"), "discovery URL %s, want loopback", nd.URL())
	check(nd.MonitorURL() == "", "monitoring is on at %s", nd.MonitorURL())
	for _, l := range []string{"0.0.0.0:0", "[::]:0", "192.0.2.1:4222"} {
		err := node.NodeConfig{Dir: t.TempDir(), Listen: l}.Validate()
		check(errors.Is(err, teambus.ErrInvalid), "listen %s accepted: %v", l, err)
	}

	// Auth required: no token, a wrong token fail; the token works.
	for _, opts := range [][]nats.Option{nil, {nats.Token("wrong")}} {
		nc, err := nats.Connect(nd.URL(), append(opts, nats.Timeout(3*time.Second))...)
		if err == nil {
			nc.Close()
		}
		check(err != nil, "connected without the token (options %d)", len(opts))
	}
	conn, err := bus.Connect(ctx, bus.ConnectConfig{Server: nd.URL(), Token: nd.Token()})
	if err != nil {
		t.Fatalf("connect with the token: %v", err)
	}
	defer conn.Close()

	// A team as `team create` makes it, then every stream and consumer.
	svc := team.New(conn.JS, team.Config{})
	if _, err := svc.CreateTeam(ctx, "inv", "", []team.MemberSpec{{ID: "tm1"}, {ID: "tm2"}}, teambus.DefaultPolicy()); err != nil {
		t.Fatal(err)
	}
	mb := svc.Mailbox("inv")
	if _, err := mb.Send(ctx, &teambus.Message{ID: "x", From: "tm1", To: "tm2", Type: teambus.MsgInfo, Body: "hi"}, false); err != nil {
		t.Fatal(err)
	}
	// Recipients' consumers are made when first read.
	openConsumers(t, svc, "inv", []string{"tm1", "tm2"})
	streams := 0
	lister := conn.JS.ListStreams(ctx)
	for si := range lister.Info() {
		streams++
		c := si.Config
		// Only heartbeats may be persisted asynchronously: a beat lost to a
		// crash of the machine is written again by the next one, and
		// liveness is judged by beats seen, not stored (kv.heartbeatStream).
		heartbeats := strings.HasPrefix(c.Name, "KV_"+kv.HeartbeatPrefix)
		check(heartbeats || c.PersistMode != jetstream.AsyncPersistMode, "stream %s uses PersistMode async: acknowledged messages can be lost on kill -9", c.Name)
		check(c.Storage == jetstream.FileStorage, "stream %s is not file storage", c.Name)
		check(c.MaxBytes > 0, "stream %s has no explicit MaxBytes", c.Name)
		if !strings.HasPrefix(c.Name, mailbox.MailboxPrefix) && !strings.HasPrefix(c.Name, eventlog.EventsPrefix) {
			continue
		}
		check(c.Discard == jetstream.DiscardNew, "stream %s discards old messages when full", c.Name)
		check(c.MaxAge == 0 && c.MaxMsgsPerSubject <= 0, "stream %s ages out or caps messages (max age %s, per subject %d)", c.Name, c.MaxAge, c.MaxMsgsPerSubject)
		if strings.HasPrefix(c.Name, mailbox.MailboxPrefix) {
			check(c.Duplicates >= 10*time.Minute, "mailbox %s dedupe window %s, want at least 10m", c.Name, c.Duplicates)
			st, err := conn.JS.Stream(ctx, c.Name)
			if err != nil {
				t.Fatal(err)
			}
			cl := st.ListConsumers(ctx)
			n := 0
			for ci := range cl.Info() {
				n++
				cc := ci.Config
				check(cc.Durable != "", "consumer %s of %s is not durable", ci.Name, c.Name)
				check(cc.AckPolicy == jetstream.AckExplicitPolicy, "consumer %s of %s does not use explicit ack", ci.Name, c.Name)
				check(cc.AckWait > 0 && cc.MaxAckPending > 0, "consumer %s of %s: ack wait %s, max ack pending %d", ci.Name, c.Name, cc.AckWait, cc.MaxAckPending)
				check(cc.InactiveThreshold > 0, "consumer %s of %s is never removed when idle", ci.Name, c.Name)
			}
			if err := cl.Err(); err != nil {
				t.Fatal(err)
			}
			check(n >= 6, "mailbox %s has %d consumers, want an agent and a sidecar consumer for the lead and each member", c.Name, n)
		}
	}
	if err := lister.Err(); err != nil {
		t.Fatal(err)
	}
	check(streams >= 3, "%d streams, want at least mailbox, state and heartbeats", streams)
	result(t, "S10", "%d invariants checked on %d streams: sync_always, explicit store limits, loopback only, monitoring off, token required, file storage, no async persist but heartbeats, Discard New and no age limit on mail, dedupe >= 10m, durable explicit-ack consumers", checks, streams)
}

func countFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(es)
}

// S11: no goroutine or file descriptor growth over 50 restarts of an
// in-process node that serves a send and a read each time.
func TestS11_NoLeaksAcrossRestarts(t *testing.T) {
	restarts := tier(50, 200)
	dir := t.TempDir()
	cycle := func(i int) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		nd, err := node.Start(ctx, node.NodeConfig{Dir: dir, Listen: "127.0.0.1:0", MaxStore: 1 << 30, Logger: (&memLogger{}).logger()})
		if err != nil {
			t.Fatalf("restart %d: %v", i, err)
		}
		defer nd.Close()
		conn, err := bus.Connect(ctx, bus.ConnectConfig{Server: nd.URL(), Token: nd.Token()})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		mb := mailbox.NewMailbox(conn.JS, "leak", mailbox.MailboxConfig{MaxBytes: 8 << 20})
		if err := mb.Declare(ctx); err != nil {
			t.Fatal(err)
		}
		if err := mb.AddRecipient(ctx, "r1", time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := mb.Send(ctx, &teambus.Message{ID: fmt.Sprint(i), From: "s1", To: "r1", Type: teambus.MsgInfo, Body: "x"}, false); err != nil {
			t.Fatal(err)
		}
		if _, err := mb.Inbox(ctx, "r1", mailbox.InboxOptions{Ack: true}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ { // warm up: lazily started runtime and library goroutines
		cycle(i)
	}
	runtime.GC()
	baseG, baseFD := runtime.NumGoroutine(), countFDs(t)
	for i := 0; i < restarts; i++ {
		cycle(i + 3)
	}
	const slack = 10
	var g, fd int
	deadline := time.Now().Add(20 * time.Second)
	for {
		runtime.GC()
		g, fd = runtime.NumGoroutine(), countFDs(t)
		if g <= baseG+slack && fd <= baseFD+slack {
			break
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
			t.Fatalf("after %d restarts: %d goroutines (base %d), %d fds (base %d)\n%s", restarts, g, baseG, fd, baseFD, tail(b.String(), 8000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	result(t, "S11", "%d node restarts: goroutines %d -> %d, fds %d -> %d (slack %d)", restarts, baseG, g, baseFD, fd, slack)
}
