package mailbox

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
)

// LeaseOptions say how much of a member's inbox to lease.
type LeaseOptions struct {
	// Max is the most messages leased; 0 means 50.
	Max int
	// Wait blocks up to this long for mail when none is there.
	Wait time.Duration
	// Self is the reader; broadcasts it sent itself are acked and skipped.
	Self string
	// MaxBytes, when set, bounds the JSON of the messages leased (with
	// LeaseTokenRoom for each one's token): a message that would take the
	// total past it is given back to the inbox for the next read. The
	// first message is always leased.
	MaxBytes int
}

// LeaseTokenRoom is the room a leased message's token takes beside it in
// a reply, counted against LeaseOptions.MaxBytes.
const LeaseTokenRoom = 256

// Lease is mail fetched from a member's inbox and held in flight: no other
// reader (hook, waiter, MCP call, `teambus inbox`) sees it until it is
// acked or released, or until the inbox ack wait (InboxAckWait) passes and
// the server delivers it again. A lease is how a reader acks only what it
// has handed on: fetch, write, then Ack what was written and Release the
// rest. It is safe for concurrent use.
type Lease struct {
	// Messages are the leased messages, oldest first.
	Messages []teambus.Message

	mb     *Mailbox
	member string
	cons   jetstream.Consumer
	mu     sync.Mutex
	msgs   map[uint64]jetstream.Msg
}

// Lease fetches up to opts.Max unacknowledged messages of member's agent
// inbox without returning them to the inbox. Undecodable mail and the
// reader's own broadcasts are acked away, as Inbox does; they stay in the
// stream for replay. The caller must Ack or Release what it leased.
func (mb *Mailbox) Lease(ctx context.Context, member string, opts LeaseOptions) (*Lease, error) {
	if opts.Max <= 0 {
		opts.Max = 50
	}
	cons, err := mb.consumer(ctx, InboxConsumer(member), member)
	if err != nil {
		return nil, err
	}
	msgs, err := mb.fetch(ctx, cons, member, opts.Max, opts.Wait)
	l := &Lease{mb: mb, member: member, cons: cons, msgs: map[uint64]jetstream.Msg{}}
	var away []uint64
	page := pageBudget{max: opts.MaxBytes}
	bySeq(msgs)
	for _, jm := range msgs {
		md, mdErr := jm.Metadata()
		if mdErr != nil {
			_ = jm.Nak() // not ours to judge; the server redelivers it
			continue
		}
		m, decErr := decode(jm.Data(), md.Sequence.Stream, jm.Subject())
		if decErr != nil || (m.To == teambus.All && m.From == opts.Self) {
			// Undecodable mail can never be processed and a sender never gets
			// its own broadcast: ack it away, it stays in the stream for replay.
			if jm.DoubleAck(ctx) == nil { // if it fails, the message comes back after the ack wait and is acked away again
				away = append(away, md.Sequence.Stream)
			}
			continue
		}
		if !page.take(m, LeaseTokenRoom) {
			_ = jm.Nak() // past the byte budget; a lost Nak only delays it to the ack wait
			continue
		}
		l.msgs[m.Seq] = jm
		l.Messages = append(l.Messages, m)
	}
	sort.Slice(l.Messages, func(i, j int) bool { return l.Messages[i].Seq < l.Messages[j].Seq })
	mb.noteAcked(ctx, member, false, cons, away)
	if err != nil {
		// What was fetched before the error is held: give it back.
		_ = l.Release(ctx) // unreleased mail comes back after the ack wait; the fetch error is the one to report
		return nil, teambus.Unavailablef("lease inbox of %s: %w", member, err)
	}
	return l, nil
}

// Token returns the opaque ack token of a leased message (its JetStream
// ack subject), for a reader that acks later through AckToken; empty if
// seq is not held by the lease.
func (l *Lease) Token(seq uint64) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if jm := l.msgs[seq]; jm != nil {
		return jm.Reply()
	}
	return ""
}

// Ack acknowledges the leased messages with the given sequences, each
// confirmed by the server (a double ack), oldest first, and stops at the
// first failure. It returns the sequences acked. A sequence the lease does
// not hold is skipped. An ack is final: acking twice is harmless.
func (l *Lease) Ack(ctx context.Context, seqs ...uint64) (acked []uint64, err error) {
	sorted := append([]uint64(nil), seqs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	defer func() { l.mb.noteAcked(ctx, l.member, false, l.cons, acked) }()
	for _, s := range sorted {
		l.mu.Lock()
		jm := l.msgs[s]
		l.mu.Unlock()
		if jm == nil {
			continue
		}
		if err := jm.DoubleAck(ctx); err != nil {
			return acked, teambus.Unavailablef("ack seq %d of %s: %w", s, l.member, err)
		}
		l.mu.Lock()
		delete(l.msgs, s)
		l.mu.Unlock()
		acked = append(acked, s)
	}
	return acked, nil
}

// AckAll acknowledges every message still held by the lease.
func (l *Lease) AckAll(ctx context.Context) ([]uint64, error) {
	return l.Ack(ctx, l.Held()...)
}

// Held returns the sequences the lease still holds, oldest first.
func (l *Lease) Held() []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]uint64, 0, len(l.msgs))
	for s := range l.msgs {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Release returns every message still held to the inbox at once (Nak), so
// the next reader sees it. It is idempotent.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	held := l.msgs
	l.msgs = map[uint64]jetstream.Msg{}
	l.mu.Unlock()
	var first error
	for s, jm := range held {
		if err := jm.Nak(); err != nil && first == nil {
			first = teambus.Unavailablef("release seq %d of %s: %w", s, l.member, err)
		}
	}
	if err := l.mb.flush(ctx); err != nil && first == nil {
		first = teambus.Unavailablef("release mail of %s: %w", l.member, err)
	}
	return first
}

