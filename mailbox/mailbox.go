package mailbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
)

// MailboxPrefix starts the name of every team's mailbox stream.
const MailboxPrefix = "TBM_"

// Subject layout of a team's mailbox stream. Every token is a validated id
// or a fixed word; user text only travels in payloads and headers.
//
//	tb.<team>.mbx.<to>.<type>.<from>   mail for a member's agent (or lead, all)
//	tb.<team>.ctl.<to>.<type>.<from>   mail a member's sidecar answers (status_check, shutdown_request)
//	tb.<team>.held.<from>.<to>.<type>  mail a zombie member sent, held until a lead re-attaches
//	tb.<team>.inc.<member>              incarnation markers: one per registration (MarkIncarnation)
const (
	kindMail = "mbx"
	kindCtl  = "ctl"
	kindHeld = "held"
	kindInc  = "inc"
)

// DefaultMailboxBytes is the default size limit of a team's mailbox:
// about 25,000 messages of 1 KiB. Stream limits are reserved against the
// node's store limit, so this bounds how many teams a node holds: with the
// other defaults a team reserves 62 MiB (mailbox 32 + events 16 + state 12
// + heartbeats 2), and the default 64 GiB store holds 1,057 teams.
const DefaultMailboxBytes int64 = 32 << 20

// MailboxConfig holds the limits of a team's mailbox stream.
type MailboxConfig struct {
	// MaxBytes caps the stream; a full stream refuses new mail, it never
	// drops old mail. 0 means DefaultMailboxBytes.
	MaxBytes int64
	// MaxBody caps a message body. 0 means teambus.DefaultMaxBody.
	MaxBody int
	// Duplicates is the dedupe window of message ids. 0 means 10m.
	Duplicates time.Duration
	// Replicas: 1 on a single node, 3 in a cluster.
	Replicas int
	// ConsumerIdle is how long a recipient's consumer lives unused before
	// the server removes it (see AddRecipient). 0 means
	// DefaultConsumerIdle.
	ConsumerIdle time.Duration
}

func (c *MailboxConfig) defaults() {
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMailboxBytes
	}
	if c.MaxBody <= 0 {
		c.MaxBody = teambus.DefaultMaxBody
	}
	bus.StreamDefaults(&c.Duplicates, &c.Replicas)
	if c.ConsumerIdle <= 0 {
		c.ConsumerIdle = DefaultConsumerIdle
	}
}

// Mailbox is one team's durable mailbox. Stream, Declare and Delete are
// those of its stream.
type Mailbox struct {
	bus.TeamStream
	cfg MailboxConfig
}

// NewMailbox returns the mailbox of team. It does no I/O; the team id must
// be valid.
func NewMailbox(js jetstream.JetStream, team string, cfg MailboxConfig) *Mailbox {
	cfg.defaults()
	p := "tb." + team + "."
	return &Mailbox{cfg: cfg, TeamStream: bus.NewTeamStream(js, team, MailboxPrefix, "mailbox", jetstream.StreamConfig{
		Subjects:   []string{p + kindMail + ".>", p + kindCtl + ".>", p + kindHeld + ".>", p + kindInc + ".*"},
		MaxBytes:   cfg.MaxBytes,
		MaxMsgSize: int32(cfg.MaxBody + 64<<10),
		Replicas:   cfg.Replicas,
		Duplicates: cfg.Duplicates,
	})}
}

// Config returns the mailbox limits in effect.
func (mb *Mailbox) Config() MailboxConfig { return mb.cfg }

// InboxAckWait caps the ack wait of the agents' inbox consumers (the
// team's ack-wait applies when it is shorter). Inbox reads
// by fetching and at once acking or returning (Nak) what it fetched, so the
// wait only matters when that return is lost: a reader killed mid-read, or
// a node restart (a Nak is not persisted). Mail read but not acked is then
// listed again after this long, not after the team's ack-wait.
const InboxAckWait = 10 * time.Second

// InboxConsumer names the durable consumer of a member's agent inbox.
func InboxConsumer(member string) string { return "in_" + member }

