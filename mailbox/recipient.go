package mailbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/internal/jsbatch"
)

// On-demand consumers.
//
// A recipient (a member, or the lead) has two durable consumers on its
// team's mailbox stream, its agent inbox (InboxConsumer) and its sidecar's
// (SidecarConsumer), but only while they are in use: each is created by
// the first read that needs it and carries an InactiveThreshold
// (MailboxConfig.ConsumerIdle), so the server removes it once nobody has
// pulled from it for that long and none of its deliveries is still within
// its ack wait. A durable consumer costs the node ~65 KB; an idle team of
// ten held 22 of them.
//
// The mailbox keeps every message (limits retention, an audit stream), so
// what a removed consumer knew, which of its mail was acked, is kept
// apart: one recipient record per recipient in the team's state bucket
// (key recipient.<member>, RecipientBucketPrefix), written with
// compare-and-set after every ack and never in the mailbox (its sequences
// stay the mail's). It holds, for each of the two consumers, the ack floor
// (every message of the consumer up to it is acked), the sequences acked
// above the floor, and the ack wait. A consumer created again starts after
// the floor and acks away the sequences acked above it as it delivers them
// (they are listed in its metadata, see Settled), so unacked mail is
// delivered exactly as before and acked mail is not delivered again. A
// member's held-mail cursor (HeldConsumer, ReleaseHeld) is made on demand
// and removed the same way; the record keeps how far the held mail was
// released. A team's create writes the records of all its recipients in
// one atomic batch. A record that missed an ack (a crash between the ack
// and the record) delivers that message once more after the consumer was
// removed: processing a message twice is harmless.

// DefaultConsumerIdle is how long a recipient's consumer lives unused
// before the server removes it (MailboxConfig.ConsumerIdle).
const DefaultConsumerIdle = 10 * time.Minute

// RecipientBucketPrefix starts the name of the bucket that holds a team's
// recipient records: the team's state bucket (kv.StatePrefix).
const RecipientBucketPrefix = "TBS_"

// recipientKey is the key of member's recipient record.
func recipientKey(member string) string { return "recipient." + member }

// position is where one consumer of a recipient stands.
type position struct {
	// Floor: every message of the consumer up to this stream sequence is
	// acked; a consumer created again starts after it.
	Floor uint64 `json:"floor"`
	// Acked are sequences above Floor acked out of order.
	Acked []uint64 `json:"acked,omitempty"`
	// AckWait is the consumer's ack wait.
	AckWait time.Duration `json:"ack_wait"`
}

// recipient is a recipient record.
type recipient struct {
	Member  string   `json:"member"`
	Inbox   position `json:"inbox"`
	Sidecar position `json:"sidecar"`
	// Released: the held mail of the member up to this stream sequence
	// was released (ReleaseHeld), in order.
	Released uint64 `json:"released,omitempty"`
}

func (r *recipient) pos(sidecar bool) *position {
	if sidecar {
		return &r.Sidecar
	}
	return &r.Inbox
}

func (mb *Mailbox) newRecipient(member string, ackWait time.Duration, floor uint64) recipient {
	if ackWait <= 0 {
		ackWait = 30 * time.Second
	}
	return recipient{
		Member:  member,
		Inbox:   position{Floor: floor, AckWait: min(ackWait, InboxAckWait)},
		Sidecar: position{Floor: floor, AckWait: min(ackWait, 30*time.Second)},
	}
}

// AddRecipient registers a member (or the lead) as a recipient of the
// mail stored from now on, in a recipient record; its consumers are
// created when first read. It is idempotent: a recipient registered
// before keeps its position.
func (mb *Mailbox) AddRecipient(ctx context.Context, member string, ackWait time.Duration) error {
	return mb.AddRecipients(ctx, []string{member}, ackWait)
}

