package bus

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
)

// readOrdered reads st through an ordered consumer made with cfg and calls
// fn with every message in sequence order; memory stays constant however
// long the stream is. Without follow it stops at last (the last sequence
// stored when the read began) or when nothing is pending; with follow it
// waits for new messages until ctx is done. fn returns done to stop early.
// what names the read in errors ("replay mailbox of team T").
func readOrdered(ctx context.Context, st jetstream.Stream, cfg jetstream.OrderedConsumerConfig, last uint64, follow bool, what string,
	fn func(jm jetstream.Msg, md *jetstream.MsgMetadata) (done bool, err error)) error {
	cons, err := st.OrderedConsumer(ctx, cfg)
	if err != nil {
		return teambus.Unavailablef("%s: %v", what, err)
	}
	if !follow {
		info, err := cons.Info(ctx)
		if err == nil && info.NumPending == 0 {
			return nil
		}
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(1024))
	if err != nil {
		return teambus.Unavailablef("%s: %v", what, err)
	}
	if follow {
		// A follower ends when ctx does and may have been long-lived
		// (`teambus ui`, `replay --follow`): delete its consumer now
		// instead of leaving it to the server's inactive threshold.
		defer deleteOrdered(ctx, st, cons)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		jm, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			return teambus.Unavailablef("%s: %v", what, err)
		}
		md, err := jm.Metadata()
		if err != nil {
			continue
		}
		seq := md.Sequence.Stream
		if !follow && seq > last {
			return nil
		}
		done, err := fn(jm, md)
		if err != nil || done {
			return err
		}
		if !follow && (seq >= last || md.NumPending == 0) {
			return nil
		}
	}
}

// deleteOrdered deletes the server consumer behind an ordered consumer,
// within a second, after ctx may have ended. Failure (no permission, the
// server gone) leaves it to the inactive threshold.
func deleteOrdered(ctx context.Context, st jetstream.Stream, cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_ = st.DeleteConsumer(dctx, info.Name)
}
