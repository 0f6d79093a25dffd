package kv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
)

// LeadKey is the heartbeat key of the lead.
const LeadKey = "lead"

// MemberKey is the heartbeat key of a teammate.
func MemberKey(id string) string { return preMember + id }

// MemberOfKey returns the member id of a heartbeat key, and false for the
// lead's key or any other.
func MemberOfKey(key string) (string, bool) {
	return strings.CutPrefix(key, preMember)
}

// markerTTL is how long the bucket keeps the purge marker of an expired key.
const markerTTL = 30 * time.Second

// heartbeatStream is the stream of a team's heartbeat bucket named name:
// what jetstream.CreateKeyValue makes of a bucket with History 1, MaxBytes
// HeartbeatBytes and LimitMarkerTTL markerTTL (per-key TTLs), and on a
// single replica async persistence, which jetstream.KeyValueConfig cannot
// say. The node fsyncs every other write (SyncAlways); a heartbeat it
// loses to a kill -9 is harmless: the key's next beat takes over whatever
// revision the key has (Beat), and liveness is judged by when beats are
// seen, not by the last one stored. Replicated streams cannot be async
// and need not be: a cluster syncs on its raft log, not on each message.
func heartbeatStream(name string, replicas int) jetstream.StreamConfig {
	cfg := jetstream.StreamConfig{
		Name:                   "KV_" + name,
		Description:            "teambus heartbeats (per-key TTL)",
		Subjects:               []string{"$KV." + name + ".>"},
		MaxMsgsPerSubject:      1,
		MaxBytes:               HeartbeatBytes,
		MaxMsgs:                -1,
		MaxMsgSize:             -1,
		MaxConsumers:           -1,
		Storage:                jetstream.FileStorage,
		Replicas:               max(1, replicas),
		AllowRollup:            true,
		DenyDelete:             true,
		Duplicates:             2 * time.Minute,
		AllowDirect:            true,
		Discard:                jetstream.DiscardNew,
		AllowMsgTTL:            true,
		SubjectDeleteMarkerTTL: markerTTL,
	}
	if cfg.Replicas == 1 {
		cfg.PersistMode = jetstream.AsyncPersistMode
	}
	return cfg
}

// Heartbeat is what a sidecar publishes every heartbeat interval.
type Heartbeat = teambus.Heartbeat

// HeartbeatEntry is a heartbeat as read from the bucket.
type HeartbeatEntry struct {
	Heartbeat
	Rev     uint64
	Created time.Time // server time of the write
}

// TTL rounds a timeout up to whole seconds, at least one: the precision of
// per-key TTLs in JetStream.
func TTL(d time.Duration) time.Duration {
	if d < time.Second {
		return time.Second
	}
	return ((d + time.Second - 1) / time.Second) * time.Second
}

func (s *Store) heartbeats(ctx context.Context, team string, create bool) (jetstream.KeyValue, error) {
	if err := teambus.ValidateID("team", team); err != nil {
		return nil, err
	}
	name := HeartbeatPrefix + team
	if create {
		cfg := heartbeatStream(name, s.cfg.Replicas)
		_, err := s.js.CreateOrUpdateStream(ctx, cfg)
		if err != nil && cfg.PersistMode == jetstream.AsyncPersistMode {
			// A bucket made before async persistence keeps its mode: the
			// server refuses to change it.
			if st, serr := s.js.Stream(ctx, cfg.Name); serr == nil && st.CachedInfo().Config.PersistMode != cfg.PersistMode {
				cfg.PersistMode = st.CachedInfo().Config.PersistMode
				_, err = s.js.CreateOrUpdateStream(ctx, cfg)
			}
		}
		var kv jetstream.KeyValue
		if err == nil {
			kv, err = s.js.KeyValue(ctx, name)
		}
		if err != nil {
			return nil, unavailable("create heartbeat bucket of team "+team, err)
		}
		return kv, nil
	}
	kv, err := s.open(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, teambus.NotFoundf("team %s not found: use `teambus team list`", team)
	}
	if err != nil {
		return nil, unavailable("open heartbeats of team "+team, err)
	}
	return kv, nil
}

// Beat writes a heartbeat under key with a time to live of ttl, so the key
// expires on the server when no beat follows. rev is the revision of the
// previous beat of this writer, 0 for the first. It returns the new
// revision.
func (s *Store) Beat(ctx context.Context, team, key string, hb *Heartbeat, ttl time.Duration, rev uint64) (uint64, error) {
	kv, err := s.heartbeats(ctx, team, false)
	if err != nil {
		return 0, err
	}
	if hb.TS.IsZero() {
		hb.TS = s.Now()
	}
	b, err := json.Marshal(hb)
	if err != nil {
		return 0, fmt.Errorf("encode heartbeat: %w", err)
	}
	ttl = TTL(ttl)
	subject := "$KV." + HeartbeatPrefix + team + "." + key
	for i := 0; i < 4; i++ {
		if rev == 0 {
			n, err := kv.Create(ctx, key, b, jetstream.KeyTTL(ttl))
			if err == nil {
				return n, nil
			}
			if !isConflict(err) {
				return 0, unavailable("heartbeat "+key, err)
			}
			// A key left by an earlier writer: take over its revision.
			e, gerr := kv.Get(ctx, key)
			if gerr != nil {
				continue
			}
			rev = e.Revision()
		}
		ack, err := s.js.Publish(ctx, subject, b, jetstream.WithMsgTTL(ttl), jetstream.WithExpectLastSequencePerSubject(rev))
		if err == nil {
			return ack.Sequence, nil
		}
		if !isConflict(err) {
			return 0, unavailable("heartbeat "+key, err)
		}
		// Expired (purged) or written by someone else: start again.
		rev = 0
	}
	return 0, fmt.Errorf("heartbeat %s: %w", key, ErrConflict)
}

