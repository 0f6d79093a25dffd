package teambus

import (
	"errors"
	"time"
)

// SendResult is what a send stored: the stream sequence, and whether it was
// a duplicate of an earlier send with the same id.
type SendResult struct {
	Seq       uint64 `json:"seq"`
	ID        string `json:"id"`
	Duplicate bool   `json:"duplicate"`
	Held      bool   `json:"held,omitempty"`
}

// AckResult reports an ack by sequence.
type AckResult struct {
	Acked   []uint64 `json:"acked"`
	Already []uint64 `json:"already"`
}

// ErrNoLeader marks a transient failure: a stream the operation needs
// exists but no server answered for it, as while its replicas elect a new
// leader after a node was lost, or while the cluster's meta leader is
// being elected. Nothing was stored; the same operation succeeds once a
// leader is elected. Every ErrNoLeader is also an ErrUnavailable (exit
// 1). Messages of these errors name no command-line flag: the command
// line adds its own hint. (It is here, beside the other sentinels, so
// that the clients of the team service match it without linking a NATS
// client; package bus names it too.)
var ErrNoLeader = errors.New("no stream leader")

// ElectionWait bounds how long one operation waits in place for a stream
// that exists but has no leader before it returns an ErrNoLeader. It is
// shorter than a client's default timeout, so a client can retry it.
const ElectionWait = 3 * time.Second
