package team

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/teamapi"
)

// normalize fills the defaults of a message (type info, a random id, to
// the lead) and checks what can be checked without the team.
func normalize(to *string, typ *teambus.MessageType, id *string, body string, data json.RawMessage) error {
	if *typ == "" {
		*typ = teambus.MsgInfo
	}
	if _, err := teambus.ParseMessageType(string(*typ)); err != nil {
		return err
	}
	if *id == "" {
		*id = NewMessageID()
	}
	if err := teambus.ValidateMessageID(*id); err != nil {
		return err
	}
	if err := teambus.ValidateData(data); err != nil {
		return err
	}
	if err := teambus.ValidateBody(body); err != nil {
		return err
	}
	if *to == "" {
		*to = teambus.Lead
	}
	if *to != teambus.Lead && *to != teambus.All {
		if err := teambus.ValidateID("recipient", *to); err != nil {
			return err
		}
	}
	return nil
}

// NewMessageID returns a random idempotency key.
func NewMessageID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}

// Send stores a message from the request's actor. An unknown recipient is refused
// and nothing is stored. Mail of a member in zombie mode is held durably
// (Held, no seq yet) and released in order before any later mail of the
// member; see deliver.
func (s *Service) Send(ctx context.Context, spec teamapi.SendRequest) (mailbox.SendResult, error) {
	a := spec.Actor
	if err := a.Validate(); err != nil {
		return mailbox.SendResult{}, err
	}
	if err := normalize(&spec.To, &spec.Type, &spec.ID, spec.Body, spec.Data); err != nil {
		return mailbox.SendResult{}, err
	}
	var recipients []string
	if spec.To != teambus.Lead && spec.To != teambus.All && spec.To != a.Member {
		recipients = []string{spec.To}
	}
	r, err := s.readForSend(ctx, a, recipients)
	if err != nil {
		return mailbox.SendResult{}, err
	}
	mb := s.teamMailbox(r.team)
	if max := mb.Config().MaxBody; len(spec.Body) > max {
		return mailbox.SendResult{}, teambus.Invalidf("message body is %d bytes, at most %d: nothing sent; put large content in a file and send its path", len(spec.Body), max)
	}
	epoch, err := r.senderEpoch(a)
	if err != nil {
		return mailbox.SendResult{}, err
	}
	if spec.To == a.Member {
		return mailbox.SendResult{}, teambus.Invalidf("%s can not send mail to itself", a.Member)
	}
	if len(recipients) > 0 && r.recipientErr[0] != nil {
		return mailbox.SendResult{}, fmt.Errorf("%w: nothing sent", r.recipientErr[0])
	}
	cost := quotaCost(spec.Body, spec.Data)
	if err := s.checkQuota(ctx, a, cost); err != nil {
		return mailbox.SendResult{}, err
	}
	m := &teambus.Message{ID: spec.ID, From: a.Member, To: spec.To, Type: spec.Type, Body: spec.Body, Data: spec.Data, Epoch: epoch, TS: s.Now()}
	// The member's activity is recorded while the message is stored: two
	// writes to different streams, whose fsyncs the node runs side by
	// side. A send that fails still counts as activity: the agent was at
	// work.
	var touched sync.WaitGroup
	if !a.IsLead() {
		touched.Add(1)
		go func() {
			defer touched.Done()
			s.touch(ctx, a)
		}()
	}
	res, err := s.deliver(ctx, a, mb, m, r.sender, r.senderRev)
	touched.Wait()
	if err == nil {
		s.quotaResult(a, res.Duplicate, cost)
	}
	return res, err
}

// sendReads is what a send reads before it decides: the team, the sender
// (nil for the lead) at its revision, and an error for each recipient
// that could not be read (nil when it exists).
type sendReads struct {
	team         *teambus.Team
	sender       *teambus.Member
	senderRev    uint64
	senderErr    error
	recipientErr []error
}

