package mailbox

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/internal/jsbatch"
)

// ReplayFilter selects mailbox messages for replay. Empty fields match all.
type ReplayFilter struct {
	From, To    string
	Type        teambus.MessageType
	SinceSeq    uint64
	SinceTime   time.Time
	UntilSeq    uint64
	UntilTime   time.Time
	Limit       int
	Follow      bool
	IncludeHeld bool
	// OnUndecodable, if set, is called for a stored message that can not
	// be decoded, with its sequence and why; without it such a message is
	// skipped. It does not count toward Limit.
	OnUndecodable func(seq uint64, reason string) error
}

// Validate checks the ids in the filter.
func (f ReplayFilter) Validate() error {
	if f.From != "" {
		if err := teambus.ValidateID("member", f.From); err != nil {
			return err
		}
	}
	if f.To != "" {
		if err := teambus.ValidateID("member", f.To); err != nil {
			return err
		}
	}
	if f.Type != "" {
		if _, err := teambus.ParseMessageType(string(f.Type)); err != nil {
			return err
		}
	}
	if f.Limit < 0 {
		return teambus.Invalidf("invalid --limit %d: must be 0 (no limit) or more", f.Limit)
	}
	return nil
}

func (mb *Mailbox) filterSubjects(f ReplayFilter) []string {
	tok := func(s string) string {
		if s == "" {
			return "*"
		}
		return s
	}
	p := "tb." + mb.Team() + "."
	tail := "." + tok(f.To) + "." + tok(string(f.Type)) + "." + tok(f.From)
	subs := []string{p + kindMail + tail, p + kindCtl + tail}
	if f.IncludeHeld {
		subs = append(subs, p+kindHeld+"."+tok(f.From)+"."+tok(f.To)+"."+tok(string(f.Type)))
	}
	return subs
}

// Replay calls fn for every message that matches f, in sequence order. It
// reads through an ordered consumer, so memory stays constant however long
// the stream is. Without Follow it stops at the last message stored when it
// started; with Follow it waits for new mail until ctx is done.
func (mb *Mailbox) Replay(ctx context.Context, f ReplayFilter, fn func(teambus.Message) error) error {
	if err := f.Validate(); err != nil {
		return err
	}
	st, err := mb.JS().Stream(ctx, mb.Stream())
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return teambus.NotFoundf("team %s not found: use `teambus team list`", mb.Team())
	}
	if err != nil {
		return teambus.Unavailablef("open mailbox of team %s: %w", mb.Team(), err)
	}
	last := st.CachedInfo().State.LastSeq
	if f.UntilSeq > 0 && f.UntilSeq < last && !f.Follow {
		last = f.UntilSeq
	}
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: mb.filterSubjects(f),
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	}
	switch {
	case f.SinceSeq > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, f.SinceSeq
	case !f.SinceTime.IsZero():
		t := f.SinceTime
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &t
	}
	if !f.Follow && (last == 0 || (f.SinceSeq > last)) {
		return nil
	}
	n := 0
	return bus.ReadOrdered(ctx, st, cfg, last, f.Follow, "replay mailbox of team "+mb.Team(), func(jm jetstream.Msg, md *jetstream.MsgMetadata) (bool, error) {
		seq := md.Sequence.Stream
		if f.UntilSeq > 0 && seq > f.UntilSeq {
			return true, nil
		}
		m, err := decode(jm.Data(), seq, jm.Subject())
		if err != nil {
			if f.OnUndecodable == nil {
				return false, nil
			}
			if err := f.OnUndecodable(seq, undecodableReason(err)); err != nil {
				return true, err
			}
			return false, nil
		}
		if !f.UntilTime.IsZero() && md.Timestamp.After(f.UntilTime) {
			return true, nil
		}
		if err := fn(m); err != nil {
			return true, err
		}
		n++
		return f.Limit > 0 && n >= f.Limit, nil
	})
}

// undecodableReason is a one-line reason from a decode error, without the
// "decode message seq N:" prefix the caller prints anyway.
func undecodableReason(err error) string {
	if u := errors.Unwrap(err); u != nil {
		err = u
	}
	return teambus.SanitizeLine(err.Error())
}

