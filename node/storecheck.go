package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/internal/atomicfile"
	"github.com/teambus/teambus/mailbox"
)

// MarksFile is the node's record of its high-water marks, in its
// directory: the last sequence of every stream teambus never deletes
// from, and the acknowledged position and configuration of their durable
// consumers. It is rewritten every second while the node runs and when
// it closes (then marked clean); the store check of the next start
// compares the store with it and reads only the messages after it.
const MarksFile = "bus.marks"

// QuarantineDir is where the store check moves the state of a durable
// consumer the server could not load, in the node directory.
const QuarantineDir = "quarantine"

// StoreDamage is what a store check found missing from one stream.
type StoreDamage struct {
	Stream string `json:"stream"`
	// Lost counts the messages the stream no longer serves although
	// teambus never deletes from it: deleted or unreadable records, or
	// sequences below the recorded high-water mark.
	Lost int `json:"lost"`
	// First and Last are the lowest and highest lost sequences.
	First uint64 `json:"first"`
	Last  uint64 `json:"last"`
	// Gone is set when the whole stream is gone.
	Gone bool `json:"gone,omitempty"`
	// Recreated names durable consumers the server dropped (their state
	// file was damaged) and the check created again from their last
	// acknowledged position: their unacknowledged mail is delivered again.
	Recreated []string `json:"recreated,omitempty"`
}

// String says what was lost, for logs and Health.
func (d StoreDamage) String() string {
	var parts []string
	switch {
	case d.Gone:
		parts = append(parts, fmt.Sprintf("stream %s is gone with its %d message(s): its store was damaged or deleted while the node was down", d.Stream, d.Last))
	case d.Lost > 0:
		parts = append(parts, fmt.Sprintf("stream %s lost %d message(s) between seq %d and %d: its store files were damaged (corrupted or truncated); the other messages are intact", d.Stream, d.Lost, d.First, d.Last))
	}
	if len(d.Recreated) > 0 {
		parts = append(parts, fmt.Sprintf("stream %s: durable consumer(s) %s lost with a damaged state file, recreated from the last acknowledged position (unacknowledged mail is delivered again)", d.Stream, strings.Join(d.Recreated, ", ")))
	}
	return strings.Join(parts, "; ")
}

func (d *StoreDamage) lose(from, to uint64) {
	if to < from {
		return
	}
	if d.Lost == 0 || from < d.First {
		d.First = from
	}
	if to > d.Last {
		d.Last = to
	}
	d.Lost += int(to - from + 1)
}

// neverDeletes reports whether teambus never removes messages from the
// stream: mailboxes and event logs keep everything (Discard New, no age
// or count limit), so every sequence from 1 to the last must be readable.
func neverDeletes(name string) bool {
	return strings.HasPrefix(name, mailbox.MailboxPrefix) || strings.HasPrefix(name, eventlog.EventsPrefix)
}

// CheckStore reads every message of the streams teambus never deletes from
// once, in sequence order, and reports the sequences they lost: a full
// verification (Scrub without a position file). The server recovers a
// damaged block by dropping what it cannot read, and a record whose
// checksum fails is skipped when read, without a word in either case;
// reading is how teambus notices. Messages stored after the check started
// are not looked at. The check of a start reads much less (checkSince).
func CheckStore(ctx context.Context, js jetstream.JetStream) ([]StoreDamage, error) {
	res, err := Scrub(ctx, js, ScrubConfig{})
	return res.Damage, err
}

func neverDeleteStreams(ctx context.Context, js jetstream.JetStream) ([]string, error) {
	var names []string
	lister := js.StreamNames(ctx)
	for name := range lister.Name() {
		if neverDeletes(name) {
			names = append(names, name)
		}
	}
	if err := lister.Err(); err != nil {
		return nil, fmt.Errorf("list streams: %w", err)
	}
	sort.Strings(names)
	return names, nil
}

// seqRange is an inclusive range of lost sequences.
type seqRange struct {
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
}

// stateLosses is what the stream's own state says it lost, without
// reading a message: sequences below its first one and the deleted ones
// (a stream teambus never deletes from has neither unless its store lost
// them). The server keeps this state in the stream's index; asking costs
// the same for 10 messages and 1M.
func stateLosses(ctx context.Context, st jetstream.Stream) (jetstream.StreamState, []seqRange, error) {
	info, err := st.Info(ctx, jetstream.WithDeletedDetails(true))
	if err != nil {
		return jetstream.StreamState{}, nil, err
	}
	s := info.State
	var lost []seqRange
	if s.LastSeq == 0 {
		return s, nil, nil
	}
	if s.Msgs == 0 {
		return s, []seqRange{{1, s.LastSeq}}, nil
	}
	if s.FirstSeq > 1 {
		lost = append(lost, seqRange{1, s.FirstSeq - 1})
	}
	for _, seq := range s.Deleted {
		lost = append(lost, seqRange{seq, seq})
	}
	return s, lost, nil
}