// readForSend reads the team, the sender and the recipients side by side,
// a few recipients at a time. Point reads, not a snapshot: a send costs
// the same in a team of ten tasks or ten thousand. The error is the team's
// read; the others are judged by the caller, in that order.
func (s *Service) readForSend(ctx context.Context, a Actor, recipients []string) (sendReads, error) {
	r := sendReads{recipientErr: make([]error, len(recipients))}
	var (
		tErr error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 8)
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.team, _, tErr = s.store.Team(ctx, a.Team)
	}()
	if !a.IsLead() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.sender, r.senderRev, r.senderErr = s.store.Member(ctx, a.Team, a.Member)
		}()
	}
	for i, to := range recipients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			_, _, r.recipientErr[i] = s.store.Member(ctx, a.Team, to)
		}()
	}
	wg.Wait()
	return r, tErr
}

// senderEpoch refuses a send to a closed team or from a fenced incarnation
// (a lead session that is not the team's, a member's replaced session) and
// returns the incarnation's epoch the mail carries.
func (r sendReads) senderEpoch(a Actor) (int64, error) {
	t := r.team
	if t.Closed() {
		return 0, teambus.Statef("team %s is %s: use `teambus team review %s`", t.ID, t.Status, t.ID)
	}
	if a.IsLead() {
		if t.LeadSession != "" && a.Session != t.LeadSession {
			return 0, &StaleLeadError{Team: t.ID, Session: a.Session, Epoch: t.LeadEpoch}
		}
		return t.LeadEpoch, nil
	}
	if r.senderErr != nil {
		return 0, r.senderErr
	}
	if err := r.sender.Fenced(a.Session); err != nil {
		return 0, err
	}
	return r.sender.Epoch, nil
}

// deliver stores m from sender (nil for the lead), read at revision rev.
//
// Mail of a zombie is held: the member record is marked (HeldSince, with
// compare-and-set) before the first held message is stored, so whoever
// comes next (the member leaving zombie mode, its next incarnation, the
// lead) finds it; a held send gets no seq (Seq 0, Held), its seq is the
// release's. Mail of a member that is not a zombie but still has held mail
// releases that first, so new mail never overtakes held mail. A held send
// that finds, once stored, that the member left zombie mode meanwhile
// (after the release that ran then) releases it itself and reports the
// seq it got.
func (s *Service) deliver(ctx context.Context, a Actor, mb *mailbox.Mailbox, m *teambus.Message, sender *teambus.Member, rev uint64) (mailbox.SendResult, error) {
	if sender == nil {
		return mb.Send(ctx, m, false)
	}
	sender, held, err := s.holdMode(ctx, a, sender, rev)
	if err != nil {
		return mailbox.SendResult{}, err
	}
	m.Epoch = sender.Epoch
	res, err := s.sendFenced(ctx, a, mb, m, sender, held)
	if err != nil || !held {
		return res, err
	}
	out := []mailbox.SendResult{res}
	s.releaseIfAwake(ctx, a, out)
	return out[0], nil
}

// holdMode decides whether the new mail of sender, read at revision rev,
// is held (see deliver): for a zombie it marks the member record
// (HeldSince, compare-and-set) unless it is marked; for a member that is
// not a zombie but still has held mail it releases that first. It returns
// the member as last read.
func (s *Service) holdMode(ctx context.Context, a Actor, sender *teambus.Member, rev uint64) (*teambus.Member, bool, error) {
	for attempt := 0; ; attempt++ {
		if sender.Status != teambus.MemberZombie {
			if sender.HeldSince != nil {
				if _, err := s.ReleaseHeld(ctx, a.Team, a.Member); err != nil {
					return nil, false, fmt.Errorf("release the held mail of %s before new mail: %w: nothing sent", a.Member, err)
				}
			}
			return sender, false, nil
		}
		if sender.HeldSince != nil {
			return sender, true, nil
		}
		upd := *sender
		upd.HeldSince = teambus.TimePtr(s.Now())
		_, err := s.store.PutMember(ctx, a.Team, &upd, rev)
		if err == nil {
			return sender, true, nil
		}
		if !errors.Is(err, kv.ErrConflict) || attempt >= kv.MaxRetries {
			return nil, false, fmt.Errorf("mark held mail of %s: %w", a.Member, err)
		}
		if sender, rev, err = s.store.Member(ctx, a.Team, a.Member); err != nil {
			return nil, false, err
		}
		if err := sender.Fenced(a.Session); err != nil {
			return nil, false, err
		}
	}
}

