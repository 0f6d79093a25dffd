package eventlog

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/internal/jserr"
)

// EventsPrefix starts the name of every team's event stream.
const EventsPrefix = "TBE_"

// DefaultEventsBytes is the default size limit of a team's event stream:
// about 50,000 events of 300 bytes. Like the mailbox's, it is reserved
// against the node's store limit.
const DefaultEventsBytes int64 = 16 << 20

// kindEvent is the subject kind of the event stream:
//
//	tb.<team>.evt.<sid token>.<type token>
//
// Session ids and types are user text, so neither reaches a subject as
// written: the sid token is the first 96 bits of the sid's sha256 in hex,
// and the type token is the type with dots as dashes when it follows the
// event type rule (task.started → task-started), else X and a hash. The
// sid and type themselves travel in the payload.
const kindEvent = "evt"

// EventsConfig holds the limits of a team's event stream.
type EventsConfig struct {
	// MaxBytes caps the stream; a full stream refuses new events, it never
	// drops old ones. 0 means DefaultEventsBytes.
	MaxBytes int64
	// Duplicates is the window in which an event with the (sid, seq) of a
	// stored one is recognised and stored once. 0 means 10m. Import also
	// checks the stream itself, so importing a file again is idempotent
	// after the window too.
	Duplicates time.Duration
	// Replicas: 1 on a single node, 3 in a cluster.
	Replicas int
}

func (c *EventsConfig) defaults() {
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultEventsBytes
	}
	bus.StreamDefaults(&c.Duplicates, &c.Replicas)
}

// Events is one team's durable event log. Stream, Declare and Delete are
// those of its stream.
type Events struct {
	bus.TeamStream
	cfg EventsConfig
}

// NewEvents returns the event log of team. It does no I/O; the team id
// must be valid.
func NewEvents(js jetstream.JetStream, team string, cfg EventsConfig) *Events {
	cfg.defaults()
	return &Events{cfg: cfg, TeamStream: bus.NewTeamStream(js, team, EventsPrefix, "event log", jetstream.StreamConfig{
		Subjects:   []string{"tb." + team + "." + kindEvent + ".>"},
		MaxBytes:   cfg.MaxBytes,
		MaxMsgSize: int32(MaxSize + 4<<10),
		Replicas:   cfg.Replicas,
		Duplicates: cfg.Duplicates,
	})}
}

// Config returns the limits in effect.
func (ev *Events) Config() EventsConfig { return ev.cfg }

// SIDToken is the subject token of a session id.
func SIDToken(sid string) string {
	sum := sha256.Sum256([]byte(sid))
	return hex.EncodeToString(sum[:12])
}

// TypeToken is the subject token of an event type.
func TypeToken(typ string) string {
	if ValidType(typ) {
		return strings.ReplaceAll(typ, ".", "-")
	}
	sum := sha256.Sum256([]byte(typ))
	return "X" + hex.EncodeToString(sum[:12])
}

// EventSubject is the subject of an event of session sid and type typ in
// team's stream.
func EventSubject(team, sid, typ string) string {
	return "tb." + team + "." + kindEvent + "." + SIDToken(sid) + "." + TypeToken(typ)
}

// eventMsgID is the dedupe key of an event: its session and sequence.
// The sid is hashed: message ids are headers, and user text with a line
// break must not reach one.
func eventMsgID(sid string, seq int64) string {
	sum := sha256.Sum256([]byte(sid))
	return "ev/" + hex.EncodeToString(sum[:16]) + "/" + strconv.FormatInt(seq, 10)
}

func (ev *Events) sessionFilter(sid string) string {
	return "tb." + ev.Team() + "." + kindEvent + "." + SIDToken(sid) + ".*"
}

// Ensure creates the event stream if it does not exist, and leaves an
// existing one as it is. Teams created before teambus had event logs get
// theirs on first use.
func (ev *Events) Ensure(ctx context.Context) error {
	if err := teambus.ValidateID("team", ev.Team()); err != nil {
		return err
	}
	if _, err := ev.JS().Stream(ctx, ev.Stream()); err == nil {
		return nil
	}
	_, err := ev.JS().CreateStream(ctx, ev.StreamConfig())
	if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return teambus.Unavailablef("create event log of team %s: %w", ev.Team(), err)
	}
	return nil
}

