package team

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/teamapi"
)

// SidecarAPI is the team service as the lead and teammate sidecars use it:
// domain values in and out, watches and the sidecar inbox as typed
// channels, so the sidecars import no nats package. It implements
// lead.Team and teammate.Team: the Service methods they call whose
// signatures already fit (Resume, Join, UpdateTeam, MarkCrashed, …) are
// the embedded Service's own; the methods below read records, adapt a
// result, or turn a watch or a consumer into a channel.
type SidecarAPI struct{ *Service }

// SidecarAPI returns the service's API for sidecars.
func (s *Service) SidecarAPI() *SidecarAPI { return &SidecarAPI{s} }

// Team reads the team record.
func (a *SidecarAPI) Team(ctx context.Context, team string) (*teambus.Team, error) {
	t, _, err := a.Service.store.Team(ctx, team)
	return t, err
}

// Member reads a member record.
func (a *SidecarAPI) Member(ctx context.Context, team, member string) (*teambus.Member, error) {
	m, _, err := a.Service.store.Member(ctx, team, member)
	return m, err
}

// State reads every record of the team.
func (a *SidecarAPI) State(ctx context.Context, team string) (*teambus.State, error) {
	snap, err := a.Service.store.Snapshot(ctx, team)
	if err != nil {
		return nil, err
	}
	return &snap.State, nil
}

// Notify is Service.Notify without the send result.
func (a *SidecarAPI) Notify(ctx context.Context, team, from string, epoch int64, to string, typ teambus.MessageType, id, body string, data any) error {
	_, err := a.Service.Notify(ctx, team, from, epoch, to, typ, id, body, data)
	return err
}

// HeldPending returns how many held messages of member wait for release.
func (a *SidecarAPI) HeldPending(ctx context.Context, team, member string) (uint64, error) {
	return a.Service.Mailbox(team).HeldPending(ctx, member)
}

// StartSession starts the event log session of a sidecar run and returns
// its end (EventSession.End).
func (a *SidecarAPI) StartSession(ctx context.Context, team, member string, epoch int64, data map[string]any) func(ctx context.Context, outcome string, err error) {
	return a.Service.StartSession(ctx, team, member, epoch, data).End
}

// AutoCheckpoint records an automatic checkpoint of the member's current
// task, listing files.
func (a *SidecarAPI) AutoCheckpoint(ctx context.Context, team, member, session string, files []string, lastAction string) error {
	_, err := a.Service.Checkpoint(ctx, teamapi.CheckpointRequest{Actor: Actor{Team: team, Member: member, Session: session}, Auto: true, Files: files, LastAction: lastAction})
	return err
}

// ReleaseTask gives the member's task back to the queue with its
// checkpoint.
func (a *SidecarAPI) ReleaseTask(ctx context.Context, team, member, session, task string) error {
	_, err := a.Service.Release(ctx, Actor{Team: team, Member: member, Session: session}, task)
	return err
}

// beatKey is the heartbeat key of member (teambus.Lead for the lead).
func beatKey(member string) string {
	if member == teambus.Lead {
		return kv.LeadKey
	}
	return kv.MemberKey(member)
}

// Beat publishes hb to the team service, without waiting: the service
// keeps the heartbeat key (teamapi.Beat). It fails only when the
// connection cannot send.
func (a *SidecarAPI) Beat(ctx context.Context, team string, hb *teambus.Heartbeat) error {
	return teamapi.PublishBeat(a.Service.store.JetStream().Conn(), team, false, teamapi.BeatOf(hb))
}

// EndBeat asks the team service to delete hb's heartbeat key, as a clean
// shutdown does; a newer incarnation's key is left alone. It waits until
// the bus has the request (the sidecar exits next).
func (a *SidecarAPI) EndBeat(ctx context.Context, team string, hb *teambus.Heartbeat) error {
	b := teamapi.BeatOf(hb)
	b.Stop = true
	nc := a.Service.store.JetStream().Conn()
	if err := teamapi.PublishBeat(nc, team, false, b); err != nil {
		return err
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		return teambus.Unavailablef("stop heartbeat of %s: %w", hb.Member, err)
	}
	return nil
}