// SidecarConsumer names the durable consumer of a member's sidecar.
func SidecarConsumer(member string) string { return "sc_" + member }

// SendResult is what a send stored: the stream sequence, and whether it was
// a duplicate of an earlier send with the same id.
type SendResult = teambus.SendResult

// SidecarType reports whether mail of type t to a teammate goes to its
// sidecar rather than its agent.
func SidecarType(t teambus.MessageType) bool {
	for _, s := range teambus.SidecarTypes {
		if s == t {
			return true
		}
	}
	return false
}

// Send stores m. Its ID is the idempotency key, scoped by sender: the same
// sender and id within the dedupe window store one message. The caller has
// validated From and To against the team. held stores it for later release
// instead of delivering it.
func (mb *Mailbox) Send(ctx context.Context, m *teambus.Message, held bool) (SendResult, error) {
	if err := mb.check(m); err != nil {
		return SendResult{}, err
	}
	return mb.publish(ctx, m, held)
}

// encode stamps m's time when it has none and returns its deduplication
// id (scoped by sender; held mail apart) and its stored form, without Seq
// and Held: the stream position and the subject carry them.
func encode(m *teambus.Message, held bool) (msgID string, payload []byte, err error) {
	if m.TS.IsZero() {
		m.TS = time.Now().UTC()
	}
	msgID = m.From + "/" + m.ID
	if held {
		msgID = "held/" + msgID
	}
	stored := *m
	stored.Seq = 0
	stored.Held = false
	if payload, err = json.Marshal(&stored); err != nil {
		return "", nil, fmt.Errorf("encode message: %w", err)
	}
	return msgID, payload, nil
}

func (mb *Mailbox) check(m *teambus.Message) error {
	if err := teambus.ValidateID("sender", m.From); err != nil {
		return err
	}
	if err := teambus.ValidateID("recipient", m.To); err != nil {
		return err
	}
	if _, err := teambus.ParseMessageType(string(m.Type)); err != nil {
		return err
	}
	if err := teambus.ValidateMessageID(m.ID); err != nil {
		return err
	}
	if len(m.Body) > mb.cfg.MaxBody {
		return teambus.Invalidf("message body is %d bytes, at most %d: put large content in a file and send its path", len(m.Body), mb.cfg.MaxBody)
	}
	return teambus.ValidateData(m.Data)
}

func (mb *Mailbox) subject(m *teambus.Message, held bool) string {
	p := "tb." + mb.Team() + "."
	switch {
	case held:
		return p + kindHeld + "." + m.From + "." + m.To + "." + string(m.Type)
	case m.To != teambus.Lead && m.To != teambus.All && SidecarType(m.Type):
		return p + kindCtl + "." + m.To + "." + string(m.Type) + "." + m.From
	default:
		return p + kindMail + "." + m.To + "." + string(m.Type) + "." + m.From
	}
}

// publish stores m under its subject and deduplication id; the caller
// checked it.
func (mb *Mailbox) publish(ctx context.Context, m *teambus.Message, held bool) (SendResult, error) {
	msgID, b, err := encode(m, held)
	if err != nil {
		return SendResult{}, err
	}
	ack, err := mb.publishMsg(ctx, mb.subject(m, held), b, jetstream.WithMsgID(msgID))
	if err != nil {
		return SendResult{}, mb.publishErr(err)
	}
	return SendResult{Seq: ack.Sequence, ID: m.ID, Duplicate: ack.Duplicate, Held: held}, nil
}

// publishMsg publishes to the mailbox stream, waiting for a leader while
// one is being elected (WhileElecting): a publish nobody answered is
// retried with the same message id, so it is stored once.
func (mb *Mailbox) publishMsg(ctx context.Context, subject string, b []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	ack, err := mb.JS().Publish(ctx, subject, b, opts...)
	if err == nil || (!bus.NoResponse(err) && !bus.Electing(err)) {
		return ack, err
	}
	return bus.WhileElecting(ctx, mb.JS(), mb.Stream(), "send to team "+mb.Team(), err, func(ctx context.Context) (*jetstream.PubAck, error) {
		return mb.JS().Publish(ctx, subject, b, opts...)
	})
}

