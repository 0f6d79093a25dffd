package mailbox

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
)

// AsyncStallWait is how long SendAsync waits for room in a full window:
// the window drains at the node's fsync rate, which a busy disk can slow
// to a crawl for a moment.
const AsyncStallWait = 30 * time.Second

// SendAsync stores m like Send without waiting for the bus to acknowledge
// it: the message is on its way when SendAsync returns, and the future
// reports the stored sequence (PubAckFuture.Ok) or the error (Err). At most
// the connection's async window (256 on a Connect connection) is in flight;
// SendAsync blocks while the window is full, up to AsyncStallWait, then
// fails with ErrUnavailable. The durability is Send's: the ack comes after
// the node stored (and with sync always, fsynced) it.
//
// A sender that pipelines checks every future, or waits with
// JetStream().PublishAsyncComplete() and then checks them, and resends
// with the same ID what failed.
func (mb *Mailbox) SendAsync(m *teambus.Message, held bool) (jetstream.PubAckFuture, error) {
	if err := mb.check(m); err != nil {
		return nil, err
	}
	msgID, b, err := encode(m, held)
	if err != nil {
		return nil, err
	}
	f, err := mb.JS().PublishAsync(mb.subject(m, held), b, jetstream.WithMsgID(msgID), jetstream.WithStallWait(AsyncStallWait))
	if err != nil {
		return nil, mb.publishErr(err)
	}
	return f, nil
}