// Fences reports the notices of member's control subject that a beat of
// its incarnation (session, epoch) was dropped as not current, each as a
// teambus.ErrFenced error. Notices to other incarnations of the member are
// not reported.
func (a *SidecarAPI) Fences(ctx context.Context, team, member, session string, epoch int64) (<-chan error, error) {
	ctl, err := teamapi.SubscribeControl(ctx, a.Service.store.JetStream().Conn(), team, member, false)
	if err != nil {
		return nil, err
	}
	return pump(ctx, ctl, func() error { return nil }, 1, func(c teamapi.Control) (error, bool) {
		if c.Type != teamapi.ControlFenced || c.Session != session || c.Epoch != epoch {
			return nil, false
		}
		return teambus.Fencedf("the team service dropped a beat of %s (epoch %d, session %q): %s", c.Member, c.Epoch, c.Session, c.Reason), true
	}), nil
}

// WatchBeats reports the team's heartbeat writes and expiries (deletes, a
// clean stop, are no events) until ctx ends; with updatesOnly it skips the
// heartbeats present when it starts. With only (one member, or the lead)
// it reports that member's alone, and the node sends no other: a
// teammate, which judges only the lead, is not sent every beat of its
// team (a team of n would cost n² deliveries a heartbeat).
func (a *SidecarAPI) WatchBeats(ctx context.Context, team string, updatesOnly bool, only ...string) (<-chan teambus.BeatEvent, error) {
	var opts []jetstream.WatchOpt
	if updatesOnly {
		opts = append(opts, jetstream.UpdatesOnly())
	}
	var (
		w   jetstream.KeyWatcher
		err error
	)
	switch len(only) {
	case 0:
		w, err = a.Service.store.WatchHeartbeats(ctx, team, opts...)
	case 1:
		w, err = a.Service.store.WatchHeartbeat(ctx, team, beatKey(only[0]), opts...)
	default:
		return nil, teambus.Invalidf("watch beats: one member or all, not %d", len(only))
	}
	if err != nil {
		return nil, err
	}
	return pump(ctx, w.Updates(), w.Stop, 64, func(e jetstream.KeyValueEntry) (teambus.BeatEvent, bool) {
		if e == nil {
			return teambus.BeatEvent{}, false
		}
		ev := teambus.BeatEvent{Member: teambus.Lead}
		if e.Key() != kv.LeadKey {
			id, ok := kv.MemberOfKey(e.Key())
			if !ok {
				return ev, false
			}
			ev.Member = id
		}
		switch e.Operation() {
		case jetstream.KeyValuePut:
			ev.Alive = true
			hb, ok := kv.DecodeHeartbeat(e)
			if !ok && ev.Member != teambus.Lead {
				return ev, false
			}
			ev.Epoch = hb.Epoch
		case jetstream.KeyValuePurge:
			// expired: silent for its timeout
		default:
			return ev, false // deleted: a clean shutdown
		}
		return ev, true
	}), nil
}

// WatchState reports the team record (re-read at each change) and the
// record of member, current values first, then changes, until ctx ends.
func (a *SidecarAPI) WatchState(ctx context.Context, team, member string) (<-chan teambus.StateChange, error) {
	w, err := a.Service.store.WatchTeamAndMember(ctx, team, member)
	if err != nil {
		return nil, err
	}
	self := kv.MemberKey(member)
	return pump(ctx, w.Updates(), w.Stop, 4, func(e jetstream.KeyValueEntry) (teambus.StateChange, bool) {
		if e == nil || e.Operation() != jetstream.KeyValuePut {
			return teambus.StateChange{}, false
		}
		switch e.Key() {
		case self:
			var m teambus.Member
			if json.Unmarshal(e.Value(), &m) != nil {
				return teambus.StateChange{}, false
			}
			return teambus.StateChange{Member: &m}, true
		case "team":
			t, _, err := a.Service.store.Team(ctx, team)
			if err != nil {
				return teambus.StateChange{}, false
			}
			return teambus.StateChange{Team: t}, true
		}
		return teambus.StateChange{}, false
	}), nil
}

