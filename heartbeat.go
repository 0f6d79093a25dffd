package teambus

import (
	"context"
	"time"
)

// Heartbeat is what a sidecar publishes every heartbeat interval.
type Heartbeat struct {
	Member     string       `json:"member"`
	Session    string       `json:"session"`
	Epoch      int64        `json:"epoch"`
	Status     MemberStatus `json:"status,omitempty"`
	Task       string       `json:"task,omitempty"`
	ContextPct int          `json:"context_pct,omitempty"`
	PID        int          `json:"pid,omitempty"`
	TS         time.Time    `json:"ts"`
}

// BeatEvent is one change of a heartbeat key seen by a watch: a heartbeat
// written (Alive, with the writer's epoch) or the key expired (the member,
// or the lead when Member is Lead, was silent for its timeout). A key
// deleted by a clean stop is no event.
type BeatEvent struct {
	Member string
	Alive  bool
	Epoch  int64
}

// Delivery is one message taken from a sidecar inbox. Handled, it is
// acked; given back (Nak) it is delivered again at once; Term drops it for
// good. Err says why the message could not be read (Msg is then empty):
// such a delivery is dropped.
type Delivery struct {
	Msg    Message
	Err    error
	Settle Settler
}

// Settler settles a delivery with the server that delivered it.
type Settler interface {
	Ack(ctx context.Context) error
	Nak(ctx context.Context) error
	Term(ctx context.Context) error
}

// Ack marks the delivery handled, and waits for the server to confirm.
func (d Delivery) Ack(ctx context.Context) error { return d.Settle.Ack(ctx) }

// Nak gives the delivery back for redelivery now.
func (d Delivery) Nak(ctx context.Context) error { return d.Settle.Nak(ctx) }

// Term drops the delivery for good.
func (d Delivery) Term(ctx context.Context) error { return d.Settle.Term(ctx) }

// TakeBuffered appends to ds the deliveries ch holds, without waiting for
// more. An inbox that stops gives them back (Nak) with those it was
// handed, so they are delivered again at once, not after ack-wait.
func TakeBuffered(ch <-chan Delivery, ds []Delivery) []Delivery {
	for {
		select {
		case d := <-ch:
			ds = append(ds, d)
		default:
			return ds
		}
	}
}