// AddRecipients registers members like AddRecipient, in one atomic write
// when none of them is registered (a team's create). A bare mailbox,
// without the team's state bucket (tests, tools), keeps no records: its
// recipients' consumers are made at once and kept, as they all were
// before on-demand consumers.
func (mb *Mailbox) AddRecipients(ctx context.Context, members []string, ackWait time.Duration) error {
	for _, m := range members {
		if err := teambus.ValidateID("member", m); err != nil {
			return err
		}
	}
	st, err := mb.JS().Stream(ctx, mb.Stream())
	if err != nil {
		return teambus.Unavailablef("open mailbox of team %s: %w", mb.Team(), err)
	}
	floor := st.CachedInfo().State.LastSeq
	records, err := mb.recipients(ctx)
	if err != nil {
		return err
	}
	if !records {
		// A bare mailbox keeps no records: its recipients' consumers are
		// made now and never removed.
		for _, m := range members {
			for _, sidecar := range []bool{false, true} {
				rec := mb.newRecipient(m, ackWait, floor)
				cfg := mb.consumerConfig(m, sidecar, rec.pos(sidecar))
				if _, err := st.Consumer(ctx, cfg.Durable); err == nil {
					continue
				}
				cfg.InactiveThreshold = 0
				if _, err := st.CreateConsumer(ctx, cfg); err != nil && !errors.Is(err, jetstream.ErrConsumerExists) {
					return teambus.Unavailablef("create inbox %s of team %s: %w", cfg.Durable, mb.Team(), err)
				}
			}
		}
		return nil
	}
	if len(members) > 1 && len(members) <= jsbatch.Max {
		msgs := make([]*nats.Msg, 0, len(members))
		for _, m := range members {
			b, _ := json.Marshal(mb.newRecipient(m, ackWait, floor))
			msgs = append(msgs, &nats.Msg{Subject: "$KV." + RecipientBucketPrefix + mb.Team() + "." + recipientKey(m), Data: b, Header: nats.Header{
				// Whole only if none of them is registered yet.
				jetstream.ExpectedLastSubjSeqHeader: []string{"0"},
			}})
		}
		if _, err := jsbatch.Publish(ctx, mb.JS().Conn(), msgs); err == nil {
			return nil
		}
		// Some are registered, or the bucket takes no batches: one at a
		// time.
	}
	for _, m := range members {
		_, rev, found, err := mb.readRecipient(ctx, m)
		if err != nil {
			return err
		}
		if found {
			continue
		}
		rec := mb.newRecipient(m, ackWait, floor)
		// A recipient of a mailbox made before on-demand consumers has
		// its consumers: they keep their position.
		if c, err := st.Consumer(ctx, InboxConsumer(m)); err == nil {
			rec.Inbox.Floor = c.CachedInfo().AckFloor.Stream
			rec.Sidecar.Floor = c.CachedInfo().AckFloor.Stream
		}
		if err := mb.writeRecipient(ctx, &rec, rev); err != nil && !errors.Is(err, errRecordMoved) {
			return err
		}
	}
	return nil
}

var errRecordMoved = errors.New("recipient record moved")

// The records are read and written on the bucket's stream directly (a
// direct get, a publish expecting the key's last revision): no bucket
// open, so an ack costs two round trips more, not three.

func (mb *Mailbox) recordSubject(member string) string {
	return "$KV." + RecipientBucketPrefix + mb.Team() + "." + recipientKey(member)
}

// recipients reports whether the team has the bucket of recipient
// records; a bare mailbox (tests, tools) has none.
func (mb *Mailbox) recipients(ctx context.Context) (bool, error) {
	_, _, _, err := mb.readRecipient(ctx, teambus.Lead)
	if errors.Is(err, errNoRecords) {
		return false, nil
	}
	return err == nil, err
}

var errNoRecords = errors.New("no bucket of recipient records")

// writeRecipient stores rec if its member's record is still at revision
// rev (0: none); errRecordMoved if not.
func (mb *Mailbox) writeRecipient(ctx context.Context, rec *recipient, rev uint64) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode recipient %s: %w", rec.Member, err)
	}
	_, err = mb.JS().Publish(ctx, mb.recordSubject(rec.Member), b, jetstream.WithExpectLastSequencePerSubject(rev))
	var apiErr *jetstream.APIError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence:
		return errRecordMoved
	case bus.NoResponse(err) && bus.StreamMissing(ctx, mb.JS(), "KV_"+RecipientBucketPrefix+mb.Team()):
		return teambus.NotFoundf("team %s has no state bucket for its recipient records: create the team first", mb.Team())
	case bus.NoResponse(err) || bus.Electing(err):
		return bus.NoLeaderf("record recipient %s of team %s: the bus is electing a leader: nothing was stored", rec.Member, mb.Team())
	}
	return teambus.Unavailablef("record recipient %s of team %s: %w", rec.Member, mb.Team(), err)
}

