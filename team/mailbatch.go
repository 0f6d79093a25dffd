package team

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/teamapi"
)

// MaxSendBatch caps the messages of one SendBatch (one request of the
// team service): a longer list is sent in several calls.
const MaxSendBatch = 1000

// SendBatch stores the messages of specs from the actor, in order, as
// Send does each (same defaults, same checks, same holding of a zombie's
// mail), in atomic batches (mailbox.Mailbox.SendBatch): consecutive sequences
// for the messages stored together, and a few fsyncs instead of one per
// message. Every message is checked before anything is sent — the team
// and the sender's incarnation once, each distinct recipient once — and
// an error names the message's line (teamapi.BatchMessage.Line) or its position; a
// refused batch stores nothing. A message whose id was stored before
// comes back Duplicate with the original seq, so a batch repeated after a
// crash stores each message once. It returns one result per message, in
// order; on an error after the checks, the results of what was stored.
func (s *Service) SendBatch(ctx context.Context, a Actor, specs []teamapi.BatchMessage) ([]mailbox.SendResult, error) {
	p, err := s.planBatch(ctx, a, specs)
	if err != nil {
		return nil, err
	}
	var cost int64
	for _, m := range p.msgs {
		cost += quotaCost(m.Body, m.Data)
	}
	if err := s.checkQuota(ctx, a, cost); err != nil {
		return nil, err
	}
	var touched sync.WaitGroup
	if !a.IsLead() {
		touched.Add(1)
		go func() {
			defer touched.Done()
			s.touch(ctx, a) // once for the batch
		}()
	}
	res, err := s.deliverBatch(ctx, a, p)
	touched.Wait()
	for i, r := range res {
		if i < len(p.msgs) {
			s.quotaResult(a, r.Duplicate, quotaCost(p.msgs[i].Body, p.msgs[i].Data))
		}
	}
	return res, err
}

// CheckBatch runs the checks of SendBatch and sends nothing: a caller
// that sends a long list in several batches checks all of them first, so
// a bad message in the last one leaves the first ones unsent too.
func (s *Service) CheckBatch(ctx context.Context, a Actor, specs []teamapi.BatchMessage) error {
	_, err := s.planBatch(ctx, a, specs)
	return err
}

// batchPlan is a checked batch: its messages, the mailbox, and the sender
// as read (nil for the lead) at revision rev.
type batchPlan struct {
	mb     *mailbox.Mailbox
	msgs   []*teambus.Message
	sender *teambus.Member
	rev    uint64
}

// where names message i of specs in an error.
func where(specs []teamapi.BatchMessage, i int) string {
	if specs[i].Line > 0 {
		return fmt.Sprintf("line %d", specs[i].Line)
	}
	return fmt.Sprintf("message %d", i+1)
}

// planBatch checks specs as Send checks one message and returns the
// messages to store.
func (s *Service) planBatch(ctx context.Context, a Actor, specs []teamapi.BatchMessage) (*batchPlan, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	if len(specs) == 0 {
		return nil, teambus.Invalidf("nothing to send: the batch has no messages")
	}
	if len(specs) > MaxSendBatch {
		return nil, teambus.Invalidf("%d messages in one batch, at most %d: send them in several", len(specs), MaxSendBatch)
	}
	specs = slices.Clone(specs)
	ids := make(map[string]int, len(specs))
	var recipients []string
	seen := map[string]bool{}
	for i := range specs {
		sp := &specs[i]
		if err := normalize(&sp.To, &sp.Type, &sp.ID, sp.Body, sp.Data); err != nil {
			return nil, fmt.Errorf("%s: %w", where(specs, i), err)
		}
		if sp.To == a.Member {
			return nil, teambus.Invalidf("%s: %s can not send mail to itself", where(specs, i), a.Member)
		}
		if j, dup := ids[sp.ID]; dup {
			return nil, teambus.Invalidf("%s: id %q is also the id of %s: one id, one message", where(specs, i), sp.ID, where(specs, j))
		}
		ids[sp.ID] = i
		if sp.To != teambus.Lead && sp.To != teambus.All && !seen[sp.To] {
			seen[sp.To] = true
			recipients = append(recipients, sp.To)
		}
	}
	r, err := s.readForSend(ctx, a, recipients)
	if err != nil {
		return nil, err
	}
	mb := s.teamMailbox(r.team)
	maxBody := mb.Config().MaxBody
	for i, sp := range specs {
		if len(sp.Body) > maxBody {
			return nil, teambus.Invalidf("%s: message body is %d bytes, at most %d: nothing sent; put large content in a file and send its path", where(specs, i), len(sp.Body), maxBody)
		}
	}
	epoch, err := r.senderEpoch(a)
	if err != nil {
		return nil, err
	}
	bad := map[string]error{}
	for i, to := range recipients {
		if r.recipientErr[i] != nil {
			bad[to] = r.recipientErr[i]
		}
	}
	now := s.Now()
	p := &batchPlan{mb: mb, sender: r.sender, rev: r.senderRev, msgs: make([]*teambus.Message, len(specs))}
	for i, sp := range specs {
		if err := bad[sp.To]; err != nil {
			return nil, fmt.Errorf("%s: %w: nothing sent", where(specs, i), err)
		}
		p.msgs[i] = &teambus.Message{ID: sp.ID, From: a.Member, To: sp.To, Type: sp.Type, Body: sp.Body, Data: sp.Data, Epoch: epoch, TS: now}
	}
	return p, nil
}

