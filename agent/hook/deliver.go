package hook

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/agent/binding"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/team"
)

// MaxLease is how many messages one hook leases.
const MaxLease = 50

// drained is mail leased and rendered, not yet settled.
type drained struct {
	lease *mailbox.Lease
	mail  Mail
}

// drainLock takes <pid>.lock for at most 100 ms; false when another hook
// of the process holds it (it is delivering: this one skips the drain).
func (h *hook) drainLock(ctx context.Context) bool {
	if h.locked != nil {
		return true
	}
	l, err := binding.TryLock(ctx, binding.LockPath(h.cfg.StateDir, h.pid), 100*time.Millisecond)
	if err != nil {
		return false
	}
	h.locked = l
	// The binding may have changed while another hook held the lock.
	if b, err := binding.Load(h.cfg.StateDir, h.pid); err == nil {
		h.b = b
	}
	return true
}

// drain leases the member's mail and renders it within max characters;
// nil when there is none.
func (h *hook) drain(ctx context.Context, max int) (*drained, error) {
	l, err := h.svc.LeaseInbox(ctx, h.b.Team, h.b.Member, mailbox.LeaseOptions{Max: MaxLease})
	return h.render(leased{lease: l, err: err}, max)
}

// settle ends a drain after the envelope was written (written) or not:
// the shown mail is remembered in the binding, then acked one by one while
// the hook is AckMargin inside its budget, each ack with its own deadline;
// everything else is released at once.
func (h *hook) settle(ctx context.Context, d *drained, written bool) {
	if d == nil {
		return
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(h.remaining(), 100*time.Millisecond))
		_ = d.lease.Release(rctx) // unreleased mail comes back after the ack wait
		cancel()
	}()
	if !written || h.cfg.DryRun {
		return
	}
	h.faultPoint("after-write")
	// Remembered before the acks: mail shown and then not acked comes back
	// marked as a possible repeat.
	shown := d.mail.Shown
	h.updateBinding(ctx, func(b *binding.Binding) bool { b.Remember(shown...); return true })
	for i, seq := range shown {
		left := h.remaining() - AckMargin
		if left <= 0 {
			h.rec.Outcome = "ack-deadline"
			break
		}
		actx, cancel := context.WithTimeout(ctx, min(500*time.Millisecond, h.remaining()-200*time.Millisecond))
		acked, err := d.lease.Ack(actx, seq)
		cancel()
		if err != nil {
			h.rec.Outcome = "ack-failed"
			h.rec.Error = Clean(clipChars(err.Error(), 300))
			break
		}
		h.rec.Acked = append(h.rec.Acked, acked...)
		if i == 0 {
			h.faultPoint("first-ack")
		}
	}
	if len(h.rec.Acked) > 0 {
		h.logEvent(ctx, EvMailDelivered, map[string]any{"seqs": h.rec.Acked, "via": h.cfg.Event, "session": h.b.Session, "epoch": h.b.Epoch})
	}
}

// EvMailDelivered is the event logged when a hook acked mail it handed to
// the agent: data.seqs, via (the event), session, epoch.
const EvMailDelivered = "mail.delivered"

// logEvent appends an event to the team session of the event log within
// what is left of the budget.
func (h *hook) logEvent(ctx context.Context, typ string, data any) {
	if h.svc == nil || h.remaining() < 50*time.Millisecond {
		return
	}
	h.svc.LogEventWithin(ctx, h.b.Team, typ, h.b.Member, data, h.remaining()-20*time.Millisecond)
}

// deliverEvent is UserPromptSubmit, PostToolBatch and PostToolUse: notices
// and mail, no output when there is nothing to say. Under the drain lock
// the inbox is leased while the notices are read (requests to different
// streams, at once); the mail is rendered once the notices are known, as
// both share the character cap.
func (h *hook) deliverEvent(ctx context.Context, event string, notices bool) int {
	if err := h.connect(ctx); err != nil {
		return h.fail(err)
	}
	var leasing <-chan leased
	if h.drainLock(ctx) {
		leasing = h.leaseAsync(ctx)
	} else {
		h.rec.Outcome = "drain-busy"
	}
	var notes string
	if notices {
		notes = h.notices(ctx)
		if h.b.Fenced {
			h.dropLease(ctx, leasing)
			return h.finish(ctx, event, notes, nil)
		}
	}
	h.touch(ctx)
	var d *drained
	if leasing != nil {
		var err error
		if d, err = h.render(<-leasing, h.cfg.MaxContext-Chars(notes)); err != nil {
			h.rec.Error = Clean(clipChars(err.Error(), 300))
		}
	}
	return h.finish(ctx, event, notes, d)
}