// readRange reads the messages from..to of a stream in order and returns
// the sequences it did not get. step, when set, is called now and then
// with the next sequence to read and the losses so far; it may save them.
func readRange(ctx context.Context, st jetstream.Stream, from, to uint64, step func(next uint64, lost []seqRange)) ([]seqRange, error) {
	var lost []seqRange
	if from > to {
		return nil, nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from})
	if err != nil {
		return nil, err
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, err
	}
	defer it.Stop()
	next := from
	for n := 0; next <= to && ctx.Err() == nil; n++ {
		if step != nil && n%1024 == 0 {
			step(next, lost)
		}
		m, err := it.Next(jetstream.NextMaxWait(2 * time.Second))
		if errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
			break // nothing more to read: the tail is gone
		}
		if err != nil {
			return lost, err
		}
		md, err := m.Metadata()
		if err != nil || md.Sequence.Stream > to || md.Sequence.Stream < next {
			if err == nil && md.Sequence.Stream > to {
				next = to + 1
			}
			continue
		}
		if md.Sequence.Stream > next {
			lost = append(lost, seqRange{next, md.Sequence.Stream - 1})
		}
		next = md.Sequence.Stream + 1
	}
	if err := ctx.Err(); err != nil {
		if step != nil {
			step(next, lost)
		}
		return lost, err
	}
	if next <= to {
		lost = append(lost, seqRange{next, to})
	}
	if step != nil {
		step(to+1, lost)
	}
	return lost, nil
}

// mergeLosses adds the ranges to d once each, overlaps merged.
func mergeLosses(d *StoreDamage, ranges []seqRange) {
	if len(ranges) == 0 {
		return
	}
	rs := append([]seqRange(nil), ranges...)
	sort.Slice(rs, func(i, j int) bool { return rs[i].From < rs[j].From })
	cur := rs[0]
	for _, r := range rs[1:] {
		if r.From <= cur.To+1 {
			if r.To > cur.To {
				cur.To = r.To
			}
			continue
		}
		d.lose(cur.From, cur.To)
		cur = r
	}
	d.lose(cur.From, cur.To)
}

// checkSince is the start-up check of one stream: its own state (deleted
// or missing sequences), and a read of the messages from the sequence
// from on, the ones written since the marks of the last run. It returns
// how many sequences it read.
func checkSince(ctx context.Context, js jetstream.JetStream, name string, from uint64) (StoreDamage, uint64, error) {
	d := StoreDamage{Stream: name}
	st, err := js.Stream(ctx, name)
	if err != nil {
		return d, 0, err
	}
	state, lost, err := stateLosses(ctx, st)
	if err != nil {
		return d, 0, err
	}
	if from == 0 {
		from = 1
	}
	var read uint64
	if from <= state.LastSeq {
		read = state.LastSeq - from + 1
		r, err := readRange(ctx, st, from, state.LastSeq, nil)
		if err != nil {
			return d, 0, err
		}
		lost = append(lost, r...)
	}
	mergeLosses(&d, lost)
	return d, read, nil
}

// storeMarks is the content of MarksFile.
type storeMarks struct {
	// Clean is set by the last write, when the node stopped: the marks
	// cover everything the store holds. Without it the node was killed
	// and the marks are the last periodic ones.
	Clean   bool                  `json:"clean,omitempty"`
	Streams map[string]streamMark `json:"streams"`
}

type streamMark struct {
	LastSeq   uint64                  `json:"last_seq"`
	Consumers map[string]consumerMark `json:"consumers,omitempty"`
}

type consumerMark struct {
	AckFloor uint64                   `json:"ack_floor"`
	Config   jetstream.ConsumerConfig `json:"config"`
}