func (mb *Mailbox) publishErr(err error) error {
	if rerr := mb.Refusal(err, "message", "sent", "--mailbox-max-bytes"); rerr != nil {
		return rerr
	}
	if errors.Is(err, bus.ErrNoLeader) {
		return err
	}
	if errors.Is(err, nats.ErrMaxPayload) {
		return teambus.Invalidf("message too large for the bus of team %s: nothing was sent; put large content in a file and send its path", mb.Team())
	}
	if errors.Is(err, bus.ErrStreamMissing) {
		return teambus.NotFoundf("team %s has no mailbox: create the team first", mb.Team())
	}
	if bus.NoResponse(err) {
		// Not confirmed missing: a leader may be on its way.
		return bus.NoLeaderf("send to team %s: no server answers for its mailbox: nothing was stored", mb.Team())
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
		if why, noSpace := bus.StorageTrouble(mb.JS().Conn()); noSpace {
			return bus.NoSpace(mb.Team(), "message", "acknowledged (send it again with the same message id once the operator fixed it)", why)
		} else if why != "" {
			return teambus.Unavailablef("send to team %s: the bus did not store it and reports: %s: nothing was acknowledged; fix that (a full disk: free space on the bus node and restart it), then send it again with the same message id", mb.Team(), why)
		}
		return teambus.Unavailablef("send to team %s: timed out waiting for the bus to store it: it may be stored; send it again with the same message id to store it once", mb.Team())
	}
	return teambus.Unavailablef("send to team %s: %w: send it again with the same message id to store it once", mb.Team(), err)
}

// DecodeMessage builds a message from a stored JetStream message's data,
// stream sequence and subject.
func DecodeMessage(data []byte, seq uint64, subject string) (teambus.Message, error) {
	return decode(data, seq, subject)
}

// decode builds a message from a stored JetStream message.
func decode(data []byte, seq uint64, subject string) (teambus.Message, error) {
	var m teambus.Message
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("decode message seq %d: %w", seq, err)
	}
	m.Seq = seq
	// tb.<team>.<kind>.…: match the kind token, not a team or member id
	// that happens to be "held".
	parts := strings.SplitN(subject, ".", 4)
	m.Held = len(parts) > 2 && parts[2] == kindHeld
	// The sender is the subject's token, which a member credential can
	// only set to itself (MemberPermissions), not the payload's claim.
	if from := subjectSender(subject); from != "" {
		m.From = from
	}
	return m, nil
}

// subjectSender returns the sender token of a mailbox subject:
// tb.<team>.mbx|ctl.<to>.<type>.<from> or tb.<team>.held.<from>.<to>.<type>;
// empty for any other subject.
func subjectSender(subject string) string {
	t := strings.Split(subject, ".")
	if len(t) != 6 || t[0] != "tb" {
		return ""
	}
	switch t[2] {
	case kindMail, kindCtl:
		return t[5]
	case kindHeld:
		return t[3]
	}
	return ""
}

// InboxOptions say how much of an inbox to read.
type InboxOptions struct {
	// Max is the most messages returned; 0 means 100.
	Max int
	// Wait blocks up to this long for mail when none is there.
	Wait time.Duration
	// Ack acknowledges what is returned.
	Ack bool
	// Sidecar reads the member's sidecar consumer instead of its agent inbox.
	Sidecar bool
	// Self is the reader; broadcasts it sent itself are acked and skipped.
	Self string
	// MaxBytes, when set, bounds the JSON of the messages returned: a
	// message that would take the total past it is left in the inbox for
	// the next read (neither acked nor held). The first message is always
	// returned.
	MaxBytes int
}

// pageBudget keeps the running size of a read bounded by max bytes.
type pageBudget struct {
	max, used int
	full      bool
}