// StopBeat deletes the heartbeat key, as a clean shutdown does.
func (s *Store) StopBeat(ctx context.Context, team, key string) error {
	kv, err := s.heartbeats(ctx, team, false)
	if err != nil {
		return err
	}
	if err := kv.Delete(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return unavailable("stop heartbeat "+key, err)
	}
	return nil
}

// StopBeatAt deletes the heartbeat key only if its last revision is rev,
// the writer's own last beat: a stopping incarnation never removes its
// successor's heartbeat. A key already gone or rewritten is left alone.
func (s *Store) StopBeatAt(ctx context.Context, team, key string, rev uint64) error {
	kv, err := s.heartbeats(ctx, team, false)
	if err != nil {
		return err
	}
	err = kv.Delete(ctx, key, jetstream.LastRevision(rev))
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) && !isConflict(err) {
		return unavailable("stop heartbeat "+key, err)
	}
	return nil
}

// EndBeat ends the heartbeat key of a silent writer as its expiry would:
// a purge (watchers see the key expire, not a clean stop), whose marker
// the bucket drops after a while. rev is the revision of the last beat the
// caller wrote, 0 when it knows none; epoch is the incarnation judged
// silent. A key rewritten since by a newer incarnation is left alone; a key
// already gone is not an error. With clean, the key is deleted instead,
// as a clean shutdown does (watchers see no expiry).
func (s *Store) EndBeat(ctx context.Context, team, key string, rev uint64, epoch int64, clean bool) error {
	kv, err := s.heartbeats(ctx, team, false)
	if err != nil {
		return err
	}
	for i := 0; i < 3; i++ {
		if rev == 0 {
			e, err := kv.Get(ctx, key)
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				return nil
			}
			if err != nil {
				return unavailable("end heartbeat "+key, err)
			}
			hb, ok := DecodeHeartbeat(e)
			if !ok || hb.Epoch > epoch {
				return nil
			}
			rev = e.Revision()
		}
		if clean {
			err = kv.Delete(ctx, key, jetstream.LastRevision(rev))
		} else {
			err = kv.Purge(ctx, key, jetstream.LastRevision(rev), jetstream.PurgeTTL(markerTTL))
		}
		if err == nil || errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil
		}
		if !isConflict(err) {
			return unavailable("end heartbeat "+key, err)
		}
		rev = 0 // written since: look at what is there
	}
	return fmt.Errorf("end heartbeat %s: %w", key, ErrConflict)
}

// Heartbeats reads every live heartbeat of the team by key. It reads the
// bucket directly, without a watch (see direct.go).
func (s *Store) Heartbeats(ctx context.Context, team string) (map[string]HeartbeatEntry, error) {
	kv, err := s.heartbeats(ctx, team, false)
	if err != nil {
		return nil, err
	}
	out := map[string]HeartbeatEntry{}
	err = readBucket(ctx, s.js.Conn(), kv.Bucket(), func(e entry) error {
		var hb Heartbeat
		if json.Unmarshal(e.value, &hb) == nil {
			out[e.key] = HeartbeatEntry{Heartbeat: hb, Rev: e.rev, Created: e.created}
		}
		return nil
	})
	if err != nil {
		return nil, unavailable("read heartbeats of team "+team, err)
	}
	return out, nil
}

// WatchHeartbeats watches the team's heartbeat bucket, including deletes
// and the purges of expired keys. The first updates are the current values,
// then a nil entry.
func (s *Store) WatchHeartbeats(ctx context.Context, team string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	kv, err := s.heartbeats(ctx, team, false)
	if err != nil {
		return nil, err
	}
	w, err := kv.WatchAll(ctx, opts...)
	if err != nil {
		return nil, unavailable("watch heartbeats of team "+team, err)
	}
	return w, nil
}

// WatchHeartbeat reports the writes of one heartbeat key of team (Beat's
// key: LeadKey or MemberKey) until ctx ends: a watcher that needs one
// key is not sent every beat of the team.
func (s *Store) WatchHeartbeat(ctx context.Context, team, key string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	kv, err := s.heartbeats(ctx, team, false)
	if err != nil {
		return nil, err
	}
	w, err := kv.Watch(ctx, key, opts...)
	if err != nil {
		return nil, unavailable("watch heartbeat "+key+" of team "+team, err)
	}
	return w, nil
}

// DecodeHeartbeat decodes a put entry; deletes and purges give false.
func DecodeHeartbeat(e jetstream.KeyValueEntry) (HeartbeatEntry, bool) {
	if e == nil || e.Operation() != jetstream.KeyValuePut {
		return HeartbeatEntry{}, false
	}
	var hb Heartbeat
	if err := json.Unmarshal(e.Value(), &hb); err != nil {
		return HeartbeatEntry{}, false
	}
	return HeartbeatEntry{Heartbeat: hb, Rev: e.Revision(), Created: e.Created()}, true
}