// deliverBatch stores the messages of p as deliver stores one: the
// lead's directly, a member's fenced on its incarnation, a zombie's held.
func (s *Service) deliverBatch(ctx context.Context, a Actor, p *batchPlan) ([]mailbox.SendResult, error) {
	if p.sender == nil {
		return p.mb.SendBatch(ctx, p.msgs, false)
	}
	sender, held, err := s.holdMode(ctx, a, p.sender, p.rev)
	if err != nil {
		return nil, err
	}
	for _, m := range p.msgs {
		m.Epoch = sender.Epoch
	}
	res, err := s.sendBatchFenced(ctx, a, p.mb, p.msgs, sender, held)
	if held {
		s.releaseIfAwake(ctx, a, res)
	}
	return res, err
}

// sendBatchFenced stores msgs only while the member's incarnation, checked
// in sender, is the latest one, as sendFenced does for one message: when
// the server reports a newer marker, the member record is checked again
// (retryFenced) and the messages not stored yet are sent with that marker.
func (s *Service) sendBatchFenced(ctx context.Context, a Actor, mb *mailbox.Mailbox, msgs []*teambus.Message, sender *teambus.Member, held bool) ([]mailbox.SendResult, error) {
	var out []mailbox.SendResult
	sent := func() string { return fmt.Sprintf("%d of %d messages sent", len(out), len(msgs)) }
	err := s.retryFenced(ctx, a, sender, msgs[0].Epoch, "the batch", sent, func(marker uint64) error {
		res, err := mb.SendBatchFenced(ctx, msgs[len(out):], held, marker)
		out = append(out, res...)
		return err
	})
	return out, err
}

// MaxSendLine is the longest line of a file of messages (ParseSendBatch):
// a body at several times the default limit once escaped, and room for
// the rest.
const MaxSendLine = 8 << 20

// sendLine is one line of a file of messages.
type sendLine struct {
	To   string          `json:"to"`
	Body *string         `json:"body"`
	Type string          `json:"type"`
	ID   string          `json:"id"`
	Data json.RawMessage `json:"data"`
}

// ParseSendBatch reads messages from JSON Lines (`teambus send --from`):
// one {"to", "body", "type", "id", "data"} object a line, blank lines
// skipped. to defaults to the lead and type to info, as for a single
// send; body is required. A line without an id gets FileMessageID of its
// number and text, so sending the same file again stores each message
// once. Everything that can be checked without the team is checked here
// (JSON, unknown fields, type, id, data, recipient syntax, an id given on
// two lines), and an error names the line; the team's checks (recipients
// that exist, the sender, the body limit) are SendBatch's and CheckBatch's.
func ParseSendBatch(r io.Reader) ([]teamapi.BatchMessage, error) {
	var out []teamapi.BatchMessage
	ids := map[string]int{}
	err := jsonLines(r, MaxSendLine, "message", "to, body, type, id, data", func(n int, line []byte, l *sendLine) error {
		if l.Body == nil {
			return teambus.Invalidf("line %d: no body", n)
		}
		spec := teamapi.BatchMessage{To: l.To, Type: teambus.MessageType(l.Type), ID: l.ID, Body: *l.Body, Line: n}
		if len(l.Data) > 0 && string(l.Data) != "null" {
			spec.Data = l.Data
		}
		if spec.ID == "" {
			spec.ID = FileMessageID(n, line)
		}
		if err := normalize(&spec.To, &spec.Type, &spec.ID, spec.Body, spec.Data); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		if j, dup := ids[spec.ID]; dup {
			return teambus.Invalidf("line %d: id %q is also the id of line %d: one id, one message", n, spec.ID, j)
		}
		ids[spec.ID] = n
		out = append(out, spec)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, teambus.Invalidf("no messages in the file: one JSON object per line, e.g. {\"to\":\"tm2\",\"body\":\"schema is ready\"}")
	}
	return out, nil
}

// FileMessageID is the idempotency key of line number n of a file of
// messages whose text (spaces trimmed) is text: "f<n>-" and 24 hex digits
// of the SHA-256 of both. The same line at the same place gives the same
// id, so a file sent again (after a crash, or grown since) stores each
// message once within the dedupe window; a changed or moved line is a new
// message.
func FileMessageID(n int, text []byte) string {
	h := sha256.New()
	h.Write([]byte(strconv.Itoa(n)))
	h.Write([]byte{'\n'})
	h.Write(text)
	return "f" + strconv.Itoa(n) + "-" + hex.EncodeToString(h.Sum(nil))[:24]
}
