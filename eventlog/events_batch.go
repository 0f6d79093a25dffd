package eventlog

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/internal/jsbatch"
)

// AppendBatch appends events of one session, in order, each numbered
// after the session's last event (their Seq is set), in atomic batches of
// at most jsbatch.Max: the first event of a batch expects the session's
// last event to be the one it was numbered after, so a batch is stored
// whole, after everything the session had, or not at all. A concurrent
// writer to the session makes the batch renumber and try again. It
// returns how many events are stored; batches before a failure stay.
//
// A bulk writer (`task add --from FILE`) logs thousands of events this way
// at the cost of a few: one round trip and one stored batch per
// jsbatch.Max events instead of two round trips and an fsync each.
func (ev *Events) AppendBatch(ctx context.Context, events []*Event) (int, error) {
	if len(events) == 0 {
		return 0, nil
	}
	sid := events[0].SID
	for _, e := range events {
		if e.V == 0 {
			e.V = Version
		}
		if e.TS.IsZero() {
			e.TS = time.Now()
		}
		e.TS = e.TS.UTC()
		e.Seq = 0
		if err := e.Validate(); err != nil {
			return 0, err
		}
		if e.SID != sid {
			return 0, teambus.Invalidf("append a batch of events: sessions %q and %q in one batch", sid, e.SID)
		}
	}
	stored, upgraded, races := 0, false, 0
	for stored < len(events) {
		batch := events[stored:min(stored+jsbatch.Max, len(events))]
		next, last, err := ev.nextSeq(ctx, sid)
		if errors.Is(err, errNoStream) && bus.StreamMissing(ctx, ev.JS(), ev.Stream()) {
			return stored, teambus.NotFoundf("team %s has no event log: create the team first", ev.Team())
		}
		if err != nil {
			return stored, ev.publishErr(err)
		}
		msgs := make([]*nats.Msg, len(batch))
		for i, e := range batch {
			e.Seq = next + int64(i)
			msgs[i] = &nats.Msg{Subject: EventSubject(ev.Team(), sid, e.Type), Data: e.AppendJSON(nil), Header: nats.Header{}}
			msgs[i].Header.Set(jetstream.MsgIDHeader, eventMsgID(sid, e.Seq))
		}
		msgs[0].Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, ev.sessionFilter(sid))
		msgs[0].Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(last, 10))
		_, err = jsbatch.Publish(ctx, ev.JS().Conn(), msgs)
		if jsbatch.Disabled(err) && !upgraded {
			upgraded = true
			if uerr := jsbatch.AllowAtomic(ctx, ev.JS(), ev.Stream()); uerr != nil {
				return stored, teambus.Unavailablef("append events to team %s: its event log predates batch writes and this connection can not upgrade it: %w", ev.Team(), uerr)
			}
			continue
		}
		if isWrongLastSeq(err) && races < 64 {
			races++
			// Another writer appended to the session: number again.
			select {
			case <-ctx.Done():
				return stored, teambus.Unavailablef("append events to team %s: %w", ev.Team(), ctx.Err())
			case <-time.After(time.Duration(races%8+1) * time.Millisecond):
			}
			continue
		}
		if err != nil {
			for _, e := range batch {
				e.Seq = AutoSeq
			}
			return stored, ev.publishErr(err)
		}
		stored += len(batch)
	}
	return stored, nil
}
