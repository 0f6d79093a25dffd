package kv_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/node/nodetest"
)

// TestReadBucket_Paths checks that a bucket of more keys than multi_last
// returns is read through the scan, with the same result.
func TestReadBucket_Paths(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := nodetest.Connect(t, nodetest.NewBareServer(t))
	big, err := c.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "B", History: 4})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1100 {
		for r := range 2 {
			if _, err := big.Put(ctx, fmt.Sprintf("k%d", i), fmt.Appendf(nil, "%d-%d", i, r)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := big.Delete(ctx, "k7"); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.ReadLast(ctx, c.NC, "B"); !errors.Is(err, kv.ErrTooMany) {
		t.Fatalf("multi_last over 1100 keys = %v, want too many", err)
	}
	got := map[string]string{}
	if err := kv.ReadBucket(ctx, c.NC, "B", func(e kv.Entry) error {
		got[e.Key] = string(e.Value)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1099 || got["k5"] != "5-1" || got["k7"] != "" {
		t.Errorf("read %d keys, k5 = %q, k7 = %q; want 1099, 5-1 and none", len(got), got["k5"], got["k7"])
	}
	// A small bucket in one multi_last.
	small, err := c.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "S"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := small.Put(ctx, "a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	last, err := kv.ReadLast(ctx, c.NC, "S")
	if err != nil || len(last) != 1 || string(last[0].Value) != "1" {
		t.Errorf("readLast = %+v, %v", last, err)
	}
	// An empty bucket is no keys, not an error.
	if _, err := c.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "E"}); err != nil {
		t.Fatal(err)
	}
	if err := kv.ReadBucket(ctx, c.NC, "E", func(kv.Entry) error { return errors.New("called") }); err != nil {
		t.Errorf("empty bucket: %v", err)
	}
}