func readMarks(dir string) (*storeMarks, error) {
	b, err := os.ReadFile(filepath.Join(dir, MarksFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m storeMarks
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("marks file %s is damaged: %w", filepath.Join(dir, MarksFile), err)
	}
	return &m, nil
}

// collectMarks reads the current high-water marks from the server.
func collectMarks(ctx context.Context, js jetstream.JetStream) (*storeMarks, error) {
	names, err := neverDeleteStreams(ctx, js)
	if err != nil {
		return nil, err
	}
	m := &storeMarks{Streams: map[string]streamMark{}}
	for _, name := range names {
		st, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		sm := streamMark{LastSeq: st.CachedInfo().State.LastSeq, Consumers: map[string]consumerMark{}}
		lister := st.ListConsumers(ctx)
		for ci := range lister.Info() {
			if ci.Config.Durable == "" {
				continue
			}
			sm.Consumers[ci.Name] = consumerMark{AckFloor: ci.AckFloor.Stream, Config: ci.Config}
		}
		if err := lister.Err(); err != nil {
			return nil, err
		}
		m.Streams[name] = sm
	}
	return m, nil
}

// compareMarks adds to the scan's damage what the marks of the last run
// show: streams that are gone, sequences below the last high-water mark,
// and durable consumers the server dropped, which it creates again from
// their last acknowledged position.
// A dropped consumer's damaged state directory is moved out of the store
// (into quarantine) first: the server refuses to create a consumer over it.
func compareMarks(ctx context.Context, js jetstream.JetStream, old, now *storeMarks, damage []StoreDamage, storeDir, quarantine string) ([]StoreDamage, error) {
	byStream := map[string]*StoreDamage{}
	for i := range damage {
		byStream[damage[i].Stream] = &damage[i]
	}
	get := func(name string) *StoreDamage {
		if d := byStream[name]; d != nil {
			return d
		}
		damage = append(damage, StoreDamage{Stream: name})
		// Appending may move the slice: index the pointers again.
		for i := range damage {
			byStream[damage[i].Stream] = &damage[i]
		}
		return byStream[name]
	}
	for name, om := range old.Streams {
		cur, ok := now.Streams[name]
		if !ok {
			if om.LastSeq > 0 {
				d := get(name)
				d.Gone, d.First, d.Last, d.Lost = true, 1, om.LastSeq, int(om.LastSeq)
			}
			continue
		}
		if cur.LastSeq < om.LastSeq {
			get(name).lose(cur.LastSeq+1, om.LastSeq)
		}
		for cname, cm := range om.Consumers {
			if _, ok := cur.Consumers[cname]; ok {
				continue
			}
			if cm.Config.InactiveThreshold > 0 && !consumerOnDisk(storeDir, name, cname) {
				// Made on demand and removed by the server when idle (a
				// mailbox recipient's, since the last marks): gone
				// without a trace is not damage, and its reader makes it
				// again from the recipient record. One whose state is on
				// disk but did not load was damaged: recreated below.
				continue
			}
			cfg := cm.Config
			cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
			cfg.OptStartSeq = cm.AckFloor + 1
			cfg.OptStartTime = nil
			if err := quarantineConsumer(storeDir, name, cname, quarantine); err != nil {
				return damage, err
			}
			if _, err := js.CreateConsumer(ctx, name, cfg); err != nil {
				return damage, fmt.Errorf("recreate consumer %s of %s: %w", cname, name, err)
			}
			d := get(name)
			d.Recreated = append(d.Recreated, cname)
			sort.Strings(d.Recreated)
		}
	}
	out := damage[:0]
	for _, d := range damage {
		if d.Lost > 0 || d.Gone || len(d.Recreated) > 0 {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Stream < out[j].Stream })
	return out, nil
}

// marksKeeper writes MarksFile when the marks change.
type marksKeeper struct {
	dir  string
	last *storeMarks
}

func (k *marksKeeper) update(ctx context.Context, js jetstream.JetStream, clean bool) error {
	m, err := collectMarks(ctx, js)
	if err != nil {
		return err
	}
	m.Clean = clean
	if k.last != nil && reflect.DeepEqual(k.last, m) {
		return nil
	}
	if err := atomicfile.WriteJSON(filepath.Join(k.dir, MarksFile), m, 0o600); err != nil {
		return err
	}
	k.last = m
	return nil
}

// consumerOnDisk reports whether the store holds a state directory of
// consumer of stream.
func consumerOnDisk(storeDir, stream, consumer string) bool {
	found, err := filepath.Glob(filepath.Join(storeDir, "*", "streams", stream, "obs", consumer))
	return err == nil && len(found) > 0
}

// quarantineConsumer moves the state directory of a consumer the server
// dropped out of the store, into dir, kept for inspection.
func quarantineConsumer(storeDir, stream, consumer, dir string) error {
	found, err := filepath.Glob(filepath.Join(storeDir, "*", "streams", stream, "obs", consumer))
	if err != nil || len(found) == 0 {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("quarantine consumer %s of %s: %w", consumer, stream, err)
	}
	for _, f := range found {
		to := filepath.Join(dir, fmt.Sprintf("%s.%s.%d", stream, consumer, time.Now().UnixNano()))
		if err := os.Rename(f, to); err != nil {
			return fmt.Errorf("quarantine consumer %s of %s: %w", consumer, stream, err)
		}
	}
	return nil
}
