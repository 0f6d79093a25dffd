package node_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/bus/bustest"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/node/credstore"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// liveEnv is a node with its team service and team "lv" (members tm1,
// tm2) on a policy of policy, tm1 registered, and a member connection
// of tm1 over TCP.
type liveEnv struct {
	admin  *team.Service
	member *bus.Conn
	m      *teambus.Member
}

func newLiveEnv(t *testing.T, pol teambus.Policy) *liveEnv {
	t.Helper()
	ctx := testCtx(t)
	n := nodetest.NewServer(t)
	c := nodetest.Connect(t, n)
	svc := team.New(c.JS, team.Config{})
	if _, err := svc.CreateTeam(ctx, "lv", "", []team.MemberSpec{{ID: "tm1"}, {ID: "tm2"}}, pol); err != nil {
		t.Fatal(err)
	}
	m, err := svc.Join(ctx, "lv", "tm1", "s1")
	if err != nil {
		t.Fatal(err)
	}
	cr, err := credstore.IssueCreds(ctx, c, "lv", "tm1", []string{n.URL()})
	if err != nil {
		t.Fatal(err)
	}
	mc, err := bus.Connect(ctx, bus.ConnectConfig{Server: n.URL(), User: cr.User, Pass: cr.Password, InboxPrefix: cr.InboxPrefix, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mc.Close)
	return &liveEnv{admin: svc, member: mc, m: m}
}

// keyEvents watches tm1's heartbeat key: its writes and its purges.
func (e *liveEnv) keyEvents(t *testing.T, ctx context.Context) <-chan jetstream.KeyValueEntry {
	t.Helper()
	w, err := e.admin.Store().WatchHeartbeat(ctx, "lv", kv.MemberKey("tm1"), jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	return w.Updates()
}

func livePolicy(memberTimeout time.Duration) teambus.Policy {
	p := teambus.DefaultPolicy()
	p.Heartbeat = 100 * time.Millisecond
	p.MemberTimeout = memberTimeout
	p.LeadTimeout = memberTimeout
	p.ProbeTimeout = memberTimeout / 4
	p.TakeoverAfter = memberTimeout
	return p
}

// A member credential beats through the team service; the key is
// written when the incarnation first beats and then every half
// member-timeout, not once per beat; when the beats stop the key ends as
// an expiry does.
func TestLiveness_MemberBeatsWrittenPerHalfTimeout(t *testing.T) {
	e := newLiveEnv(t, livePolicy(2*time.Second))
	ctx := testCtx(t)
	events := e.keyEvents(t, ctx)
	b := teamapi.Beat{Member: "tm2", Session: "s1", Epoch: e.m.Epoch, Status: teambus.MemberIdle} // the service takes the member from the credential
	beats, writes := 0, 0
	start := time.Now()
	for time.Since(start) < 3*time.Second {
		if err := teamapi.PublishBeat(e.member.NC, "lv", true, b); err != nil {
			t.Fatal(err)
		}
		beats++
		wait := time.After(100 * time.Millisecond)
	drain:
		for {
			select {
			case ev := <-events:
				if ev == nil {
					continue
				}
				if ev.Operation() != jetstream.KeyValuePut {
					t.Fatalf("key %s while tm1 beats", ev.Operation())
				}
				hb, _ := kv.DecodeHeartbeat(ev)
				if hb.Member != "tm1" || hb.Epoch != e.m.Epoch || hb.Session != "s1" {
					t.Fatalf("written %+v, want tm1's incarnation", hb.Heartbeat)
				}
				writes++
			case <-wait:
				break drain
			}
		}
	}
	if writes == 0 || writes*3 > beats {
		t.Fatalf("%d writes for %d beats, want a write every half member-timeout, not per beat", writes, beats)
	}
	// Silent now: the key ends (a purge, which watchers see as expiry).
	for {
		select {
		case ev := <-events:
			if ev == nil || ev.Operation() == jetstream.KeyValuePut {
				continue
			}
			if ev.Operation() != jetstream.KeyValuePurge {
				t.Fatalf("key %s after silence, want a purge (expiry)", ev.Operation())
			}
			return
		case <-ctx.Done():
			t.Fatal("the key of a silent member was not ended")
		}
	}
}

// A beat of a replaced incarnation is dropped, not written, and the
// member's connection is told on its control inbox.
func TestLiveness_StaleBeatFenced(t *testing.T) {
	e := newLiveEnv(t, livePolicy(time.Minute))
	ctx := testCtx(t)
	ctl, err := teamapi.SubscribeControl(ctx, e.member.NC, "lv", "tm1", true)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.member.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	events := e.keyEvents(t, ctx)
	if _, err := e.admin.Join(ctx, "lv", "tm1", "s2"); err != nil {
		t.Fatal(err)
	}
	if err := teamapi.PublishBeat(e.member.NC, "lv", true, teamapi.Beat{Session: "s1", Epoch: e.m.Epoch}); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-ctl:
		if c.Type != teamapi.ControlFenced || c.Member != "tm1" || c.Epoch != e.m.Epoch || c.Current != e.m.Epoch+1 {
			t.Fatalf("control %+v, want fenced of epoch %d (current %d)", c, e.m.Epoch, e.m.Epoch+1)
		}
	case <-ctx.Done():
		t.Fatal("no fenced notice on the control inbox")
	}
	select {
	case ev := <-events:
		if ev != nil {
			t.Fatalf("stale beat written: %s rev %d", ev.Operation(), ev.Revision())
		}
	default:
	}
}

// The connection that beats closes: the key ends at once, long before
// member-timeout.
func TestLiveness_ConnectionClosedEndsKey(t *testing.T) {
	e := newLiveEnv(t, livePolicy(10*time.Minute))
	ctx := testCtx(t)
	events := e.keyEvents(t, ctx)
	if err := teamapi.PublishBeat(e.member.NC, "lv", true, teamapi.Beat{Session: "s1", Epoch: e.m.Epoch}); err != nil {
		t.Fatal(err)
	}
	for ev := range events {
		if ev != nil && ev.Operation() == jetstream.KeyValuePut {
			break
		}
	}
	e.member.Close()
	for {
		select {
		case ev := <-events:
			if ev == nil || ev.Operation() == jetstream.KeyValuePut {
				continue
			}
			if ev.Operation() != jetstream.KeyValuePurge {
				t.Fatalf("key %s after the connection closed, want a purge", ev.Operation())
			}
			return
		case <-ctx.Done():
			t.Fatal("the key was not ended when its connection closed")
		}
	}
}

// In a cluster of three, a member connected to the third node beats:
// every node's service instance receives the beat, the key is written,
// a stale beat is fenced on the member's control inbox, and when the
// member's connection closes the key ends at once (the disconnect event
// of the third node reaches the instances of the others).
func TestLiveness_Cluster(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster election takes a few seconds")
	}
	nodes := newCluster(t, 3)
	admin := connectReady(t, bus.ConnectConfig{Server: nodes[0].URL(), Token: "cluster-token"}, 3)
	ctx := testCtx(t)
	svc := team.New(admin.JS, team.Config{})
	bustest.CheckFor(t, 10*time.Second, 200*time.Millisecond, func() error {
		_, err := svc.CreateTeam(ctx, "lc", "", []team.MemberSpec{{ID: "tm1"}}, livePolicy(10*time.Minute))
		if err != nil && strings.Contains(err.Error(), "already exists") {
			return nil
		}
		return err
	})
	m, err := svc.Join(ctx, "lc", "tm1", "s1")
	if err != nil {
		t.Fatal(err)
	}
	cr, err := credstore.IssueCreds(ctx, admin, "lc", "tm1", []string{nodes[2].URL()})
	if err != nil {
		t.Fatal(err)
	}
	var mc *bus.Conn
	bustest.CheckFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		var err error
		mc, err = bus.Connect(ctx, bus.ConnectConfig{Server: nodes[2].URL(), User: cr.User, Pass: cr.Password, InboxPrefix: cr.InboxPrefix, Timeout: time.Second})
		return err
	})
	defer mc.Close()
	ctl, err := teamapi.SubscribeControl(ctx, mc.NC, "lc", "tm1", true)
	if err != nil {
		t.Fatal(err)
	}
	w, err := svc.Store().WatchHeartbeat(ctx, "lc", kv.MemberKey("tm1"), jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	next := func(what string, op jetstream.KeyValueOp) {
		t.Helper()
		for {
			select {
			case e := <-w.Updates():
				if e == nil {
					continue
				}
				if e.Operation() == op {
					return
				}
			case <-ctx.Done():
				t.Fatalf("%s: no %s of the key", what, op)
			}
		}
	}
	beat := func(b teamapi.Beat) {
		t.Helper()
		if err := teamapi.PublishBeat(mc.NC, "lc", true, b); err != nil {
			t.Fatal(err)
		}
	}
	// The member account's imports exist once the member connected; beat
	// until the key is written.
	done := make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				if teamapi.PublishBeat(mc.NC, "lc", true, teamapi.Beat{Session: "s1", Epoch: m.Epoch}) != nil {
					return
				}
			}
		}
	}()
	next("beats", jetstream.KeyValuePut)
	beat(teamapi.Beat{Session: "old", Epoch: m.Epoch - 1})
	select {
	case c := <-ctl:
		if c.Type != teamapi.ControlFenced || c.Epoch != m.Epoch-1 {
			t.Fatalf("control %+v, want fenced of epoch %d", c, m.Epoch-1)
		}
	case <-ctx.Done():
		t.Fatal("no fenced notice on the control inbox")
	}
	mc.Close()
	<-done
	next("connection closed", jetstream.KeyValuePurge)
}

