package bus

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/teambus/teambus"
)

// LeasedMessage is a message fetched from an inbox and not yet acked or
// returned: Reply is the JetStream ack subject of the delivery, the token
// that acks or releases it.
type LeasedMessage struct {
	teambus.Message
	Reply string
}

// Lease fetches the member's unacknowledged mail, oldest first, without
// returning it: each message is held for the member until it is acked
// (AckLeased) or released (ReleaseLeased), or the inbox ack wait passes,
// after which it is delivered again. Broadcasts the member sent itself are
// acked and skipped.
func (mb *Mailbox) Lease(ctx context.Context, member string, opts InboxOptions) ([]LeasedMessage, error) {
	if opts.Max <= 0 {
		opts.Max = 100
	}
	cons, err := mb.consumer(ctx, InboxConsumer(member), member)
	if err != nil {
		return nil, err
	}
	msgs, err := mb.fetchAll(ctx, cons, opts.Max, opts.Wait)
	if err != nil {
		return nil, teambus.Unavailablef("read inbox of %s: %v", member, err)
	}
	var out []LeasedMessage
	for _, jm := range msgs {
		md, err := jm.Metadata()
		if err != nil {
			_ = jm.Nak()
			continue
		}
		m, err := decode(jm.Data(), md.Sequence.Stream, jm.Subject())
		if err != nil || (m.To == teambus.All && m.From == member) {
			_ = jm.DoubleAck(ctx)
			continue
		}
		out = append(out, LeasedMessage{Message: m, Reply: jm.Reply()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	if err := mb.flush(ctx); err != nil {
		return nil, teambus.Unavailablef("flush: %v", err)
	}
	return out, nil
}

// ackToken is a parsed JetStream ack subject.
type ackToken struct {
	stream, consumer string
	streamSeq        uint64
}

// parseAckToken parses a JetStream ack subject of the form
// $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>, or
// the form with a domain and an account hash before the stream (and an
// optional trailing token). Every numeric token must be a number.
func parseAckToken(s string) (ackToken, bool) {
	t := strings.Split(s, ".")
	if len(t) < 9 || t[0] != "$JS" || t[1] != "ACK" {
		return ackToken{}, false
	}
	var rest []string
	switch len(t) {
	case 9:
		rest = t[2:]
	case 11, 12:
		rest = t[4:11]
	default:
		return ackToken{}, false
	}
	for _, n := range rest[2:] {
		if _, err := strconv.ParseUint(n, 10, 64); err != nil {
			return ackToken{}, false
		}
	}
	sseq, _ := strconv.ParseUint(rest[3], 10, 64)
	return ackToken{stream: rest[0], consumer: rest[1], streamSeq: sseq}, sseq > 0
}

// checkToken verifies that token is the ack subject of seq in member's
// inbox consumer of this mailbox.
func (mb *Mailbox) checkToken(member string, seq uint64, token string) error {
	at, ok := parseAckToken(token)
	if !ok || at.stream != mb.Stream() || at.consumer != InboxConsumer(member) || at.streamSeq != seq {
		return teambus.Invalidf("invalid ack token for seq %d: not a delivery of the inbox of %s in team %s; read the inbox again", seq, member, mb.team)
	}
	return nil
}

// LeaseToken is what acks or releases one leased message: its sequence and
// its ack subject.
type LeaseToken struct {
	Seq   uint64
	Reply string
}

// AckLeased acknowledges leased mail of member by its tokens, after
// checking every token: one foreign token refuses the whole ack and
// nothing is acked. Acking twice is harmless.
func (mb *Mailbox) AckLeased(ctx context.Context, member string, toks []LeaseToken) (AckResult, error) {
	var res AckResult
	if len(toks) == 0 {
		return res, teambus.Invalidf("nothing to ack: no tokens")
	}
	for _, t := range toks {
		if err := mb.checkToken(member, t.Seq, t.Reply); err != nil {
			return res, err
		}
	}
	nc := mb.js.Conn()
	for _, t := range toks {
		_, err := nc.RequestWithContext(ctx, t.Reply, []byte("+ACK"))
		if err != nil {
			if errors.Is(err, nats.ErrNoResponders) {
				// The consumer is gone (the team was deleted): nothing to ack.
				res.Already = append(res.Already, t.Seq)
				continue
			}
			return res, teambus.Unavailablef("ack seq %d: %v", t.Seq, err)
		}
		res.Acked = append(res.Acked, t.Seq)
	}
	sort.Slice(res.Acked, func(i, j int) bool { return res.Acked[i] < res.Acked[j] })
	return res, nil
}

// ReleaseLeased returns leased mail of member for delivery again now,
// after checking every token.
func (mb *Mailbox) ReleaseLeased(ctx context.Context, member string, toks []LeaseToken) (int, error) {
	for _, t := range toks {
		if err := mb.checkToken(member, t.Seq, t.Reply); err != nil {
			return 0, err
		}
	}
	nc := mb.js.Conn()
	for _, t := range toks {
		if err := nc.Publish(t.Reply, []byte("-NAK")); err != nil {
			return 0, teambus.Unavailablef("release seq %d: %v", t.Seq, err)
		}
	}
	if err := nc.FlushTimeout(mb.timeout(ctx)); err != nil {
		return 0, teambus.Unavailablef("flush: %v", err)
	}
	return len(toks), nil
}