// take reports whether m, of extra bytes beside its JSON, still fits; once
// one does not, no later one does (the read stays in sequence order).
func (p *pageBudget) take(m teambus.Message, extra int) bool {
	if p.max <= 0 {
		return true
	}
	if p.full {
		return false
	}
	b, err := json.Marshal(m)
	n := len(b) + extra + 1
	if err != nil {
		n = len(m.Body) + len(m.Data) + extra + 1
	}
	if p.used > 0 && p.used+n > p.max {
		p.full = true
		return false
	}
	p.used += n
	return true
}

// bySeq sorts fetched messages by stream sequence, so a read cut by a
// byte budget returns the oldest.
func bySeq(msgs []jetstream.Msg) {
	seq := func(jm jetstream.Msg) uint64 {
		if md, err := jm.Metadata(); err == nil {
			return md.Sequence.Stream
		}
		return 0
	}
	sort.SliceStable(msgs, func(i, j int) bool { return seq(msgs[i]) < seq(msgs[j]) })
}

// Inbox returns the member's unacknowledged mail, oldest first. Reading is
// not acking: unless opts.Ack, every message comes back on the next call
// until it is acked.
func (mb *Mailbox) Inbox(ctx context.Context, member string, opts InboxOptions) ([]teambus.Message, error) {
	if opts.Max <= 0 {
		opts.Max = 100
	}
	name := InboxConsumer(member)
	if opts.Sidecar {
		name = SidecarConsumer(member)
	}
	cons, err := mb.consumer(ctx, name, member)
	if err != nil {
		return nil, err
	}
	msgs, err := mb.fetch(ctx, cons, member, opts.Max, opts.Wait)
	if err != nil {
		return nil, teambus.Unavailablef("read inbox of %s: %w", member, err)
	}
	var (
		out   []teambus.Message
		acked []uint64
		page  = pageBudget{max: opts.MaxBytes}
	)
	bySeq(msgs)
	for _, jm := range msgs {
		md, err := jm.Metadata()
		if err != nil {
			_ = jm.Nak() // a lost Nak only delays redelivery to the ack wait
			continue
		}
		m, err := decode(jm.Data(), md.Sequence.Stream, jm.Subject())
		if err != nil {
			// Undecodable mail can never be processed: ack it away, it stays in
			// the stream for replay. A failed ack brings it back to be acked
			// away again.
			if jm.DoubleAck(ctx) == nil {
				acked = append(acked, md.Sequence.Stream)
			}
			continue
		}
		if m.To == teambus.All && m.From == opts.Self {
			if jm.DoubleAck(ctx) == nil { // as above: a repeat is acked away again
				acked = append(acked, m.Seq)
			}
			continue
		}
		if !page.take(m, 0) {
			// Past the read's byte budget: back to the inbox, for the next read.
			if err := jm.Nak(); err != nil {
				mb.noteAcked(ctx, member, opts.Sidecar, cons, acked)
				return nil, teambus.Unavailablef("release seq %d: %w", m.Seq, err)
			}
			continue
		}
		if opts.Ack {
			if err := jm.DoubleAck(ctx); err != nil {
				mb.noteAcked(ctx, member, opts.Sidecar, cons, acked)
				return nil, teambus.Unavailablef("ack seq %d: %w", m.Seq, err)
			}
			acked = append(acked, m.Seq)
		} else if err := jm.Nak(); err != nil {
			mb.noteAcked(ctx, member, opts.Sidecar, cons, acked)
			return nil, teambus.Unavailablef("release seq %d: %w", m.Seq, err)
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	if err := mb.flush(ctx); err != nil {
		return nil, teambus.Unavailablef("flush: %w", err)
	}
	mb.noteAcked(ctx, member, opts.Sidecar, cons, acked)
	return out, nil
}

// fetchAll pulls up to max messages that are available now, waiting up to
// wait for the first one when there are none.
func (mb *Mailbox) fetchAll(ctx context.Context, cons jetstream.Consumer, max int, wait time.Duration) ([]jetstream.Msg, error) {
	var out []jetstream.Msg
	collect := func(b jetstream.MessageBatch) error {
		for m := range b.Messages() {
			out = append(out, m)
		}
		return b.Error()
	}
	if err := collect(mustBatch(cons.FetchNoWait(max))); err != nil && !benign(err) {
		return out, err
	}
	// A member credential (its own inbox prefix) may not read the stream
	// directly: it waits briefly instead of asking.
	restricted := mb.JS().Conn().Opts.InboxPrefix != ""
	if len(out) == 0 && (restricted || undelivered(ctx, mb.JS().Conn(), cons)) {
		settle := 2 * time.Second
		if restricted {
			settle = 200 * time.Millisecond
		}
		fctx, cancel := context.WithTimeout(ctx, settle)
		b, err := cons.Fetch(1, jetstream.FetchContext(fctx))
		if err == nil {
			err = collect(b)
		}
		cancel()
		if err != nil && !benign(err) {
			return out, err
		}
		if len(out) > 0 && max > 1 {
			if err := collect(mustBatch(cons.FetchNoWait(max - 1))); err != nil && !benign(err) {
				return out, err
			}
		}
	}
	if len(out) == 0 && wait > 0 {
		deadline := time.Now().Add(wait)
		for len(out) == 0 && time.Now().Before(deadline) && ctx.Err() == nil {
			step := min(time.Until(deadline), 5*time.Second)
			if step < time.Millisecond {
				break
			}
			// FetchContext and FetchMaxWait exclude each other: the step's
			// deadline is the fetch's max wait.
			fctx, cancel := context.WithTimeout(ctx, step)
			b, err := cons.Fetch(1, jetstream.FetchContext(fctx))
			if err != nil && !benign(err) {
				cancel()
				return out, err
			}
			if b != nil {
				if err := collect(b); err != nil && !benign(err) {
					cancel()
					return out, err
				}
			}
			cancel()
		}
		if len(out) > 0 && max > 1 {
			if err := collect(mustBatch(cons.FetchNoWait(max - 1))); err != nil && !benign(err) {
				return out, err
			}
		}
	}
	return out, nil
}

// undelivered reports whether the stream holds a message for the consumer
// beyond what it has delivered. A consumer learns of a stored message a
// moment after the publisher's ack (its own pending count lags too), so a
// no-wait pull right after a send can come back empty; the stream's last
// message on the consumer's filters is the authority. When the stream can
// not be asked (a member credential may not read it directly), it says
// true, and the caller waits briefly.
func undelivered(ctx context.Context, nc *nats.Conn, cons jetstream.Consumer) bool {
	info, err := cons.Info(ctx)
	if err != nil {
		return false
	}
	filters := info.Config.FilterSubjects
	if info.Config.FilterSubject != "" {
		filters = append(filters, info.Config.FilterSubject)
	}
	for _, f := range filters {
		req := fmt.Appendf(nil, `{"last_by_subj":%q}`, f)
		msg, err := nc.Request("$JS.API.DIRECT.GET."+info.Stream, req, 2*time.Second)
		if err != nil {
			return true
		}
		if msg.Header.Get("Status") != "" {
			continue // 404: nothing on this filter
		}
		seq, err := strconv.ParseUint(msg.Header.Get(jetstream.SequenceHeader), 10, 64)
		if err != nil {
			return true
		}
		if seq > info.Delivered.Stream {
			return true
		}
	}
	return false
}

type emptyBatch struct{ err error }

func (e emptyBatch) Messages() <-chan jetstream.Msg {
	ch := make(chan jetstream.Msg)
	close(ch)
	return ch
}
func (e emptyBatch) Error() error { return e.err }

func mustBatch(b jetstream.MessageBatch, err error) jetstream.MessageBatch {
	if err != nil {
		return emptyBatch{err}
	}
	return b
}

func benign(err error) bool {
	return errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, context.Canceled)
}

// AckResult reports an ack by sequence.
type AckResult = teambus.AckResult

// Ack acknowledges the member's mail by stream sequence. Acking is final and
// idempotent: a message acked before is reported in Already. A sequence that
// is not the member's mail is refused and nothing is acked.
func (mb *Mailbox) Ack(ctx context.Context, member string, seqs []uint64) (AckResult, error) {
	res := AckResult{Acked: []uint64{}, Already: []uint64{}}
	want := map[uint64]bool{}
	for _, s := range seqs {
		if s == 0 {
			return res, teambus.Invalidf("invalid sequence 0: sequences start at 1")
		}
		want[s] = true
	}
	cons, err := mb.consumer(ctx, InboxConsumer(member), member)
	if err != nil {
		return res, err
	}
	msgs, err := mb.fetch(ctx, cons, member, 10000, 0)
	if err != nil {
		return res, teambus.Unavailablef("read inbox of %s: %w", member, err)
	}
	release := func() {
		for _, jm := range msgs {
			_ = jm.Nak() // a lost Nak only delays redelivery to the ack wait
		}
	}
	pending := map[uint64]jetstream.Msg{}
	for _, jm := range msgs {
		if md, err := jm.Metadata(); err == nil && want[md.Sequence.Stream] {
			pending[md.Sequence.Stream] = jm
		}
	}
	// A sequence not pending in the inbox was acknowledged before, or is
	// not the member's mail at all. A member credential may not look mail
	// up by sequence (it would read the whole team's mailbox): it reports
	// both as acknowledged before.
	restricted := bus.MemberConn(mb.JS().Conn())
	for s := range want {
		if pending[s] != nil || restricted {
			continue
		}
		if err := mb.lookup(ctx, member, s); err != nil {
			release()
			return res, err
		}
	}
	for _, jm := range msgs {
		md, err := jm.Metadata()
		if err == nil && pending[md.Sequence.Stream] == jm {
			if err := jm.DoubleAck(ctx); err != nil {
				mb.noteAcked(ctx, member, false, cons, res.Acked)
				return res, teambus.Unavailablef("ack seq %d: %w", md.Sequence.Stream, err)
			}
			res.Acked = append(res.Acked, md.Sequence.Stream)
			delete(want, md.Sequence.Stream)
			continue
		}
		_ = jm.Nak() // not asked for: give it back; a lost Nak only delays it to the ack wait
	}
	mb.noteAcked(ctx, member, false, cons, res.Acked)
	for s := range want {
		res.Already = append(res.Already, s)
	}
	sort.Slice(res.Acked, func(i, j int) bool { return res.Acked[i] < res.Acked[j] })
	sort.Slice(res.Already, func(i, j int) bool { return res.Already[i] < res.Already[j] })
	if err := mb.flush(ctx); err != nil {
		return res, teambus.Unavailablef("flush: %w", err)
	}
	return res, nil
}

// lookup checks that seq is mail of member, by reading it from the stream.
func (mb *Mailbox) lookup(ctx context.Context, member string, seq uint64) error {
	msg, err := mb.JS().Conn().Request("$JS.API.STREAM.MSG.GET."+mb.Stream(), fmt.Appendf(nil, `{"seq":%d}`, seq), mb.timeout(ctx))
	if err != nil {
		return teambus.Unavailablef("look up seq %d: %w", seq, err)
	}
	var r struct {
		Message *struct {
			Subject string `json:"subject"`
		} `json:"message"`
	}
	if err := json.Unmarshal(msg.Data, &r); err != nil || r.Message == nil {
		return teambus.NotFoundf("team %s has no message with seq %d: nothing acked", mb.Team(), seq)
	}
	if !mb.forMember(r.Message.Subject, member) {
		return teambus.NotFoundf("message seq %d is not in the mailbox of %s: nothing acked", seq, member)
	}
	return nil
}

// flush waits until the server has the acks and naks sent so far; it works
// with or without a deadline on ctx.
func (mb *Mailbox) flush(ctx context.Context) error {
	return mb.JS().Conn().FlushTimeout(mb.timeout(ctx))
}

func (mb *Mailbox) timeout(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return time.Until(d)
	}
	return 5 * time.Second
}