// leased is the outcome of a lease of the member's inbox.
type leased struct {
	lease *mailbox.Lease
	err   error
}

// leaseAsync leases up to MaxLease messages of the member's inbox in a
// goroutine; the channel delivers the outcome once.
func (h *hook) leaseAsync(ctx context.Context) <-chan leased {
	ch := make(chan leased, 1)
	svc, teamID, member := h.svc, h.b.Team, h.b.Member
	go func() {
		l, err := svc.LeaseInbox(ctx, teamID, member, mailbox.LeaseOptions{Max: MaxLease})
		ch <- leased{lease: l, err: err}
	}()
	return ch
}

// dropLease waits for a lease in flight and releases what it holds.
func (h *hook) dropLease(ctx context.Context, leasing <-chan leased) {
	if leasing == nil {
		return
	}
	if r := <-leasing; r.err == nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(h.remaining(), 100*time.Millisecond))
		_ = r.lease.Release(rctx) // unreleased mail comes back after the ack wait
		cancel()
	}
}

// render renders leased mail within max characters; nil when there is
// none.
func (h *hook) render(r leased, max int) (*drained, error) {
	if r.err != nil {
		return nil, r.err
	}
	if len(r.lease.Messages) == 0 {
		return nil, nil
	}
	m := RenderMail(h.b.Team, h.b.Member, r.lease.Messages, h.b.Seen, max)
	h.rec.Delivered = append(h.rec.Delivered, m.Shown...)
	return &drained{lease: r.lease, mail: m}, nil
}

// finish writes notes and the drained mail and settles the drain.
func (h *hook) finish(ctx context.Context, event, notes string, d *drained) int {
	mail := ""
	if d != nil {
		mail = d.mail.Text
	}
	text := joinText(notes, mail)
	h.flush(ctx)
	if text == "" {
		return 0
	}
	err := h.emit(event, text)
	if err != nil {
		// EPIPE: Claude gave up on the hook. Nothing is acked.
		h.rec.Outcome = "write-failed"
		h.rec.Error = Clean(clipChars(err.Error(), 300))
	}
	h.settle(ctx, d, err == nil)
	return 0
}

// touch records the member's activity at most once per TouchEvery per
// process, and clears a liveness condition (approval, rate_limit…) the
// member had: the session is working again.
func (h *hook) touch(ctx context.Context) {
	now := h.cfg.Now()
	if h.b.LastTouch == nil || now.Sub(*h.b.LastTouch) >= TouchEvery {
		if !h.b.Lead() {
			_ = h.svc.Touch(ctx, h.b.Team, h.b.Member) // advisory: a lost activity stamp makes the lead probe a little early
		}
		h.later(func(b *binding.Binding) bool { b.LastTouch = &now; return true })
	}
	if h.b.Notices["condition"] != "" {
		h.setCondition(ctx, "")
	}
}

// later queues a binding change for flush: one write per hook.
func (h *hook) later(fn func(*binding.Binding) bool) {
	h.pending = append(h.pending, fn)
	fn(h.b)
}

// flush writes the queued binding changes.
func (h *hook) flush(ctx context.Context) {
	if len(h.pending) == 0 {
		return
	}
	fns := h.pending
	h.pending = nil
	h.updateBinding(ctx, func(b *binding.Binding) bool {
		for _, fn := range fns {
			fn(b)
		}
		return true
	})
}