// readRecipient returns member's recipient record and its revision;
// found is false when there is none, and the error errNoRecords when the
// team has no bucket for them.
func (mb *Mailbox) readRecipient(ctx context.Context, member string) (rec recipient, rev uint64, found bool, err error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	req := fmt.Appendf(nil, `{"last_by_subj":%q}`, mb.recordSubject(member))
	msg, err := mb.JS().Conn().RequestWithContext(ctx, "$JS.API.DIRECT.GET.KV_"+RecipientBucketPrefix+mb.Team(), req)
	if errors.Is(err, nats.ErrNoResponders) {
		return rec, 0, false, errNoRecords
	}
	if err != nil {
		return rec, 0, false, teambus.Unavailablef("read recipient %s of team %s: %w", member, mb.Team(), err)
	}
	if st := msg.Header.Get("Status"); st != "" {
		if st == "404" {
			return rec, 0, false, nil
		}
		return rec, 0, false, teambus.Unavailablef("read recipient %s of team %s: status %s %s", member, mb.Team(), st, msg.Header.Get("Description"))
	}
	rev, err = strconv.ParseUint(msg.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return rec, 0, false, teambus.Unavailablef("read recipient %s of team %s: no revision", member, mb.Team())
	}
	if op := msg.Header.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
		return rec, rev, false, nil
	}
	if err := json.Unmarshal(msg.Data, &rec); err != nil || rec.Member != member {
		return rec, 0, false, fmt.Errorf("recipient record of %s in team %s (revision %d) is damaged: %v", member, mb.Team(), rev, err)
	}
	return rec, rev, true, nil
}

// consumerConfig is the durable consumer of member's inbox or sidecar
// mail, starting after floor.
func (mb *Mailbox) consumerConfig(member string, sidecar bool, pos *position) jetstream.ConsumerConfig {
	p := "tb." + mb.Team() + "."
	name := InboxConsumer(member)
	filters := []string{p + kindMail + "." + member + ".>", p + kindMail + "." + teambus.All + ".>"}
	if sidecar {
		name = SidecarConsumer(member)
		filters = []string{p + kindCtl + "." + member + ".>"}
		if member == teambus.Lead {
			filters = append(filters,
				p+kindMail+"."+teambus.Lead+"."+string(teambus.MsgStatus)+".*",
				p+kindMail+"."+teambus.Lead+"."+string(teambus.MsgShutdownResponse)+".*")
		}
	}
	cfg := jetstream.ConsumerConfig{
		Durable:           name,
		Description:       "teambus recipient " + member,
		FilterSubjects:    filters,
		AckPolicy:         jetstream.AckExplicitPolicy,
		AckWait:           pos.AckWait,
		MaxDeliver:        -1,
		MaxAckPending:     10000,
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       pos.Floor + 1,
		Replicas:          mb.cfg.Replicas,
		InactiveThreshold: mb.cfg.ConsumerIdle,
	}
	if len(pos.Acked) > 0 {
		acked := make([]string, len(pos.Acked))
		for i, s := range pos.Acked {
			acked[i] = strconv.FormatUint(s, 10)
		}
		cfg.Metadata = map[string]string{ackedMeta: strings.Join(acked, ",")}
	}
	return cfg
}

// SidecarInbox returns the consumer of member's sidecar mail, created if
// it is not there (see AddRecipient).
func (mb *Mailbox) SidecarInbox(ctx context.Context, member string) (jetstream.Consumer, error) {
	return mb.consumer(ctx, SidecarConsumer(member), member)
}

// AgentInbox returns the consumer of member's agent inbox, created if it
// is not there (see AddRecipient). A reader that acks through it records
// its acks with NoteAcked.
func (mb *Mailbox) AgentInbox(ctx context.Context, member string) (jetstream.Consumer, error) {
	return mb.consumer(ctx, InboxConsumer(member), member)
}

