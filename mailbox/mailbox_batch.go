package mailbox

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/internal/jsbatch"
	"github.com/teambus/teambus/internal/jserr"
)

// SendBatch stores msgs like Send, in order, in JetStream atomic batches
// of at most jsbatch.Max: a batch is stored whole (its messages get
// consecutive sequences) or not at all, with one acknowledgement and, on a
// sync-always node, a few fsyncs for the whole batch instead of one per
// message. Each message keeps its idempotency key: a batch in which any
// message was stored before (a retry after a lost ack) is refused whole
// by the server, and SendBatch then sends that batch's messages one at a
// time, so the repeats come back as Duplicate and the rest are stored.
// It returns a result for each message stored before an error; what
// follows an error was not stored by this call (retry it with the same
// ids).
func (mb *Mailbox) SendBatch(ctx context.Context, msgs []*teambus.Message, held bool) ([]SendResult, error) {
	return mb.sendBatch(ctx, msgs, held, nil)
}

// SendBatchFenced stores msgs like SendBatch, all from one sender, but
// only while marker is the latest incarnation marker of that sender (see
// SendFenced): the first message of every atomic batch expects it, so a
// newer incarnation refuses the batch whole, with a *MarkerMovedError
// carrying the latest sequence. The results are those of the messages
// stored before the error.
func (mb *Mailbox) SendBatchFenced(ctx context.Context, msgs []*teambus.Message, held bool, marker uint64) ([]SendResult, error) {
	for _, m := range msgs[min(1, len(msgs)):] {
		if m.From != msgs[0].From {
			return nil, teambus.Invalidf("a fenced batch has one sender: %s and %s", msgs[0].From, m.From)
		}
	}
	return mb.sendBatch(ctx, msgs, held, &marker)
}

// sendBatch is SendBatch, fenced on *marker when marker is not nil.
func (mb *Mailbox) sendBatch(ctx context.Context, msgs []*teambus.Message, held bool, marker *uint64) ([]SendResult, error) {
	for _, m := range msgs {
		if err := mb.check(m); err != nil {
			return nil, err
		}
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	out := make([]SendResult, 0, len(msgs))
	upgraded := false
	for start := 0; start < len(msgs); {
		batch := msgs[start:min(start+jsbatch.Max, len(msgs))]
		nm := make([]*nats.Msg, len(batch))
		for i, m := range batch {
			msgID, b, err := encode(m, held)
			if err != nil {
				return out, err
			}
			nm[i] = &nats.Msg{Subject: mb.subject(m, held), Data: b, Header: nats.Header{jetstream.MsgIDHeader: []string{msgID}}}
		}
		if marker != nil {
			nm[0].Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(*marker, 10))
			nm[0].Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, mb.MarkerSubject(batch[0].From))
		}
		ack, err := jsbatch.Publish(ctx, mb.JS().Conn(), nm)
		if err != nil && (bus.NoResponse(err) || bus.Electing(err)) {
			// Nothing stored: the same batch again, once a leader answers.
			ack, err = bus.WhileElecting(ctx, mb.JS(), mb.Stream(), "send a batch to team "+mb.Team(), err, func(ctx context.Context) (*jetstream.PubAck, error) {
				return jsbatch.Publish(ctx, mb.JS().Conn(), nm)
			})
		}
		switch {
		case err == nil:
			first := ack.Sequence - uint64(len(batch)) + 1
			for i, m := range batch {
				out = append(out, SendResult{Seq: first + uint64(i), ID: m.ID, Held: held})
			}
		case jsbatch.Disabled(err) && !upgraded:
			upgraded = true
			if uerr := jsbatch.AllowAtomic(ctx, mb.JS(), mb.Stream()); uerr != nil {
				return out, teambus.Unavailablef("send a batch to team %s: its mailbox predates batch sends and this connection can not upgrade it: %w", mb.Team(), uerr)
			}
			continue
		case jserr.Is(err, jserr.BatchDuplicate):
			for _, m := range batch {
				var res SendResult
				var err error
				if marker != nil {
					res, err = mb.SendFenced(ctx, m, held, *marker)
				} else {
					res, err = mb.Send(ctx, m, held)
				}
				if err != nil {
					return out, err
				}
				out = append(out, res)
			}
		default:
			if marker != nil {
				if moved := markerMoved(err, batch[0].From); moved != nil {
					return out, moved
				}
			}
			return out, mb.publishErr(err)
		}
		start += len(batch)
	}
	return out, nil
}

// markerMoved returns the *MarkerMovedError of a fenced publish of from's
// mail that the server refused for a newer incarnation marker, or nil.
func markerMoved(err error, from string) error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
		_, num, _ := strings.Cut(apiErr.Description, "wrong last sequence: ")
		if seq, perr := strconv.ParseUint(strings.TrimSpace(num), 10, 64); perr == nil {
			return &MarkerMovedError{Member: from, Seq: seq}
		}
	}
	return nil
}
