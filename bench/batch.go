package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/mailbox"
)

// keyBatch is the row of batched sends; + the batch size.
const keyBatch = "tb.send.batch"

// batchSizes are the batch sizes measured.
var batchSizes = []int{64, 256}

// batchMeters are the batched durable sends (Mailbox.SendBatch: a
// JetStream atomic batch, stored whole with one ack) of each size, on mb.
// Their rate is messages per second; a latency is one whole batch's.
func batchMeters(mb *mailbox.Mailbox, size int, seq *atomic.Int64, sfx, label, note string) []meter {
	var out []meter
	for _, n := range batchSizes {
		out = append(out, meter{group: "teambus", key: fmt.Sprint(keyBatch, n) + sfx,
			name: fmt.Sprintf("batched send, %d messages an atomic batch (Mailbox.SendBatch%s)", n, label), note: note,
			run: func(ctx context.Context, d time.Duration) (sample, error) {
				msgs := make([]*teambus.Message, n)
				s, err := loop(ctx, d, 1, 0, func(int) error {
					for i := range msgs {
						msgs[i] = &teambus.Message{ID: fmt.Sprintf("batch-%d", seq.Add(1)), From: "tm1", To: "tm2", Type: teambus.MsgInfo, Body: body(size), Epoch: 1}
					}
					_, err := mb.SendBatch(ctx, msgs, false)
					return err
				})
				s.n *= n // messages, not batches
				return s, err
			}})
	}
	return out
}
