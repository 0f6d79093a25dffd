package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/mailbox"
)

// keepAlive is how often an idle live stream gets a comment line, so
// proxies and browsers keep it open.
const keepAlive = 20 * time.Second

// writeTimeout bounds one write to a browser: a browser that stops reading
// is cut off instead of holding its handler.
const writeTimeout = 10 * time.Second

// client is one browser's live stream.
type client struct {
	ch   chan []byte
	gone chan struct{} // closed when the feed drops the client
}

// feed follows one team for every browser that shows it.
type feed struct {
	s      *Server
	team   string
	cancel context.CancelFunc
	dirty  chan struct{}

	mu      sync.Mutex
	clients map[*client]struct{}
	state   []byte // the last state frame
	viewKey []byte // its view without the time, to push only changes
	mail    *ring[[]byte]
	events  *ring[[]byte]
	dropped int
}

func frame(event string, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var buf bytes.Buffer
	buf.Grow(len(b) + len(event) + 16)
	buf.WriteString("event: ")
	buf.WriteString(event)
	buf.WriteString("\ndata: ")
	buf.Write(b)
	buf.WriteString("\n\n")
	return buf.Bytes()
}

// subscribe adds a browser to the team's feed, starting the feed if it is
// the first, and returns what the browser gets before live frames.
func (s *Server) subscribe(teamID string) (*feed, *client, [][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, nil, teambus.Unavailablef("ui server is closing")
	}
	f := s.feeds[teamID]
	if f == nil {
		ctx, cancel := context.WithCancel(s.ctx)
		f = &feed{s: s, team: teamID, cancel: cancel, dirty: make(chan struct{}, 1), clients: map[*client]struct{}{},
			mail: newRing[[]byte](s.cfg.MailBacklog), events: newRing[[]byte](s.cfg.EventBacklog)}
		s.feeds[teamID] = f
		f.markDirty()
		for _, run := range []func(context.Context){f.rebuildLoop, f.watchState, f.watchHeartbeats, f.followMail, f.followEvents} {
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				run(ctx)
			}()
		}
		s.log.Debug("ui feed started", "team", teamID)
	}
	c := &client{ch: make(chan []byte, s.cfg.ClientBuffer), gone: make(chan struct{})}
	f.mu.Lock()
	defer f.mu.Unlock()
	var backlog [][]byte
	if f.state != nil {
		backlog = append(backlog, f.state)
	}
	backlog = append(backlog, f.mail.items()...)
	backlog = append(backlog, f.events.items()...)
	f.clients[c] = struct{}{}
	return f, c, backlog, nil
}

// unsubscribe removes a browser; the last one out stops the feed, its
// watches and its consumers.
func (s *Server) unsubscribe(f *feed, c *client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f.mu.Lock()
	delete(f.clients, c)
	n := len(f.clients)
	f.mu.Unlock()
	if n == 0 && s.feeds[f.team] == f {
		delete(s.feeds, f.team)
		f.cancel()
		s.log.Debug("ui feed stopped", "team", f.team)
	}
}

// Feeds returns how many teams are followed and by how many browsers in
// all, for tests and logs.
func (s *Server) Feeds() (teams, browsers int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.feeds {
		f.mu.Lock()
		browsers += len(f.clients)
		f.mu.Unlock()
	}
	return len(s.feeds), browsers
}

// broadcast queues fr for every browser; a browser whose queue is full is
// dropped.
func (f *feed) broadcast(fr []byte) {
	for c := range f.clients {
		select {
		case c.ch <- fr:
		default:
			delete(f.clients, c)
			close(c.gone)
			f.dropped++
			f.s.log.Info("ui dropped slow browser", "team", f.team, "dropped", f.dropped)
		}
	}
}

func (f *feed) markDirty() {
	select {
	case f.dirty <- struct{}{}:
	default:
	}
}