// consumer returns the consumer name of member, creating it from the
// member's recipient record when the server has none (never created, or
// removed idle). A member with neither is not a recipient.
func (mb *Mailbox) consumer(ctx context.Context, name, member string) (jetstream.Consumer, error) {
	cons, err := mb.JS().Consumer(ctx, mb.Stream(), name)
	if err == nil {
		return cons, nil
	}
	notMember := teambus.NotFoundf("team %s has no mailbox for %s: is %s a member?", mb.Team(), member, member)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, notMember
	}
	if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, teambus.Unavailablef("open inbox of %s: %w", member, err)
	}
	if bus.MemberConn(mb.JS().Conn()) {
		return nil, notMember // a member credential can not create consumers
	}
	rec, _, found, err := mb.readRecipient(ctx, member)
	if errors.Is(err, errNoRecords) {
		return nil, notMember // a bare mailbox made its recipients' consumers
	}
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, notMember
	}
	sidecar := name == SidecarConsumer(member)
	pos := rec.pos(sidecar)
	cons, err = mb.JS().CreateConsumer(ctx, mb.Stream(), mb.consumerConfig(member, sidecar, pos))
	if errors.Is(err, jetstream.ErrConsumerExists) {
		// Created meanwhile by another reader (from a record one ack
		// older or newer): use it.
		cons, err = mb.JS().Consumer(ctx, mb.Stream(), name)
	}
	if err != nil {
		return nil, teambus.Unavailablef("create inbox %s of team %s: %w", name, mb.Team(), err)
	}
	return cons, nil
}

// ackedMeta is the consumer metadata key that lists the sequences acked
// above a consumer's start when it was created again (position.Acked):
// every reader of the consumer sees it, with no extra round trip, and
// acks those away instead of returning them (Settled).
const ackedMeta = "teambus_acked"

// ackedBefore returns the sequences cons lists as acked before it was
// created.
func ackedBefore(cons jetstream.Consumer) map[uint64]bool {
	if cons == nil {
		return nil
	}
	v := cons.CachedInfo().Config.Metadata[ackedMeta]
	if v == "" {
		return nil
	}
	out := map[uint64]bool{}
	for _, f := range strings.Split(v, ",") {
		if n, err := strconv.ParseUint(f, 10, 64); err == nil {
			out[n] = true
		}
	}
	return out
}

// Settled reports whether jm, delivered by cons, was acked before cons
// was created (it is in the recipient record: see AddRecipient), and then
// acks it away: the reader skips it. A reader that consumes a recipient's
// consumer itself (a sidecar) asks it of every delivery.
func (mb *Mailbox) Settled(ctx context.Context, cons jetstream.Consumer, jm jetstream.Msg) bool {
	skip := ackedBefore(cons)
	if len(skip) == 0 {
		return false
	}
	md, err := jm.Metadata()
	if err != nil || !skip[md.Sequence.Stream] {
		return false
	}
	_ = jm.DoubleAck(ctx) // a failed ack brings it back to be acked away again
	return true
}

// fetch is fetchAll on a recipient's consumer: mail acked before the
// consumer was created is acked away, not returned. A pull nobody answers
// is retried on the consumer opened again: a consumer another reader is
// creating answers a moment after its create returned, and one removed
// idle since it was opened is made again.
func (mb *Mailbox) fetch(ctx context.Context, cons jetstream.Consumer, member string, max int, wait time.Duration) ([]jetstream.Msg, error) {
	for attempt := 1; ; attempt++ {
		msgs, err := mb.fetchAll(ctx, cons, max, wait)
		if errors.Is(err, nats.ErrNoResponders) && len(msgs) == 0 && attempt < 20 {
			select {
			case <-ctx.Done():
				return nil, err
			case <-time.After(time.Duration(attempt) * 10 * time.Millisecond):
			}
			c, cerr := mb.consumer(ctx, cons.CachedInfo().Name, member)
			if cerr != nil {
				return nil, cerr
			}
			cons = c
			continue
		}
		if len(ackedBefore(cons)) == 0 {
			return msgs, err
		}
		kept := msgs[:0]
		for _, jm := range msgs {
			if !mb.Settled(ctx, cons, jm) {
				kept = append(kept, jm)
			}
		}
		if len(kept) > 0 || len(msgs) == 0 || err != nil || ctx.Err() != nil {
			return kept, err
		}
		// All of them were acked before: read on.
	}
}

