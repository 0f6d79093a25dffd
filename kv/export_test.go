package kv

import (
	"context"

	"github.com/nats-io/nats.go"
)

// What the external tests reach inside: they start a node through
// nodetest, which imports this package, so they cannot be in it.

// ErrTooMany is errTooMany.
var ErrTooMany = errTooMany

// Entry is an entry's key and value.
type Entry struct {
	Key   string
	Value []byte
}

// ReadLast is readLast.
func ReadLast(ctx context.Context, nc *nats.Conn, bucket string) ([]Entry, error) {
	es, err := readLast(ctx, nc, bucket)
	out := make([]Entry, len(es))
	for i, e := range es {
		out[i] = Entry{e.key, e.value}
	}
	return out, err
}

// ReadBucket is readBucket.
func ReadBucket(ctx context.Context, nc *nats.Conn, bucket string, fn func(Entry) error) error {
	return readBucket(ctx, nc, bucket, func(e entry) error { return fn(Entry{e.key, e.value}) })
}