// AppendResult is what an append stored.
type AppendResult struct {
	// StreamSeq is the event's position in the team's log.
	StreamSeq uint64 `json:"stream_seq"`
	SID       string `json:"sid"`
	Seq       int64  `json:"seq"`
	// Duplicate is true when an event with this sid and seq was stored
	// before (within the dedupe window): nothing new was stored.
	Duplicate bool `json:"duplicate"`
}

// errNoStream is a publish to a team without an event stream.
var errNoStream = errors.New("no event stream")

// Append stores e in the canonical encoding. A zero V is Version and
// a zero TS is now. When e.Seq is AutoSeq the session's next
// sequence number is assigned: one more than the last event of the
// session in the log, written with compare-and-set on that last event, so
// concurrent writers to one session each get their own number. e is
// updated with what was stored.
func (ev *Events) Append(ctx context.Context, e *Event) (AppendResult, error) {
	if e.V == 0 {
		e.V = Version
	}
	if e.TS.IsZero() {
		e.TS = time.Now()
	}
	e.TS = e.TS.UTC()
	if err := e.Validate(); err != nil {
		return AppendResult{}, err
	}
	auto := e.Seq == AutoSeq
	var skip int64
	for attempt := 0; ; attempt++ {
		res, err := ev.append(ctx, e, auto, skip)
		if err == nil && auto && res.Duplicate && attempt < 64 {
			// The next number after the session's last event was taken by
			// an event written out of order: try the one after it.
			skip++
			e.Seq = AutoSeq
			continue
		}
		if errors.Is(err, errNoStream) && attempt == 0 {
			if err := ev.Ensure(ctx); err != nil {
				return res, err
			}
			continue
		}
		if auto && isWrongLastSeq(err) && attempt < 64 {
			select {
			case <-ctx.Done():
				return res, teambus.Unavailablef("append event to team %s: %v", ev.Team(), ctx.Err())
			case <-time.After(time.Duration(attempt%8+1) * time.Millisecond):
			}
			continue
		}
		if err != nil {
			return res, ev.publishErr(err)
		}
		return res, nil
	}
}

func (ev *Events) append(ctx context.Context, e *Event, auto bool, skip int64) (AppendResult, error) {
	subject := EventSubject(ev.Team(), e.SID, e.Type)
	var opts []jetstream.PublishOpt
	if auto {
		next, last, err := ev.nextSeq(ctx, e.SID)
		if err != nil {
			return AppendResult{}, err
		}
		e.Seq = next + skip
		opts = append(opts, jetstream.WithExpectLastSequenceForSubject(last, ev.sessionFilter(e.SID)))
	}
	opts = append(opts, jetstream.WithMsgID(eventMsgID(e.SID, e.Seq)))
	ack, err := ev.JS().Publish(ctx, subject, e.AppendJSON(nil), opts...)
	if err != nil {
		if auto {
			e.Seq = AutoSeq
		}
		if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
			return AppendResult{}, errNoStream
		}
		return AppendResult{}, err
	}
	return AppendResult{StreamSeq: ack.Sequence, SID: e.SID, Seq: e.Seq, Duplicate: ack.Duplicate}, nil
}

// nextSeq returns the next sequence number of session sid and the stream
// sequence of its last event (0 when it has none). It reads the last
// event with a direct get (last by subject, a wildcard over the session's
// types); a stale answer from a replica only makes the compare-and-set of
// the publish fail and the append retry.
func (ev *Events) nextSeq(ctx context.Context, sid string) (int64, uint64, error) {
	req, _ := json.Marshal(map[string]string{"last_by_subj": ev.sessionFilter(sid)})
	rctx, cancel := requestContext(ctx)
	defer cancel()
	msg, err := ev.JS().Conn().RequestWithContext(rctx, "$JS.API.DIRECT.GET."+ev.Stream(), req)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return 0, 0, errNoStream
		}
		return 0, 0, err
	}
	if st := msg.Header.Get("Status"); st != "" {
		if st == "404" {
			return 0, 0, nil
		}
		return 0, 0, fmt.Errorf("read last event of session: status %s %s", st, msg.Header.Get("Description"))
	}
	seq, err := strconv.ParseUint(msg.Header.Get("Nats-Sequence"), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("read last event of session: no sequence in the answer")
	}
	last, err := Parse(msg.Data)
	if err != nil {
		return 0, 0, teambus.Unavailablef("last event of session %q (stream seq %d) is damaged: give --seq explicitly", sid, seq)
	}
	return last.Seq + 1, seq, nil
}

