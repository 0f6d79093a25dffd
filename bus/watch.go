package bus

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// EachUpdate calls fn with each entry w delivers until ctx ends or w is
// stopped. The nil entry that marks the end of the initial values is
// skipped.
func EachUpdate(ctx context.Context, w jetstream.KeyWatcher, fn func(jetstream.KeyValueEntry)) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e != nil {
				fn(e)
			}
		}
	}
}