func (mb *Mailbox) forMember(subject, member string) bool {
	p := "tb." + mb.Team() + "." + kindMail + "."
	return strings.HasPrefix(subject, p+member+".") || strings.HasPrefix(subject, p+teambus.All+".")
}

// Fenced mail: the sender's incarnation check and the send in one step.
//
// Every registration of a member (team.Service.Join) stores an incarnation
// marker on tb.<team>.inc.<member> in the mailbox stream, after the member
// record took the new epoch and before Join returns. A member's mail is
// published expecting the marker it last saw to be the latest one
// (Nats-Expected-Last-Subject-Sequence with -Subject on the marker
// subject): once a newer incarnation registered, the server refuses the
// old incarnation's send, whatever it read before. The sender learns the
// current marker from the member record (teambus.Member.Marker) or from
// the refusal (MarkerMovedError), and re-checks the member record before
// it uses it.

// MarkerSubject is the subject of member's incarnation markers.
func (mb *Mailbox) MarkerSubject(member string) string {
	return "tb." + mb.Team() + "." + kindInc + "." + member
}

// MarkIncarnation stores an incarnation marker of member at epoch and
// returns its sequence. A mailbox stream declared before markers existed
// is upgraded first (it needs a connection that may update streams).
func (mb *Mailbox) MarkIncarnation(ctx context.Context, member string, epoch int64) (uint64, error) {
	if err := teambus.ValidateID("member", member); err != nil {
		return 0, err
	}
	b, _ := json.Marshal(map[string]any{"member": member, "epoch": epoch, "at": time.Now().UTC()})
	ack, err := mb.JS().Publish(ctx, mb.MarkerSubject(member), b)
	if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
		if uerr := mb.Upgrade(ctx); uerr != nil {
			return 0, uerr
		}
		ack, err = mb.JS().Publish(ctx, mb.MarkerSubject(member), b)
	}
	if err != nil {
		return 0, fmt.Errorf("mark incarnation %d of %s: %w", epoch, member, mb.publishErr(err))
	}
	return ack.Sequence, nil
}