// requestContext gives a request a deadline when ctx has none.
func requestContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, 10*time.Second)
}

func isWrongLastSeq(err error) bool { return jserr.WrongLastSequence(err) }

func (ev *Events) publishErr(err error) error {
	if rerr := ev.Refusal(err, "event", "stored", "--events-max-bytes"); rerr != nil {
		return rerr
	}
	if errors.Is(err, errNoStream) || bus.NoResponse(err) || bus.Electing(err) {
		// Append ensured the stream before it got here: nobody answering
		// for it is an election, not a missing log.
		return bus.NoLeaderf("append event to team %s: the bus is electing a leader (no server answers for stream %s yet): nothing was stored", ev.Team(), ev.Stream())
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
		return teambus.Unavailablef("append event to team %s: timed out waiting for the bus to store it", ev.Team())
	}
	if errors.Is(err, teambus.ErrInvalid) || errors.Is(err, teambus.ErrUnavailable) {
		return err
	}
	return teambus.Unavailablef("append event to team %s: %w", ev.Team(), err)
}

// EventFilter selects events for replay. Empty fields match all.
type EventFilter struct {
	// Type, SID and Agent match exactly. Type and SID are filtered by the
	// server; Agent by reading the events.
	Type, SID, Agent string
	// SinceSeq and UntilSeq bound the stream sequence (inclusive).
	SinceSeq, UntilSeq uint64
	// SinceTime and UntilTime bound the events' ts (inclusive). Imported
	// logs keep their own times, so these filter, they do not stop a
	// replay early.
	SinceTime, UntilTime time.Time
	// Limit stops after this many events; 0 means no limit.
	Limit int
	// Follow waits for new events until the context is done.
	Follow bool
	// sids, when set, limits the replay to these sessions (on the server).
	sids []string
}

// Validate checks the filter.
func (f EventFilter) Validate() error {
	for _, v := range []struct{ name, s string }{{"--type", f.Type}, {"--sid", f.SID}, {"--agent", f.Agent}} {
		if len(v.s) > 256 {
			return teambus.Invalidf("invalid %s: %d bytes, at most 256", v.name, len(v.s))
		}
	}
	if f.Limit < 0 {
		return teambus.Invalidf("invalid --limit %d: must be 0 (no limit) or more", f.Limit)
	}
	if f.SinceSeq > 0 && f.UntilSeq > 0 && f.UntilSeq < f.SinceSeq {
		return teambus.Invalidf("invalid range: --until %d is before --since %d", f.UntilSeq, f.SinceSeq)
	}
	return nil
}

func (ev *Events) filterSubject(f EventFilter) string {
	sid, typ := "*", "*"
	if f.SID != "" {
		sid = SIDToken(f.SID)
	}
	if f.Type != "" {
		typ = TypeToken(f.Type)
	}
	return "tb." + ev.Team() + "." + kindEvent + "." + sid + "." + typ
}

// EventRecord is one stored event as replay delivers it.
type EventRecord struct {
	// StreamSeq is the position in the team's log.
	StreamSeq uint64
	// Stored is when the bus stored it.
	Stored time.Time
	// Raw is the line as stored; it is valid during the callback only.
	Raw []byte
	// Event is Raw decoded; its Data aliases Raw.
	Event Event
	// Err is set when Raw is not an event (written by something other
	// than teambus); Event is then zero.
	Err error
}