// releaseIfAwake takes the results of held sends (their seq is the
// release's: 0 until then) and, when the member left zombie mode while
// they were stored, releases its held mail and reports the seq each got.
// A failed release leaves them held: the next release delivers them.
func (s *Service) releaseIfAwake(ctx context.Context, a Actor, res []mailbox.SendResult) {
	for i := range res {
		res[i].Seq = 0
	}
	cur, _, err := s.store.Member(ctx, a.Team, a.Member)
	if err != nil || cur.Status == teambus.MemberZombie {
		return
	}
	released, err := s.ReleaseHeld(ctx, a.Team, a.Member)
	if err != nil {
		return
	}
	seqs := make(map[string]uint64, len(released))
	for _, r := range released {
		seqs[r.ID] = r.Seq
	}
	for i := range res {
		if seq, ok := seqs[res[i].ID]; ok {
			res[i].Seq, res[i].Held = seq, false
		}
	}
}

// ReleaseHeld delivers the mail member sent in zombie mode, in order,
// unless the member is a zombie (again), and then clears the member's
// HeldSince mark with compare-and-set. It returns what it delivered, each
// message marked with HeldSince. Whoever comes after zombie mode calls it:
// the sidecar leaving zombie mode or reaching zombie-max, the member's
// next incarnation, the lead, a send of the member. Concurrent releases
// are harmless: the held-mail cursor passes each message to one of them,
// and each waits until none is in flight before it returns.
func (s *Service) ReleaseHeld(ctx context.Context, team, member string) ([]teambus.Message, error) {
	mb := s.Mailbox(team)
	var out []teambus.Message
	for attempt := 0; attempt < 100; attempt++ {
		m, rev, err := s.store.Member(ctx, team, member)
		if err != nil {
			return out, err
		}
		if m.Status == teambus.MemberZombie {
			return out, nil
		}
		rel, err := mb.ReleaseHeld(ctx, member)
		out = append(out, rel...)
		if err != nil {
			return out, fmt.Errorf("release held mail of %s: %w", member, err)
		}
		pending, err := mb.HeldPending(ctx, member)
		if err != nil {
			return out, err
		}
		if pending > 0 {
			// Another release has a message in flight.
			select {
			case <-ctx.Done():
				return out, teambus.Unavailablef("release held mail of %s: %v", member, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		if m.HeldSince == nil {
			return out, nil
		}
		upd := *m
		upd.HeldSince = nil
		if _, err := s.store.PutMember(ctx, team, &upd, rev); err != nil {
			if errors.Is(err, kv.ErrConflict) {
				continue
			}
			return out, fmt.Errorf("clear held mark of %s: %w", member, err)
		}
		return out, nil
	}
	return out, teambus.Unavailablef("release held mail of %s: still in flight; try again", member)
}

// sendFenced stores a member's message m only while the member's
// incarnation, checked in sender, is the latest one (bus.SendFenced): a
// registration between the check and the store refuses it on the server.
// When the server reports a newer marker than the record showed, the
// member record is read and checked again before that marker is used: a
// marker the sender saw before a check that passed can not be one a later
// incarnation stored, so an old incarnation's mail never lands after a
// new one registered (Join returned).
func (s *Service) sendFenced(ctx context.Context, a Actor, mb *mailbox.Mailbox, m *teambus.Message, sender *teambus.Member, held bool) (mailbox.SendResult, error) {
	var res mailbox.SendResult
	err := s.retryFenced(ctx, a, sender, m.Epoch, "the message", func() string { return "nothing sent" }, func(marker uint64) (err error) {
		res, err = mb.SendFenced(ctx, m, held, marker)
		return err
	})
	return res, err
}

// retryFenced runs send with the marker of sender and, each time the
// server reports a newer marker, reads and checks the member record again
// (its session, and its epoch against epoch, the one the mail carries)
// before it runs send with that marker; sent says, for the errors, what was
// stored so far.
func (s *Service) retryFenced(ctx context.Context, a Actor, sender *teambus.Member, epoch int64, what string, sent func() string, send func(marker uint64) error) error {
	marker := sender.Marker
	for attempt := 0; ; attempt++ {
		err := send(marker)
		var moved *mailbox.MarkerMovedError
		if !errors.As(err, &moved) || attempt >= kv.MaxRetries {
			return err
		}
		cur, _, err := s.store.Member(ctx, a.Team, a.Member)
		if err != nil {
			return err
		}
		if err := cur.Fenced(a.Session); err != nil {
			return fmt.Errorf("%w: %s", err, sent())
		}
		if cur.Epoch != epoch {
			return teambus.Fencedf("member %s registered again (epoch %d, was %d) while %s was sent: %s", a.Member, cur.Epoch, epoch, what, sent())
		}
		marker = max(moved.Seq, cur.Marker)
	}
}

// Inbox returns the actor's unacknowledged mail, oldest first.
func (s *Service) Inbox(ctx context.Context, a Actor, opts mailbox.InboxOptions) ([]teambus.Message, error) {
	if err := s.check(ctx, a); err != nil {
		return nil, err
	}
	opts.Self = a.Member
	msgs, err := s.Mailbox(a.Team).Inbox(ctx, a.Member, opts)
	if err == nil {
		s.touch(ctx, a)
	}
	return msgs, err
}

// Ack acknowledges the actor's mail by sequence.
func (s *Service) Ack(ctx context.Context, a Actor, seqs []uint64) (mailbox.AckResult, error) {
	if len(seqs) == 0 {
		return mailbox.AckResult{}, teambus.Invalidf("nothing to ack: give the sequence numbers `teambus inbox` printed")
	}
	if err := s.check(ctx, a); err != nil {
		return mailbox.AckResult{}, err
	}
	res, err := s.Mailbox(a.Team).Ack(ctx, a.Member, seqs)
	if err == nil {
		s.touch(ctx, a)
	}
	return res, err
}

// check validates and authorizes the actor against the team's records.
func (s *Service) check(ctx context.Context, a Actor) error {
	if err := a.Validate(); err != nil {
		return err
	}
	if a.IsLead() {
		t, _, err := s.store.Team(ctx, a.Team)
		if err != nil {
			return err
		}
		if t.LeadSession != "" && a.Session != t.LeadSession {
			return &StaleLeadError{Team: t.ID, Session: a.Session, Epoch: t.LeadEpoch}
		}
		return nil
	}
	m, _, err := s.store.Member(ctx, a.Team, a.Member)
	if err != nil {
		return err
	}
	return m.Fenced(a.Session)
}

// Notify sends mail on behalf of a sidecar or teambus itself: a status
// reply, a crash notice, an escalation. It is never held and is not the
// member's activity. id makes it idempotent: the same notice is stored once.
func (s *Service) Notify(ctx context.Context, team, from string, epoch int64, to string, typ teambus.MessageType, id, body string, data any) (mailbox.SendResult, error) {
	m := &teambus.Message{ID: id, From: from, To: to, Type: typ, Body: body, Epoch: epoch, TS: s.Now()}
	if data != nil {
		b, err := json.Marshal(data)
		if err != nil {
			return mailbox.SendResult{}, fmt.Errorf("encode notice data: %w", err)
		}
		m.Data = b
	}
	return s.Mailbox(team).Send(ctx, m, false)
}