// rebuildLoop rebuilds the view when a watch marked it dirty, at most once
// per RebuildEvery, and pushes it when it changed.
func (f *feed) rebuildLoop(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.dirty:
		}
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		v, err := f.s.cfg.Service.Show(rctx, f.team)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			f.s.log.Warn("ui rebuild team view", "team", f.team, "err", err)
			f.markDirty() // try again after the pause below
		} else if key, kerr := json.Marshal(v); kerr == nil {
			f.mu.Lock()
			if !bytes.Equal(key, f.viewKey) {
				if fr := frame("state", f.s.teamPage(v)); fr != nil {
					f.state, f.viewKey = fr, key
					f.broadcast(fr)
				}
			}
			f.mu.Unlock()
		}
		wait := f.s.cfg.RebuildEvery
		if err != nil {
			wait = time.Second
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// watch runs open's watcher, marking the view dirty on every change after
// the initial values, and opens it again after a failure.
func (f *feed) watch(ctx context.Context, what string, open func(context.Context) (jetstream.KeyWatcher, error)) {
	for attempt := 0; ; attempt++ {
		w, err := open(ctx)
		if err == nil {
			attempt = 0
			f.markDirty() // changes while no watch ran
			bus.EachUpdate(ctx, w, func(jetstream.KeyValueEntry) { f.markDirty() })
			_ = w.Stop() // a watcher's stop only unsubscribes
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			f.s.log.Debug("ui watch", "team", f.team, "what", what, "err", err)
		}
		if !sleep(ctx, backoff(attempt)) {
			return
		}
	}
}

func (f *feed) watchState(ctx context.Context) {
	f.watch(ctx, "state", func(ctx context.Context) (jetstream.KeyWatcher, error) {
		return f.s.cfg.Service.WatchState(ctx, f.team, jetstream.UpdatesOnly())
	})
}

func (f *feed) watchHeartbeats(ctx context.Context) {
	f.watch(ctx, "heartbeats", func(ctx context.Context) (jetstream.KeyWatcher, error) {
		return f.s.cfg.Service.WatchHeartbeats(ctx, f.team, jetstream.UpdatesOnly())
	})
}

// followMail follows the mailbox from the last MailBacklog messages on,
// through an ordered consumer.
func (f *feed) followMail(ctx context.Context) {
	var next uint64
	for attempt := 0; ; attempt++ {
		if next == 0 {
			seq, err := f.s.cfg.Service.MailTail(ctx, f.team, f.s.cfg.MailBacklog)
			if err == nil {
				next = seq
			}
		}
		if next > 0 {
			err := f.s.cfg.Service.ReplayMail(ctx, f.team, mailbox.ReplayFilter{SinceSeq: next, Follow: true}, func(m teambus.Message) error {
				attempt = 0
				next = m.Seq + 1
				fr := frame("mail", m)
				f.mu.Lock()
				f.mail.add(fr)
				f.broadcast(fr)
				f.mu.Unlock()
				return nil
			})
			if err != nil && ctx.Err() == nil {
				f.s.log.Debug("ui follow mail", "team", f.team, "err", err)
			}
		}
		if !sleep(ctx, backoff(attempt)) {
			return
		}
	}
}

// followEvents follows the event log from the last EventBacklog events on.
func (f *feed) followEvents(ctx context.Context) {
	ev := f.s.cfg.Service.Events(f.team)
	var next uint64
	for attempt := 0; ; attempt++ {
		if next == 0 {
			seq, err := f.s.cfg.Service.EventTail(ctx, f.team, f.s.cfg.EventBacklog)
			if err == nil {
				next = seq
			}
		}
		if next > 0 {
			err := ev.Replay(ctx, eventlog.EventFilter{SinceSeq: next, Follow: true}, func(rec *eventlog.EventRecord) error {
				attempt = 0
				next = rec.StreamSeq + 1
				fr := frame("event", eventItem(rec))
				f.mu.Lock()
				f.events.add(fr)
				f.broadcast(fr)
				f.mu.Unlock()
				return nil
			})
			if err != nil && ctx.Err() == nil {
				f.s.log.Debug("ui follow events", "team", f.team, "err", err)
			}
		}
		if !sleep(ctx, backoff(attempt)) {
			return
		}
	}
}

func backoff(attempt int) time.Duration {
	d := 250 * time.Millisecond << min(attempt, 5)
	return min(d, 5*time.Second)
}

// sleep waits d or until ctx is done; it reports whether to go on.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// handleLive streams the team as Server-Sent Events: a hello (the browser
// starts over), the current view, the backlog of mail and events, then
// every change.
func (s *Server) handleLive(w http.ResponseWriter, r *http.Request) {
	id, ok := teamParam(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	_, err := s.cfg.Service.Team(ctx, id)
	cancel()
	if err != nil {
		httpError(w, err)
		return
	}
	f, c, backlog, err := s.subscribe(id)
	if err != nil {
		httpError(w, err)
		return
	}
	defer s.unsubscribe(f, c)
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write := func(frames ...[]byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout)) // a failed deadline shows up as a failed write below
		for _, fr := range frames {
			if _, err := w.Write(fr); err != nil {
				return false
			}
		}
		return rc.Flush() == nil
	}
	if !write(append([][]byte{[]byte("retry: 1000\n\n"), frame("hello", map[string]string{"team": id})}, backlog...)...) {
		return
	}
	ping := time.NewTicker(keepAlive)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		case <-c.gone:
			return
		case <-ping.C:
			if !write([]byte(": ping\n\n")) {
				return
			}
		case fr := <-c.ch:
			frames := [][]byte{fr}
		more:
			for len(frames) < 64 {
				select {
				case fr := <-c.ch:
					frames = append(frames, fr)
				default:
					break more
				}
			}
			if !write(frames...) {
				return
			}
		}
	}
}