// NoteAcked records in member's recipient record that seqs of its inbox
// (or, with sidecar, its sidecar consumer cons) were acked, so that a
// consumer created again after cons is removed does not deliver them
// again. A consumer that the server never removes (one made before
// on-demand consumers) needs no record.
func (mb *Mailbox) NoteAcked(ctx context.Context, member string, sidecar bool, cons jetstream.Consumer, seqs ...uint64) error {
	if len(seqs) == 0 || cons == nil || cons.CachedInfo().Config.InactiveThreshold == 0 {
		return nil
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return teambus.Unavailablef("record acks of %s: %w", member, err)
	}
	for attempt := 0; attempt < 20; attempt++ {
		rec, seq, found, err := mb.readRecipient(ctx, member)
		if errors.Is(err, errNoRecords) {
			return nil // a bare mailbox: nothing to keep it in
		}
		if err != nil {
			return err
		}
		if !found {
			rec = mb.newRecipient(member, 0, 0)
		}
		pos := rec.pos(sidecar)
		pos.Floor = max(pos.Floor, info.AckFloor.Stream)
		all := append(append([]uint64(nil), pos.Acked...), seqs...)
		slices.Sort(all)
		all = slices.Compact(all)
		pos.Acked = pos.Acked[:0]
		for _, s := range all {
			if s > pos.Floor {
				pos.Acked = append(pos.Acked, s)
			}
		}
		err = mb.writeRecipient(ctx, &rec, seq)
		if errors.Is(err, teambus.ErrNotFound) {
			return nil // a bare mailbox (no team state): nothing to keep it in
		}
		if !errors.Is(err, errRecordMoved) {
			return err
		}
	}
	return teambus.Unavailablef("record acks of %s: the record keeps moving; try again", member)
}

// noteAcked is NoteAcked for a reader whose acks have succeeded: a record
// it fails to write costs at most a second delivery of those messages
// after the consumer is removed, so it is logged, not returned.
func (mb *Mailbox) noteAcked(ctx context.Context, member string, sidecar bool, cons jetstream.Consumer, seqs []uint64) {
	if err := mb.NoteAcked(ctx, member, sidecar, cons, seqs...); err != nil {
		slog.Warn("record acks", "team", mb.Team(), "member", member, "seqs", len(seqs), "err", err)
	}
}

// heldCursor returns the consumer that tracks which held mail of member
// was released (HeldConsumer). In a team it is made on demand like the
// recipient's others, starting after the released mail its record names,
// and removed when idle; a bare mailbox keeps it.
func (mb *Mailbox) heldCursor(ctx context.Context, st jetstream.Stream, member string) (jetstream.Consumer, error) {
	cfg := jetstream.ConsumerConfig{
		Durable:       HeldConsumer(member),
		Description:   "teambus held mail of " + member,
		FilterSubject: "tb." + mb.Team() + "." + kindHeld + "." + member + ".>",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxAckPending: jsbatch.Max,
		Replicas:      mb.cfg.Replicas,
	}
	records, err := mb.recipients(ctx)
	if err != nil {
		return nil, err
	}
	if !records {
		return st.CreateOrUpdateConsumer(ctx, cfg)
	}
	if cons, err := st.Consumer(ctx, cfg.Durable); err == nil {
		return cons, nil
	}
	rec, _, _, err := mb.readRecipient(ctx, member)
	if err != nil {
		return nil, err
	}
	cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, rec.Released+1
	cfg.InactiveThreshold = mb.cfg.ConsumerIdle
	cons, err := st.CreateConsumer(ctx, cfg)
	if errors.Is(err, jetstream.ErrConsumerExists) {
		cons, err = st.Consumer(ctx, cfg.Durable)
	}
	return cons, err
}

// noteReleased records that member's held mail up to the cursor's ack
// floor was released (last is the last one this release acked), so that
// the held cursor, once removed, is made again after it. A lost record
// releases that mail again, each with its idempotency key.
func (mb *Mailbox) noteReleased(ctx context.Context, member string, cons jetstream.Consumer, last uint64) {
	if last == 0 || cons.CachedInfo().Config.InactiveThreshold == 0 {
		return
	}
	// The ack floor, not the last acked: a concurrent release may still
	// hold earlier held mail.
	info, err := cons.Info(ctx)
	if err != nil {
		return
	}
	seq := info.AckFloor.Stream
	for attempt := 0; attempt < 20; attempt++ {
		rec, rev, found, err := mb.readRecipient(ctx, member)
		if err != nil {
			break
		}
		if !found {
			rec = mb.newRecipient(member, 0, 0)
		}
		if rec.Released >= seq {
			return
		}
		rec.Released = seq
		err = mb.writeRecipient(ctx, &rec, rev)
		if err == nil || errors.Is(err, teambus.ErrNotFound) {
			return
		}
		if !errors.Is(err, errRecordMoved) {
			slog.Warn("record released held mail", "team", mb.Team(), "member", member, "seq", seq, "err", err)
			return
		}
	}
}
