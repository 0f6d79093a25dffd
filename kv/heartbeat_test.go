package kv_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/kv"
)

func TestTTL(t *testing.T) {
	tests := []struct {
		in, want time.Duration
	}{
		{0, time.Second},
		{-time.Second, time.Second},
		{time.Millisecond, time.Second},
		{999 * time.Millisecond, time.Second},
		{time.Second, time.Second},
		{1001 * time.Millisecond, 2 * time.Second},
		{1500 * time.Millisecond, 2 * time.Second},
		{10 * time.Minute, 10 * time.Minute},
	}
	for _, tt := range tests {
		if got := kv.TTL(tt.in); got != tt.want {
			t.Errorf("TTL(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestMemberKey(t *testing.T) {
	k := kv.MemberKey("tm1")
	if id, ok := kv.MemberOfKey(k); !ok || id != "tm1" {
		t.Errorf("MemberOfKey(%q) = %q, %t", k, id, ok)
	}
	if _, ok := kv.MemberOfKey(kv.LeadKey); ok {
		t.Errorf("MemberOfKey(%q) = true, want false", kv.LeadKey)
	}
	if kv.MemberKey(teambus.Lead) == kv.LeadKey {
		t.Errorf("a member key collides with the lead key")
	}
}

// nextEntry waits for the next watcher update.
func nextEntry(t *testing.T, w jetstream.KeyWatcher, timeout time.Duration) jetstream.KeyValueEntry {
	t.Helper()
	select {
	case e := <-w.Updates():
		return e
	case <-time.After(timeout):
		t.Fatalf("no heartbeat update within %s", timeout)
		return nil
	}
}

func TestStore_Beat_ExpiresWithoutRenewal(t *testing.T) {
	t.Parallel() // waits on server timers
	ctx := testCtx(t)
	s, _ := newStore(t)
	createTeam(t, s, "alpha", "tm1")

	w, err := s.WatchHeartbeats(ctx, "alpha", jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	key := kv.MemberKey("tm1")
	start := time.Now()
	rev, err := s.Beat(ctx, "alpha", key, &kv.Heartbeat{Member: "tm1", Session: "s1", Epoch: 1, Status: teambus.MemberIdle}, time.Second, 0)
	if err != nil || rev == 0 {
		t.Fatalf("Beat = %d, %v", rev, err)
	}
	e := nextEntry(t, w, 5*time.Second)
	hb, ok := kv.DecodeHeartbeat(e)
	if !ok || e.Key() != key || hb.Member != "tm1" || hb.Session != "s1" || hb.Epoch != 1 || hb.Rev != rev || hb.TS.IsZero() {
		t.Fatalf("first update = %+v (ok %t, key %s)", hb, ok, e.Key())
	}
	live, err := s.Heartbeats(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := live[key]; !ok {
		t.Fatalf("Heartbeats = %v, want %s", live, key)
	}

	// No renewal: the server purges the key and every watcher hears it.
	e = nextEntry(t, w, 5*time.Second)
	if e.Key() != key || e.Operation() != jetstream.KeyValuePurge {
		t.Fatalf("update = %s %v, want a purge of %s", e.Key(), e.Operation(), key)
	}
	if age := time.Since(start); age < 900*time.Millisecond {
		t.Errorf("expired after %v, before its 1s TTL", age)
	}
	if _, ok := kv.DecodeHeartbeat(e); ok {
		t.Errorf("DecodeHeartbeat(purge) = ok")
	}
	live, err = s.Heartbeats(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := live[key]; ok {
		t.Errorf("expired heartbeat still listed")
	}
	// A new incarnation starts over with rev 0.
	if _, err := s.Beat(ctx, "alpha", key, &kv.Heartbeat{Member: "tm1", Epoch: 2}, time.Second, 0); err != nil {
		t.Errorf("beat after expiry: %v", err)
	}
}

func TestStore_Beat_RenewalKeepsAlive(t *testing.T) {
	t.Parallel() // waits on server timers
	ctx := testCtx(t)
	s, _ := newStore(t)
	createTeam(t, s, "alpha")

	w, err := s.WatchHeartbeats(ctx, "alpha", jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// Renew a 1s TTL every 400ms for 2s: the key outlives its TTL twice.
	var rev uint64
	tick := time.NewTicker(400 * time.Millisecond)
	defer tick.Stop()
	for i := 0; i < 5; i++ {
		n, err := s.Beat(ctx, "alpha", kv.LeadKey, &kv.Heartbeat{Member: teambus.Lead, Session: "L"}, time.Second, rev)
		if err != nil {
			t.Fatalf("beat %d: %v", i, err)
		}
		if n <= rev {
			t.Fatalf("beat %d: revision %d after %d", i, n, rev)
		}
		rev = n
		if e := nextEntry(t, w, 5*time.Second); e.Operation() != jetstream.KeyValuePut {
			t.Fatalf("beat %d: update %v, want a put: the key expired while renewed", i, e.Operation())
		}
		<-tick.C
	}
	if e := nextEntry(t, w, 5*time.Second); e.Operation() != jetstream.KeyValuePurge {
		t.Errorf("after the last beat: %v, want the purge", e.Operation())
	}
}

func TestStore_Beat_StaleRevisionTakesOver(t *testing.T) {
	ctx := testCtx(t)
	s, _ := newStore(t)
	createTeam(t, s, "alpha", "tm1")
	key := kv.MemberKey("tm1")

	r1, err := s.Beat(ctx, "alpha", key, &kv.Heartbeat{Member: "tm1", Epoch: 1}, 5*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A second writer (a restarted sidecar) begins with rev 0 on an
	// existing key, and the first then beats with its stale revision.
	r2, err := s.Beat(ctx, "alpha", key, &kv.Heartbeat{Member: "tm1", Epoch: 2}, 5*time.Second, 0)
	if err != nil || r2 <= r1 {
		t.Fatalf("takeover beat = %d, %v (after %d)", r2, err, r1)
	}
	r3, err := s.Beat(ctx, "alpha", key, &kv.Heartbeat{Member: "tm1", Epoch: 2}, 5*time.Second, r1)
	if err != nil || r3 <= r2 {
		t.Fatalf("beat with stale revision = %d, %v (after %d)", r3, err, r2)
	}
	live, err := s.Heartbeats(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if hb := live[key]; hb.Epoch != 2 || hb.Rev != r3 {
		t.Errorf("live heartbeat = %+v, want epoch 2 rev %d", hb, r3)
	}
}

func TestStore_StopBeat(t *testing.T) {
	ctx := testCtx(t)
	s, _ := newStore(t)
	createTeam(t, s, "alpha", "tm1")
	key := kv.MemberKey("tm1")
	if _, err := s.Beat(ctx, "alpha", key, &kv.Heartbeat{Member: "tm1"}, time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Beat(ctx, "alpha", kv.LeadKey, &kv.Heartbeat{Member: teambus.Lead}, time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.StopBeat(ctx, "alpha", key); err != nil {
		t.Fatal(err)
	}
	if err := s.StopBeat(ctx, "alpha", key); err != nil {
		t.Errorf("second StopBeat = %v", err)
	}
	live, err := s.Heartbeats(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := live[key]; ok || len(live) != 1 {
		t.Errorf("Heartbeats after stop = %v, want only the lead", live)
	}
}

func TestStore_Beat_MissingTeam(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, _ := newStore(t)
	if _, err := s.Beat(ctx, "ghost", kv.LeadKey, &kv.Heartbeat{}, time.Second, 0); !errors.Is(err, teambus.ErrNotFound) {
		t.Errorf("Beat in missing team = %v, want ErrNotFound", err)
	}
	if _, err := s.Heartbeats(ctx, "a.b"); !errors.Is(err, teambus.ErrInvalid) {
		t.Errorf("Heartbeats(a.b) = %v, want ErrInvalid", err)
	}
}

// TestStore_HeartbeatBucket_AsyncPersist: on one replica a new team's
// heartbeat bucket is persisted asynchronously (no fsync per beat), is a
// KV bucket like any other (per-key TTL, limit markers), and a bucket made
// before that keeps its mode when the team is created over it.
func TestStore_HeartbeatBucket_AsyncPersist(t *testing.T) {
	ctx := testCtx(t)
	s, js := newStore(t)
	createTeam(t, s, "alpha", "tm1")
	st, err := js.Stream(ctx, "KV_"+kv.HeartbeatPrefix+"alpha")
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	if cfg.PersistMode != jetstream.AsyncPersistMode || !cfg.AllowMsgTTL || cfg.SubjectDeleteMarkerTTL == 0 || cfg.MaxMsgsPerSubject != 1 || !cfg.AllowDirect {
		t.Errorf("heartbeat stream config = %+v, want async persist, per-key TTL, limit markers, history 1, direct gets", cfg)
	}
	if _, err := s.Beat(ctx, "alpha", kv.MemberKey("tm1"), &kv.Heartbeat{Member: "tm1", Epoch: 1}, 5*time.Second, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: kv.HeartbeatPrefix + "beta", History: 1, LimitMarkerTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	createTeam(t, s, "beta", "tm1")
	st, err = js.Stream(ctx, "KV_"+kv.HeartbeatPrefix+"beta")
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().Config.PersistMode; got != jetstream.DefaultPersistMode {
		t.Errorf("persist mode of an older bucket = %v, want it kept (default)", got)
	}
	if _, err := s.Beat(ctx, "beta", kv.MemberKey("tm1"), &kv.Heartbeat{Member: "tm1", Epoch: 1}, 5*time.Second, 0); err != nil {
		t.Fatal(err)
	}
}

// EndBeat ends a silent writer's key as an expiry does (a purge), at the
// writer's revision or, when that is stale, at whatever revision holds a
// beat of the same or an older incarnation; a newer incarnation's key is
// left alone; a clean end deletes.
func TestStore_EndBeat(t *testing.T) {
	ctx := testCtx(t)
	s, _ := newStore(t)
	createTeam(t, s, "alpha", "tm1")
	key := kv.MemberKey("tm1")
	w, err := s.WatchHeartbeat(ctx, "alpha", key, jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	op := func() jetstream.KeyValueOp {
		t.Helper()
		for {
			select {
			case e := <-w.Updates():
				if e != nil {
					return e.Operation()
				}
			case <-ctx.Done():
				t.Fatal("no update")
			}
		}
	}
	r1, err := s.Beat(ctx, "alpha", key, &kv.Heartbeat{Member: "tm1", Epoch: 1}, time.Minute, 0)
	if err != nil || op() != jetstream.KeyValuePut {
		t.Fatal(err)
	}
	if err := s.EndBeat(ctx, "alpha", key, r1, 1, false); err != nil || op() != jetstream.KeyValuePurge {
		t.Fatalf("end at the writer's revision: %v", err)
	}
	if err := s.EndBeat(ctx, "alpha", key, r1, 1, false); err != nil {
		t.Fatalf("end of an ended key = %v, want nil", err)
	}
	r2, err := s.Beat(ctx, "alpha", key, &kv.Heartbeat{Member: "tm1", Epoch: 1}, time.Minute, 0)
	if err != nil || op() != jetstream.KeyValuePut {
		t.Fatal(err)
	}
	// A stale revision (another instance wrote since): the key of the same
	// incarnation is ended all the same.
	if _, err := s.Beat(ctx, "alpha", key, &kv.Heartbeat{Member: "tm1", Epoch: 1}, time.Minute, r2); err != nil || op() != jetstream.KeyValuePut {
		t.Fatal(err)
	}
	if err := s.EndBeat(ctx, "alpha", key, r2, 1, false); err != nil || op() != jetstream.KeyValuePurge {
		t.Fatalf("end at a stale revision: %v", err)
	}
	// A newer incarnation's key is not the silent writer's.
	if _, err := s.Beat(ctx, "alpha", key, &kv.Heartbeat{Member: "tm1", Epoch: 2}, time.Minute, 0); err != nil || op() != jetstream.KeyValuePut {
		t.Fatal(err)
	}
	if err := s.EndBeat(ctx, "alpha", key, 0, 1, false); err != nil {
		t.Fatal(err)
	}
	if live, err := s.Heartbeats(ctx, "alpha"); err != nil || live[key].Epoch != 2 {
		t.Fatalf("after ending epoch 1: %+v, %v; want epoch 2's key kept", live, err)
	}
	if err := s.EndBeat(ctx, "alpha", key, 0, 2, true); err != nil || op() != jetstream.KeyValueDelete {
		t.Fatalf("clean end: %v", err)
	}
}
