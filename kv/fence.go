package kv

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/internal/jsbatch"
)

// Fenced writes: the incarnation check and the write in one step.
//
// A member's write of a task record used to read the member record, check
// the caller's session against it, and then write the task with
// compare-and-set on the task's revision alone: a re-registration (Join,
// epoch+1) landing between the read and the write let the old
// incarnation's write land after the new one had registered.
//
// PutTaskFenced makes the check and the write one step on the server, in
// one of two ways:
//
//   - When the caller's snapshot is consistent at a stream sequence
//     (Snapshot.Seq: the bucket was read in one isolated multi_last read),
//     the task is published expecting both its own revision and that
//     sequence as the stream's last (Nats-Expected-Last-Sequence): nothing
//     in the team's state changed since the read the caller decided on,
//     the member record included. One message, the cost of a plain
//     compare-and-set; any other write to the team in between (another
//     task, an activity record) also makes the caller read and decide
//     again, which is the price of the single message.
//   - Otherwise (a bucket too large for one read) it is a JetStream atomic
//     batch of two messages, committed or refused whole by the server: the
//     task record expecting its revision, and the member's activity record
//     expecting the revision of the member record the caller was checked
//     against (Nats-Expected-Last-Subject-Sequence-Subject names the member
//     key). On an R1 file stream the server stages every batch in a file
//     store of its own, which costs several fsyncs: on the 2-core test
//     machine a claim went from 4.8 ms to 21.6 ms this way, against
//     ~5 ms with the single message.
//
// Either way, a change of the member record after the read (a new
// incarnation, a crash or shutdown mark) fails the write with a revision
// mismatch (ErrConflict): the caller re-reads, and the fence check refuses
// the old incarnation.
//
// The batch needs AllowAtomicPublish on the bucket's stream (nats-server
// 2.12+). New buckets get it at creation; an older bucket is upgraded on
// the first batch the server refuses for lack of it (Upgrade), when the
// connection may update streams.

// subject returns the subject of key in bucket.
func subject(bucket, key string) string { return "$KV." + bucket + "." + key }

// PutTaskFenced writes task t of team, read in snap, if its revision is
// still rev (0 creates it) and the record of member is still the one snap
// holds, in one atomic step. It fails with ErrConflict when either changed
// (or, with a consistent snap, when anything in the team's state changed).
func (s *Store) PutTaskFenced(ctx context.Context, snap *Snapshot, t *teambus.Task, rev uint64, member string) (uint64, error) {
	team := snap.Team.ID
	if snap.Seq > 0 {
		n, err := s.putAt(ctx, team, preTask+t.ID, t, rev, snap.Seq)
		if err == nil {
			s.boardAfter(ctx, team, t, n)
		}
		return n, err
	}
	memberRev := snap.MemberRev[member]
	if err := teambus.ValidateID("task", t.ID); err != nil {
		return 0, err
	}
	if err := teambus.ValidateMemberID(member); err != nil {
		return 0, err
	}
	if _, err := s.stateBucket(ctx, team); err != nil {
		return 0, err
	}
	task, err := json.Marshal(t)
	if err != nil {
		return 0, fmt.Errorf("encode task %s: %w", t.ID, err)
	}
	at, _ := json.Marshal(s.Now())
	bucket := StatePrefix + team
	msgs := []*nats.Msg{
		{Subject: subject(bucket, preTask+t.ID), Data: task, Header: nats.Header{
			jetstream.ExpectedLastSubjSeqHeader: []string{strconv.FormatUint(rev, 10)},
		}},
		{Subject: subject(bucket, preActivity+member), Data: at, Header: nats.Header{
			jetstream.ExpectedLastSubjSeqHeader:     []string{strconv.FormatUint(memberRev, 10)},
			jetstream.ExpectedLastSubjSeqSubjHeader: []string{subject(bucket, preMember+member)},
		}},
	}
	ack, err := jsbatch.Publish(ctx, s.js.Conn(), msgs)
	if jsbatch.Disabled(err) {
		if uerr := s.Upgrade(ctx, team); uerr != nil {
			return 0, teambus.Unavailablef("write task %s of team %s: its state bucket predates fenced writes and this connection can not upgrade it (%v): an operator command upgrades it (`teambus team show %s`)", t.ID, team, uerr, team)
		}
		ack, err = jsbatch.Publish(ctx, s.js.Conn(), msgs)
	}
	switch {
	case err == nil:
		// The task is the first of the two messages stored together.
		s.boardAfter(ctx, team, t, ack.Sequence-1)
		return ack.Sequence - 1, nil
	case isConflict(err):
		return 0, fmt.Errorf("write task %s fenced on member %s: %w", t.ID, member, ErrConflict)
	default:
		return 0, unavailable("write task "+t.ID, err)
	}
}

// Upgrade makes the team's state bucket accept fenced writes
// (AllowAtomicPublish on its stream). It is idempotent; it needs a
// connection that may update streams (the operator's).
func (s *Store) Upgrade(ctx context.Context, team string) error {
	if err := teambus.ValidateID("team", team); err != nil {
		return err
	}
	return jsbatch.AllowAtomic(ctx, s.js, "KV_"+StatePrefix+team)
}

// putAt writes key if its revision is still rev (0: absent) and the
// bucket's last sequence is still seq.
func (s *Store) putAt(ctx context.Context, team, key string, v any, rev, seq uint64) (uint64, error) {
	kv, b, err := s.encode(ctx, team, key, v)
	if err != nil {
		return 0, err
	}
	ack, err := s.js.Publish(ctx, subject(kv.Bucket(), key), b,
		jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithExpectLastSequence(seq))
	switch {
	case err == nil:
		return ack.Sequence, nil
	case isConflict(err):
		return 0, fmt.Errorf("write %s: team state changed since it was read: %w", key, ErrConflict)
	default:
		return 0, unavailable("write "+key, err)
	}
}