// Replay calls fn for every event that matches f, in log order, through
// an ordered consumer: memory stays constant however long the log is.
// Without Follow it stops at the last event stored when it started; with
// Follow it waits for new events until ctx is done. Records whose payload
// is not an event are delivered with Err set unless f filters on type or
// agent.
func (ev *Events) Replay(ctx context.Context, f EventFilter, fn func(*EventRecord) error) error {
	if err := f.Validate(); err != nil {
		return err
	}
	st, err := ev.JS().Stream(ctx, ev.Stream())
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if f.Follow {
			if err := ev.Ensure(ctx); err != nil {
				return err
			}
			st, err = ev.JS().Stream(ctx, ev.Stream())
		} else {
			return nil // no event was ever logged
		}
	}
	if err != nil {
		return teambus.Unavailablef("open event log of team %s: %w", ev.Team(), err)
	}
	last := st.CachedInfo().State.LastSeq
	if f.UntilSeq > 0 && f.UntilSeq < last && !f.Follow {
		last = f.UntilSeq
	}
	if !f.Follow && (last == 0 || f.SinceSeq > last) {
		return nil
	}
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	switch {
	case len(f.sids) > 0:
		for _, sid := range f.sids {
			cfg.FilterSubjects = append(cfg.FilterSubjects, ev.sessionFilter(sid))
		}
	case f.Type != "" || f.SID != "":
		cfg.FilterSubjects = []string{ev.filterSubject(f)}
	}
	if f.SinceSeq > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, f.SinceSeq
	}
	var (
		dec Decoder
		rec EventRecord
		n   int
	)
	return bus.ReadOrdered(ctx, st, cfg, last, f.Follow, "replay event log of team "+ev.Team(), func(jm jetstream.Msg, md *jetstream.MsgMetadata) (bool, error) {
		seq := md.Sequence.Stream
		if f.UntilSeq > 0 && seq > f.UntilSeq {
			return true, nil
		}
		rec = EventRecord{StreamSeq: seq, Stored: md.Timestamp, Raw: jm.Data()}
		rec.Err = dec.Decode(rec.Raw, &rec.Event)
		if !match(f, &rec) {
			return false, nil
		}
		if err := fn(&rec); err != nil {
			return true, err
		}
		n++
		return f.Limit > 0 && n >= f.Limit, nil
	})
}

func match(f EventFilter, rec *EventRecord) bool {
	if rec.Err != nil {
		return f.Type == "" && f.Agent == "" && f.SID == "" && f.SinceTime.IsZero() && f.UntilTime.IsZero()
	}
	e := &rec.Event
	switch {
	case f.Type != "" && e.Type != f.Type, f.SID != "" && e.SID != f.SID, f.Agent != "" && e.Agent != f.Agent:
		return false
	case !f.SinceTime.IsZero() && e.TS.Before(f.SinceTime), !f.UntilTime.IsZero() && e.TS.After(f.UntilTime):
		return false
	}
	return true
}

// Export writes the whole log as JSON Lines, each event exactly as it was
// stored, and returns the number of lines written.
func (ev *Events) Export(ctx context.Context, w io.Writer) (int64, error) {
	bw := bufio.NewWriterSize(w, 256<<10)
	var n int64
	err := ev.Replay(ctx, EventFilter{}, func(r *EventRecord) error {
		if _, err := bw.Write(r.Raw); err != nil {
			return err
		}
		n++
		return bw.WriteByte('\n')
	})
	if err != nil {
		return n, err
	}
	if err := bw.Flush(); err != nil {
		return n, fmt.Errorf("write events: %w", err)
	}
	return n, nil
}

// Analyze runs seed 004's analysis over the team's log. Stream sequences
// stand in for line numbers.
func (ev *Events) Analyze(ctx context.Context, opts AnalyzeOptions) (*Analysis, error) {
	var last uint64
	feed := func(a *Analyzer, until uint64) error {
		return ev.Replay(ctx, EventFilter{UntilSeq: until}, func(r *EventRecord) error {
			last = r.StreamSeq
			a.Line()
			if r.Err != nil {
				a.AddDamaged(Damaged{Line: int64(r.StreamSeq), Reason: r.Err.Error()})
				return nil
			}
			a.Add(int64(r.StreamSeq), &r.Event)
			return nil
		})
	}
	a := NewAnalyzer(opts)
	if err := feed(a, 0); err != nil {
		return nil, err
	}
	if b := a.SecondPass(); b != nil && last > 0 {
		if err := feed(b, last); err != nil {
			return nil, err
		}
		return b.Result()
	}
	return a.Result()
}

// ImportResult reports an import.
type ImportResult struct {
	// Lines read, blank lines among them, and events decoded.
	Lines  int64 `json:"lines"`
	Blank  int64 `json:"blank"`
	Events int64 `json:"events"`
	// Imported events were stored.
	Imported int64 `json:"imported"`
	// Duplicates were in the log already (an earlier import or append of
	// the same sid and seq): not stored again.
	Duplicates int64 `json:"duplicates"`
	// Superseded lines had a later line with the same sid and seq in the
	// file, which was imported instead (the later line wins).
	Superseded int64 `json:"superseded"`
	// Skipped lines are not events: junk, truncated, not envelopes, too
	// large. SkippedCount counts them all; Skipped lists the first 1000.
	Skipped      []Damaged `json:"skipped"`
	SkippedCount int64     `json:"skipped_count"`
}