// Upgrade adds the incarnation marker subject to a mailbox stream declared
// before it existed, changing nothing else. It is idempotent.
func (mb *Mailbox) Upgrade(ctx context.Context) error {
	st, err := mb.JS().Stream(ctx, mb.Stream())
	if err != nil {
		return teambus.Unavailablef("open mailbox of team %s: %w", mb.Team(), err)
	}
	cfg := st.CachedInfo().Config
	want := "tb." + mb.Team() + "." + kindInc + ".*"
	for _, s := range cfg.Subjects {
		if s == want {
			return nil
		}
	}
	cfg.Subjects = append(cfg.Subjects, want)
	if _, err := mb.JS().UpdateStream(ctx, cfg); err != nil {
		return teambus.Unavailablef("upgrade mailbox of team %s: %w", mb.Team(), err)
	}
	return nil
}

// MarkerMovedError is a fenced send the server refused because the
// sender's incarnation marker is no longer the latest: Seq is the latest.
type MarkerMovedError struct {
	Member string
	Seq    uint64
}

func (e *MarkerMovedError) Error() string {
	return fmt.Sprintf("incarnation marker of %s moved to seq %d: %v", e.Member, e.Seq, teambus.ErrConflict)
}

// Unwrap makes the error a teambus.ErrConflict.
func (e *MarkerMovedError) Unwrap() error { return teambus.ErrConflict }

// SendFenced stores m like Send, but only if marker is still the latest
// incarnation marker of m.From (0: none stored). A newer one fails it with
// a *MarkerMovedError carrying the latest sequence.
func (mb *Mailbox) SendFenced(ctx context.Context, m *teambus.Message, held bool, marker uint64) (SendResult, error) {
	if err := mb.check(m); err != nil {
		return SendResult{}, err
	}
	msgID, b, err := encode(m, held)
	if err != nil {
		return SendResult{}, err
	}
	ack, err := mb.publishMsg(ctx, mb.subject(m, held), b, jetstream.WithMsgID(msgID),
		jetstream.WithExpectLastSequenceForSubject(marker, mb.MarkerSubject(m.From)))
	if err != nil {
		if moved := markerMoved(err, m.From); moved != nil {
			return SendResult{}, moved
		}
		return SendResult{}, mb.publishErr(err)
	}
	return SendResult{Seq: ack.Sequence, ID: m.ID, Duplicate: ack.Duplicate, Held: held}, nil
}