// pump is the one goroutine between a watch and its sidecar: it passes the
// entries conv accepts, converted, to the returned channel (of capacity
// buf) until ctx ends or the watch closes, then stops the watch.
func pump[T, U any](ctx context.Context, in <-chan T, stop func() error, buf int, conv func(T) (U, bool)) <-chan U {
	out := make(chan U, buf)
	go func() {
		defer func() { _ = stop() }()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-in:
				if !ok {
					return
				}
				u, ok := conv(e)
				if !ok {
					continue
				}
				select {
				case out <- u:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

// ConsumeSidecar delivers member's sidecar mail (status checks, shutdown
// requests, and for the lead the replies to them) until ctx ends or stop
// is called. Each delivery is acked after it is handled; one not acked
// within ack-wait is delivered again. stop ends the consumer, then gives
// back (naks) the deliveries passed to it and every message fetched but
// not handled, so another incarnation gets them at once rather than after
// ack-wait; it is idempotent. The nak follows the end of the consumer: a
// message given back while this consumer still pulls could be delivered
// to it again and lost with it.
func (a *SidecarAPI) ConsumeSidecar(ctx context.Context, team, member string) (<-chan teambus.Delivery, func(back ...teambus.Delivery), error) {
	js := a.Service.store.JetStream()
	mb := a.Service.Mailbox(team)
	cons, err := mb.SidecarInbox(ctx, member)
	if err != nil {
		return nil, nil, fmt.Errorf("open sidecar inbox of %s: %w", member, err)
	}
	ch := make(chan teambus.Delivery, 16)
	cctx, cancel := context.WithCancel(ctx)
	var (
		mu   sync.Mutex
		late []teambus.Delivery
	)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if mb.Settled(cctx, cons, m) {
			return // acked before its consumer was removed and made again
		}
		d := delivery(m)
		d.Settle = settler{m: m, mb: mb, member: member, cons: cons}
		select {
		case ch <- d:
		case <-cctx.Done():
			mu.Lock()
			late = append(late, d)
			mu.Unlock()
		}
	})
	if err != nil {
		cancel()
		return nil, nil, teambus.Unavailablef("consume sidecar inbox of %s: %w", member, err)
	}
	var once sync.Once
	stop := func(back ...teambus.Delivery) {
		once.Do(func() {
			cancel()
			// Drain, not Stop: mail the client already received is passed
			// to the callback (which, cancelled, keeps it in late) instead
			// of dropped, where it would wait for ack-wait.
			cc.Drain()
			select {
			case <-cc.Closed():
			case <-time.After(5 * time.Second):
			}
			back = teambus.TakeBuffered(ch, back)
			mu.Lock()
			back = append(back, late...)
			mu.Unlock()
			for _, d := range back {
				_ = d.Nak(context.Background()) // a lost Nak only delays redelivery to the ack wait
			}
			_ = js.Conn().FlushTimeout(time.Second) // best effort: unflushed Naks are redelivered after the ack wait
		})
	}
	context.AfterFunc(ctx, func() { stop() })
	return ch, stop, nil
}

// delivery decodes a message of a sidecar inbox.
func delivery(m jetstream.Msg) teambus.Delivery {
	d := teambus.Delivery{Settle: settler{m: m}}
	md, err := m.Metadata()
	if err != nil {
		d.Err = err
		return d
	}
	d.Msg, d.Err = mailbox.DecodeMessage(m.Data(), md.Sequence.Stream, m.Subject())
	return d
}

// settler settles a sidecar delivery; with mb, an ack (or a term) is
// also recorded in the member's recipient record (mailbox.Mailbox.NoteAcked),
// so the sidecar consumer, removed when idle and created again, does not
// deliver it twice.
type settler struct {
	m      jetstream.Msg
	mb     *mailbox.Mailbox
	member string
	cons   jetstream.Consumer
}

func (s settler) Ack(ctx context.Context) error {
	if err := s.m.DoubleAck(ctx); err != nil {
		return err
	}
	s.note(ctx)
	return nil
}

func (s settler) Nak(context.Context) error { return s.m.Nak() }

func (s settler) Term(ctx context.Context) error {
	if err := s.m.Term(); err != nil {
		return err
	}
	s.note(ctx)
	return nil
}

func (s settler) note(ctx context.Context) {
	if s.mb == nil {
		return
	}
	md, err := s.m.Metadata()
	if err != nil {
		return
	}
	if err := s.mb.NoteAcked(ctx, s.member, true, s.cons, md.Sequence.Stream); err != nil {
		slog.Warn("record sidecar ack", "member", s.member, "seq", md.Sequence.Stream, "err", err)
	}
}