func (r *ImportResult) skip(d Damaged) {
	r.SkippedCount++
	if len(r.Skipped) < 1000 {
		r.Skipped = append(r.Skipped, d)
	}
}

// importSession is what the first pass of an import learns about a
// session of the file.
type importSession struct {
	seqs SeqSet
	// last is the line of the last occurrence of every seq that occurs
	// more than once.
	last map[int64]int64
	// have are the seqs the log holds already.
	have SeqSet
}

// Import stores the events of a JSON Lines log in file order, each line
// exactly as written. It reads r twice. Damaged lines are skipped and
// reported; of lines with the same sid and seq the later one is imported;
// an event whose sid and seq the log holds already is not stored again,
// so importing the same file twice stores it once.
func (ev *Events) Import(ctx context.Context, r io.ReadSeeker) (ImportResult, error) {
	res := ImportResult{Skipped: []Damaged{}}
	sessions := map[string]*importSession{}
	er := NewReader(r)
	for er.Next() {
		e := er.Event()
		s := sessions[e.SID]
		if s == nil {
			s = &importSession{}
			sessions[e.SID] = s
		}
		if s.seqs.Add(e.Seq) {
			if s.last == nil {
				s.last = map[int64]int64{}
			}
			s.last[e.Seq] = er.Line()
		}
	}
	if err := er.Err(); err != nil {
		return res, fmt.Errorf("read events: %w", err)
	}
	if len(sessions) == 0 {
		return ev.importPass(ctx, r, sessions, res)
	}
	if err := ev.Ensure(ctx); err != nil {
		return res, err
	}
	// What the log holds already, for the sessions of the file: a few
	// sessions are filtered on the server, many read the whole log.
	f := EventFilter{}
	if len(sessions) <= 16 {
		for sid := range sessions {
			f.sids = append(f.sids, sid)
		}
	}
	err := ev.Replay(ctx, f, func(rec *EventRecord) error {
		if rec.Err == nil {
			if s := sessions[rec.Event.SID]; s != nil {
				s.have.Add(rec.Event.Seq)
			}
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return res, fmt.Errorf("rewind events file: %w", err)
	}
	return ev.importPass(ctx, r, sessions, res)
}

func (ev *Events) importPass(ctx context.Context, r io.Reader, sessions map[string]*importSession, res ImportResult) (ImportResult, error) {
	er := NewReader(r)
	er.OnDamaged = res.skip
	var pending []jetstream.PubAckFuture
	wait := func(f jetstream.PubAckFuture) error {
		select {
		case ack := <-f.Ok():
			if ack.Duplicate {
				res.Duplicates++
			} else {
				res.Imported++
			}
			return nil
		case err := <-f.Err():
			return ev.publishErr(err)
		case <-ctx.Done():
			return teambus.Unavailablef("import events to team %s: %v (%d imported so far)", ev.Team(), ctx.Err(), res.Imported)
		}
	}
	drain := func(keep int) error {
		for len(pending) > keep {
			if err := wait(pending[0]); err != nil {
				return err
			}
			pending = pending[1:]
		}
		return nil
	}
	for er.Next() {
		e := er.Event()
		res.Events++
		s := sessions[e.SID]
		if last, ok := s.last[e.Seq]; ok && last != er.Line() {
			res.Superseded++
			continue
		}
		if s.have.Has(e.Seq) {
			res.Duplicates++
			continue
		}
		if len(er.Raw()) > MaxSize {
			res.skip(Damaged{Line: er.Line(), Reason: fmt.Sprintf("event is %d bytes, at most %d", len(er.Raw()), MaxSize)})
			continue
		}
		payload := append([]byte(nil), er.Raw()...)
		f, err := ev.JS().PublishAsync(EventSubject(ev.Team(), e.SID, e.Type), payload, jetstream.WithMsgID(eventMsgID(e.SID, e.Seq)))
		if err != nil {
			_ = drain(0) // collect what is in flight; the publish error is the one to report
			return res, ev.publishErr(err)
		}
		pending = append(pending, f)
		if err := drain(200); err != nil {
			return res, err
		}
	}
	res.Lines, res.Blank = er.Lines, er.Blank
	if err := drain(0); err != nil {
		return res, err
	}
	if err := er.Err(); err != nil {
		return res, fmt.Errorf("read events: %w", err)
	}
	return res, nil
}