// AckToken acknowledges one message of member's inbox by the token a lease
// gave out (Lease.Token), confirmed by the server. The token must be an ack
// subject of this team's mailbox stream and member's inbox consumer for
// stream sequence seq; anything else is refused and nothing is acked. A
// token whose delivery has expired is acked by the server as a no-op: the
// message then comes back and must be processed again (harmlessly).
func (mb *Mailbox) AckToken(ctx context.Context, member, token string, seq uint64) error {
	if err := mb.checkToken(member, token, seq); err != nil {
		return err
	}
	if err := mb.ackToken(ctx, member, token, seq); err != nil {
		return err
	}
	mb.noteTokenAcks(ctx, member, []uint64{seq})
	return nil
}

// noteTokenAcks records acks made by token (NoteAcked), on the consumer
// the tokens came from.
func (mb *Mailbox) noteTokenAcks(ctx context.Context, member string, seqs []uint64) {
	if len(seqs) == 0 {
		return
	}
	cons, err := mb.JS().Consumer(ctx, mb.Stream(), InboxConsumer(member))
	if err != nil {
		return // removed: its acks were not kept, and what it had in flight comes back
	}
	mb.noteAcked(ctx, member, false, cons, seqs)
}

func (mb *Mailbox) ackToken(ctx context.Context, member, token string, seq uint64) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	if _, err := mb.JS().Conn().RequestWithContext(ctx, token, []byte("+ACK")); err != nil {
		return teambus.Unavailablef("ack seq %d of %s: %w", seq, member, err)
	}
	return nil
}

// ReleaseToken returns one leased message to member's inbox (Nak) by its
// token.
func (mb *Mailbox) ReleaseToken(ctx context.Context, member, token string, seq uint64) error {
	if err := mb.checkToken(member, token, seq); err != nil {
		return err
	}
	if err := mb.JS().Conn().Publish(token, []byte("-NAK")); err != nil {
		return teambus.Unavailablef("release seq %d of %s: %w", seq, member, err)
	}
	return mb.flush(ctx)
}

// checkToken validates an ack token: $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>
// (the v1 form) or the v2 form with a domain and account hash before the
// stream: $JS.ACK.<domain>.<acchash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>[.<token>].
func (mb *Mailbox) checkToken(member, token string, seq uint64) error {
	bad := teambus.Invalidf("invalid ack token for seq %d of %s: nothing acked", seq, member)
	t := strings.Split(token, ".")
	if len(t) < 9 || t[0] != "$JS" || t[1] != "ACK" {
		return bad
	}
	rest := t[2:]
	if len(t) >= 11 {
		rest = t[4:] // v2: skip domain and account hash
	}
	if len(rest) < 7 || rest[0] != mb.Stream() || rest[1] != InboxConsumer(member) {
		return bad
	}
	sseq, err := strconv.ParseUint(rest[3], 10, 64)
	if err != nil || sseq != seq {
		return bad
	}
	for _, s := range t {
		if s == "" || strings.ContainsAny(s, "*> \t\r\n") {
			return bad
		}
	}
	return nil
}

// String describes the lease for logs.
func (l *Lease) String() string {
	return fmt.Sprintf("lease of %s: %d message(s), %d held", l.member, len(l.Messages), len(l.Held()))
}

// LeaseToken is what acks or releases one leased message held for a
// member by a service that does not keep the lease: its sequence and its
// ack token (Lease.Token).
type LeaseToken struct {
	Seq   uint64
	Reply string
}

// AckLeased acknowledges leased mail of member by its tokens, after
// checking every token: one foreign token refuses the whole ack and
// nothing is acked. Acking twice is harmless; a token whose consumer is
// gone (the team was deleted) counts as already acked.
func (mb *Mailbox) AckLeased(ctx context.Context, member string, toks []LeaseToken) (AckResult, error) {
	var res AckResult
	if len(toks) == 0 {
		return res, teambus.Invalidf("nothing to ack: no tokens")
	}
	for _, t := range toks {
		if err := mb.checkToken(member, t.Reply, t.Seq); err != nil {
			return res, err
		}
	}
	defer func() { mb.noteTokenAcks(ctx, member, res.Acked) }()
	for _, t := range toks {
		if err := mb.ackToken(ctx, member, t.Reply, t.Seq); err != nil {
			if errors.Is(err, nats.ErrNoResponders) {
				res.Already = append(res.Already, t.Seq)
				continue
			}
			return res, err
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
		if err := mb.checkToken(member, t.Reply, t.Seq); err != nil {
			return 0, err
		}
	}
	for _, t := range toks {
		if err := mb.ReleaseToken(ctx, member, t.Reply, t.Seq); err != nil {
			return 0, err
		}
	}
	return len(toks), nil
}
