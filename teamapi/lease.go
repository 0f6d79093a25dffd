package teamapi

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/teambus/teambus"
)

// Lease is mail leased from the actor's inbox through an API: each
// message is in flight until acked or released by the token the lease
// gave for it; unacked it comes back after the inbox's ack wait.
type Lease struct {
	api   API
	actor Actor
	msgs  []teambus.Message

	mu   sync.Mutex
	held []Leased // not yet acked or released
}

// LeaseInbox leases up to max messages of a's inbox through api, waiting
// up to wait for one when there is none.
func LeaseInbox(ctx context.Context, api API, a Actor, max int, wait time.Duration) (*Lease, error) {
	res, err := api.Inbox(ctx, InboxRequest{Actor: a, Mode: InboxLease, Max: max, WaitMS: waitMS(wait)})
	if err != nil {
		return nil, err
	}
	l := &Lease{api: api, actor: a, held: res.Messages, msgs: make([]teambus.Message, 0, len(res.Messages))}
	for _, m := range res.Messages {
		l.msgs = append(l.msgs, m.Message)
	}
	return l, nil
}

// Messages are the leased messages, oldest first.
func (l *Lease) Messages() []teambus.Message { return l.msgs }

func tokensOf(msgs []Leased) []Token {
	out := make([]Token, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, Token{Seq: m.Seq, Token: m.Token})
	}
	return out
}

// Ack acks the held messages with seqs by their tokens, confirmed by the
// server, and returns the seqs acked (already acked ones included: an ack
// is final). A seq the lease does not hold is skipped.
func (l *Lease) Ack(ctx context.Context, seqs ...uint64) ([]uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var pick, rest []Leased
	for _, m := range l.held {
		if slices.Contains(seqs, m.Seq) {
			pick = append(pick, m)
		} else {
			rest = append(rest, m)
		}
	}
	if len(pick) == 0 {
		return nil, nil
	}
	res, err := l.api.Ack(ctx, AckRequest{Actor: l.actor, Tokens: tokensOf(pick)})
	if err != nil {
		// Nothing is known acked: all stays held, and Release returns it
		// (a release of a message acked after all is harmless).
		return nil, err
	}
	l.held = rest
	acked := append(slices.Clone(res.Acked), res.Already...)
	slices.Sort(acked)
	return acked, nil
}

// Release returns every message still held to the inbox at once. It is
// idempotent.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.held) == 0 {
		return nil
	}
	if _, err := l.api.Release(ctx, ReleaseRequest{Actor: l.actor, Tokens: tokensOf(l.held)}); err != nil {
		return err
	}
	l.held = nil
	return nil
}