// notices are the one-line notices of §12.3.9, each once per transition.
func (h *hook) notices(ctx context.Context) string {
	var out []string
	m, err := h.svc.Member(ctx, h.b.Team, h.b.Member)
	if h.b.Lead() {
		err = nil
		t, terr := h.svc.Team(ctx, h.b.Team)
		if terr == nil && t.LeadSession != h.b.Session && t.LeadSession != "" {
			h.later(func(b *binding.Binding) bool { b.Fenced = true; return true })
			return fmt.Sprintf("teambus: this session is no longer the lead of team %s: lead session %s (lead epoch %d) replaced it; teambus hooks stop acting here.\n", h.b.Team, Clean(t.LeadSession), t.LeadEpoch)
		}
		if terr == nil {
			out = append(out, h.teamNotice(t.Status))
		}
		return joinText(out...)
	}
	if err == nil {
		if m.Epoch != h.b.Epoch || m.Session != h.b.Session || m.Fenced(h.b.Session) != nil {
			h.later(func(b *binding.Binding) bool { b.Fenced = true; return true })
			return fmt.Sprintf("teambus: this session (%s, epoch %d) was replaced by a newer incarnation (epoch %d, status %s); teambus hooks stop acting here.\n", h.b.Member, h.b.Epoch, m.Epoch, m.Status)
		}
		zombie := "off"
		if m.Status == teambus.MemberZombie {
			zombie = "on"
		}
		if prev := h.b.Notices["zombie"]; prev != zombie {
			h.later(func(b *binding.Binding) bool { b.Notice("zombie", zombie); return true })
			switch {
			case zombie == "on":
				since := ""
				if m.ZombieSince != nil {
					since = " since " + m.ZombieSince.UTC().Format("15:04Z")
				}
				out = append(out, "teambus: the lead is silent"+since+"; zombie mode: keep working on your task; your outgoing mail is held until a lead re-attaches.")
			case prev == "on":
				out = append(out, "teambus: a lead re-attached; zombie mode is over and your held mail was released.")
			}
		}
	}
	if id := h.b.Notices["task"]; id != "" {
		if t, err := h.svc.Task(ctx, h.b.Team, id); err == nil && (t.AssignedTo != h.b.Member || !t.Active()) && t.Status != teambus.TaskComplete {
			h.later(func(b *binding.Binding) bool { b.Notice("task", ""); return true })
			who := ""
			if t.AssignedTo != "" && t.AssignedTo != h.b.Member {
				who = " and assigned to " + t.AssignedTo
			}
			out = append(out, fmt.Sprintf("teambus: task %s is no longer yours: it is %s%s. Stop working on it; `teambus task next` finds other work.", t.ID, t.Status, who))
		}
	}
	if t, err := h.svc.Team(ctx, h.b.Team); err == nil {
		out = append(out, h.teamNotice(t.Status))
	}
	return joinText(out...)
}

// teamNotice is the notice for the team's status, once per change.
func (h *hook) teamNotice(s teambus.TeamStatus) string {
	state := string(s)
	if s != teambus.TeamConsolidating && s != teambus.TeamComplete && s != teambus.TeamAborted {
		state = "open"
	}
	prev := h.b.Notices["team"]
	if prev == state || (prev == "" && state == "open") {
		return ""
	}
	h.later(func(b *binding.Binding) bool { b.Notice("team", state); return true })
	switch s {
	case teambus.TeamConsolidating:
		return fmt.Sprintf("teambus: team %s is consolidating: finish or checkpoint your task; take no new work.", h.b.Team)
	case teambus.TeamComplete, teambus.TeamAborted:
		return fmt.Sprintf("teambus: team %s is %s: stop work.", h.b.Team, s)
	}
	return ""
}

// setCondition records (or clears, with "") the member's liveness
// condition on its record.
func (h *hook) setCondition(ctx context.Context, cond string) {
	now := h.cfg.Now().UTC()
	err := h.svc.UpdateMember(ctx, h.b.Team, h.b.Member, h.b.Epoch, func(m *teambus.Member) bool {
		if m.Condition == cond {
			return false
		}
		m.Condition = cond
		m.ConditionAt = nil
		if cond != "" {
			m.ConditionAt = &now
		}
		return true
	})
	if err == nil || errors.Is(err, teambus.ErrNotFound) {
		h.later(func(b *binding.Binding) bool { b.Notice("condition", cond); return true })
	}
}

var _ = team.Actor{}
