package kv

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Opening a bucket (js.KeyValue) is a STREAM.INFO round trip to the
// server, and every Store call opened its bucket afresh: a send, which
// reads the team, its sender and its recipient, paid three of them, and
// every heartbeat one beside its write. The store keeps the handles it
// opened for bucketTTL; the handle only names the stream, so a cached one
// is as good as a new one while the bucket exists. A bucket deleted by
// another process is noticed when the entry expires (until then its
// operations fail as unavailable instead of not found); DeleteTeam forgets
// its own at once.

// bucketTTL is how long an opened bucket handle is reused.
const bucketTTL = 30 * time.Second

// bucketCache holds opened bucket handles by bucket name. The zero value
// is ready to use.
type bucketCache struct {
	mu sync.Mutex
	m  map[string]cachedBucket
}

type cachedBucket struct {
	kv     jetstream.KeyValue
	expiry time.Time
}

// open returns the handle of bucket name, opening it when it is not
// cached. Errors are jetstream's, for the caller to classify.
func (s *Store) open(ctx context.Context, name string) (jetstream.KeyValue, error) {
	c := &s.buckets
	now := time.Now()
	c.mu.Lock()
	if b, ok := c.m[name]; ok && now.Before(b.expiry) {
		c.mu.Unlock()
		return b.kv, nil
	}
	c.mu.Unlock()
	kv, err := s.js.KeyValue(ctx, name)
	if err != nil {
		return nil, err
	}
	s.remember(name, kv)
	return kv, nil
}

// remember caches a handle just opened or created.
func (s *Store) remember(name string, kv jetstream.KeyValue) {
	c := &s.buckets
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]cachedBucket{}
	}
	c.m[name] = cachedBucket{kv: kv, expiry: time.Now().Add(bucketTTL)}
}

// forget drops the cached handles of names.
func (s *Store) forget(names ...string) {
	c := &s.buckets
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range names {
		delete(c.m, n)
	}
}