// Tail returns the last n messages of the mailbox (mail and sidecar
// traffic, not held mail), oldest first.
func (mb *Mailbox) Tail(ctx context.Context, n int) ([]teambus.Message, error) {
	st, err := mb.JS().Stream(ctx, mb.Stream())
	if err != nil {
		return nil, teambus.Unavailablef("open mailbox of team %s: %w", mb.Team(), err)
	}
	last := st.CachedInfo().State.LastSeq
	if last == 0 {
		return nil, nil
	}
	// Held mail is rare, so a window of 2n usually holds n messages; widen
	// until it does or the stream start is reached.
	first := st.CachedInfo().State.FirstSeq
	for window := uint64(2*n + 8); ; window *= 4 {
		start := first
		if last > window && last-window+1 > first {
			start = last - window + 1
		}
		var out []teambus.Message
		err := mb.Replay(ctx, ReplayFilter{SinceSeq: start, UntilSeq: last}, func(m teambus.Message) error {
			out = append(out, m)
			return nil
		})
		if err != nil {
			return nil, err
		}
		if len(out) >= n || start == first {
			if len(out) > n {
				out = out[len(out)-n:]
			}
			return out, nil
		}
	}
}

// HeldConsumer names the durable consumer that tracks which held mail of
// a member was released.
func HeldConsumer(member string) string { return "hd_" + member }

// HeldPending returns how many held messages of member wait for release.
// It counts only after a first release created the cursor; before that,
// mail is held only while the member is a zombie and the release on leaving
// zombie mode delivers it.
func (mb *Mailbox) HeldPending(ctx context.Context, member string) (uint64, error) {
	cons, err := mb.JS().Consumer(ctx, mb.Stream(), HeldConsumer(member))
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, teambus.Unavailablef("read held mail of %s: %w", member, err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return 0, teambus.Unavailablef("read held mail of %s: %w", member, err)
	}
	return info.NumPending + uint64(info.NumAckPending), nil
}

// ReleaseHeld delivers the mail member sent while a zombie, in order, and
// returns what it delivered, each marked with HeldSince. A durable
// consumer is the cursor: held messages are fetched up to jsbatch.Max at a
// time, their deliveries stored as one atomic batch (SendBatch), and only
// then acked; each delivery's idempotency key is derived from the held
// message, so a release cut short by a crash and repeated stores each
// message once.
func (mb *Mailbox) ReleaseHeld(ctx context.Context, member string) ([]teambus.Message, error) {
	st, err := mb.JS().Stream(ctx, mb.Stream())
	if err != nil {
		return nil, teambus.Unavailablef("open mailbox of team %s: %w", mb.Team(), err)
	}
	cons, err := mb.heldCursor(ctx, st, member)
	if err != nil {
		return nil, teambus.Unavailablef("open held mail of %s: %w", member, err)
	}
	var out []teambus.Message
	for {
		msgs, err := mb.fetchAll(ctx, cons, jsbatch.Max, 0)
		if err != nil {
			return out, teambus.Unavailablef("read held mail of %s: %w", member, err)
		}
		if len(msgs) == 0 {
			return out, nil
		}
		var release []*teambus.Message
		for _, jm := range msgs {
			md, err := jm.Metadata()
			if err != nil {
				return out, teambus.Unavailablef("read held mail of %s: %w", member, err)
			}
			m, err := decode(jm.Data(), md.Sequence.Stream, jm.Subject())
			if err != nil {
				continue // undecodable: acked away below, it stays in the stream for replay
			}
			m.Held = false
			if m.HeldSince == nil {
				since := md.Timestamp.UTC()
				m.HeldSince = &since
			}
			release = append(release, &m)
		}
		// The release has the idempotency key of a direct send: an agent
		// that sends the same id again after leaving zombie mode stores it
		// once. Unacked held copies come back after the ack wait.
		res, err := mb.SendBatch(ctx, release, false)
		for i := range res {
			release[i].Seq = res[i].Seq
			out = append(out, *release[i])
		}
		if err != nil {
			return out, err
		}
		var last uint64
		for _, jm := range msgs {
			if err := jm.DoubleAck(ctx); err != nil {
				return out, teambus.Unavailablef("release held mail of %s: %w", member, err)
			}
			if md, err := jm.Metadata(); err == nil {
				last = max(last, md.Sequence.Stream)
			}
		}
		mb.noteReleased(ctx, member, cons, last)
	}
}