// A lead that goes silent: the service ends its key after lead-timeout
// and records its last beat as the team's lead_last_seen (the lead
// sidecar persists it itself only now and then).
func TestLiveness_LeadSilenceRecordsLastSeen(t *testing.T) {
	e := newLiveEnv(t, livePolicy(2*time.Second))
	ctx := testCtx(t)
	rep, err := e.admin.Resume(ctx, "lv", "L1", false, true)
	if err != nil {
		t.Fatal(err)
	}
	w, err := e.admin.Store().WatchHeartbeat(ctx, "lv", kv.LeadKey, jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	admin := e.admin.Store().JetStream().Conn()
	b := teamapi.Beat{Member: teambus.Lead, Session: "L1", Epoch: rep.LeadEpoch}
	var last time.Time
	for i := 0; i < 5; i++ {
		if err := teamapi.PublishBeat(admin, "lv", false, b); err != nil {
			t.Fatal(err)
		}
		last = time.Now()
		time.Sleep(100 * time.Millisecond)
	}
	for {
		select {
		case ev := <-w.Updates():
			if ev == nil || ev.Operation() != jetstream.KeyValuePurge {
				continue
			}
			bustest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
				tm, err := e.admin.Team(ctx, "lv")
				if err != nil {
					return err
				}
				if tm.LeadLastSeen == nil || tm.LeadLastSeen.Before(last.Add(-time.Second)) || tm.LeadLastSeen.After(last.Add(time.Second)) {
					return fmt.Errorf("lead_last_seen %v, want about the last beat %v", tm.LeadLastSeen, last)
				}
				return nil
			})
			return
		case <-ctx.Done():
			t.Fatal("the silent lead's key was not ended")
		}
	}
}
