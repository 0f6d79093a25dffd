package bus

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
)

// orderedInactive is how long the server keeps a reader's ordered
// consumer once its reader stopped asking for messages (nats.go's default
// is 5 minutes). A reader deletes its consumer when it ends; this bounds
// what a killed reader leaves behind.
const orderedInactive = 5 * time.Second

// orderedBuffer bounds in bytes what an ordered read of st buffers ahead
// (besides 1,024 messages: of a quarter MiB each that would be 256 MiB a
// reader). A pull must hold any one message of the stream, so it is twice
// the stream's largest message, at least 1 MiB; 8 MiB when the stream
// does not cap its messages (a server's max payload is at most that in
// practice).
func orderedBuffer(st jetstream.Stream) int {
	if info := st.CachedInfo(); info != nil && info.Config.MaxMsgSize > 0 {
		return max(2*int(info.Config.MaxMsgSize), 1<<20)
	}
	return 8 << 20
}

// deleteOrdered deletes the server side of an ordered consumer at the end
// of a read, also when ctx was cancelled. A failure is harmless: the
// inactivity threshold removes the consumer soon after.
func deleteOrdered(ctx context.Context, st jetstream.Stream, cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil || info.Name == "" {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = st.DeleteConsumer(dctx, info.Name) // best effort: an ordered consumer also expires by its inactive threshold
}

// ReadOrdered reads st through an ordered consumer made with cfg and calls
// fn with every message in sequence order; memory stays constant however
// long the stream is. Without follow it stops at last (the last sequence
// stored when the read began) or when nothing is pending; with follow it
// waits for new messages until ctx is done. fn returns done to stop early.
// what names the read in errors ("replay mailbox of team T").
func ReadOrdered(ctx context.Context, st jetstream.Stream, cfg jetstream.OrderedConsumerConfig, last uint64, follow bool, what string,
	fn func(jm jetstream.Msg, md *jetstream.MsgMetadata) (done bool, err error)) error {
	if cfg.InactiveThreshold == 0 {
		cfg.InactiveThreshold = orderedInactive
	}
	cons, err := st.OrderedConsumer(ctx, cfg)
	if err != nil {
		return teambus.Unavailablef("%s: %w", what, err)
	}
	defer deleteOrdered(ctx, st, cons)
	if !follow {
		info, err := cons.Info(ctx)
		if err == nil && info.NumPending == 0 {
			return nil
		}
	}
	it, err := cons.Messages(jetstream.PullMaxMessagesWithBytesLimit(1024, orderedBuffer(st)))
	if err != nil {
		return teambus.Unavailablef("%s: %w", what, err)
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
			return teambus.Unavailablef("%s: %w", what, err)
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
