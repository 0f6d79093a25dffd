package hook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/agent/binding"
	"github.com/teambus/teambus/teamapi"
)

// MaxLease is how many messages one hook leases.
const MaxLease = 50

// drained is mail leased and rendered, not yet settled.
type drained struct {
	lease *teamapi.Lease
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
	l, err := teamapi.LeaseInbox(ctx, h.api, h.actor(), MaxLease, 0)
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
	if h.api == nil || h.remaining() < 50*time.Millisecond {
		return
	}
	b, err := json.Marshal(data)
	if err != nil {
		return
	}
	ectx, cancel := context.WithTimeout(ctx, h.remaining()-20*time.Millisecond)
	defer cancel()
	if _, err := h.api.Event(ectx, teamapi.EventRequest{Actor: h.actor(), Type: typ, Data: b}); err != nil && h.rec.Error == "" {
		h.rec.Error = Clean(clipChars("log "+typ+": "+err.Error(), 300))
	}
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
	lease *teamapi.Lease
	err   error
}

// leaseAsync leases up to MaxLease messages of the member's inbox in a
// goroutine; the channel delivers the outcome once.
func (h *hook) leaseAsync(ctx context.Context) <-chan leased {
	ch := make(chan leased, 1)
	api, a := h.api, h.actor()
	go func() {
		l, err := teamapi.LeaseInbox(ctx, api, a, MaxLease, 0)
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
	if len(r.lease.Messages()) == 0 {
		return nil, nil
	}
	m := RenderMail(h.b.Team, h.b.Member, r.lease.Messages(), h.b.Seen, max)
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
// member had: the session is working again. notices asks both with its
// status request; touch asks them alone when notices did not.
func (h *hook) touch(ctx context.Context) {
	req := teamapi.StatusRequest{Actor: h.actor()}
	if !h.owed(&req) {
		return
	}
	if _, err := h.api.Status(ctx, req); err == nil {
		h.conditionCleared(req)
	}
}

// owed adds to req what this hook owes the member's record, once per
// hook: its activity stamp, due once per TouchEvery (a lost stamp only
// makes the lead probe a little early), and the end of its liveness
// condition. It reports whether req asks for either.
func (h *hook) owed(req *teamapi.StatusRequest) bool {
	if h.touched || h.b.Lead() {
		return false
	}
	h.touched = true
	now := h.cfg.Now()
	if h.b.LastTouch == nil || now.Sub(*h.b.LastTouch) >= TouchEvery {
		req.Touch = true
		h.later(func(b *binding.Binding) bool { b.LastTouch = &now; return true })
	}
	if h.b.Notices["condition"] != "" {
		none := ""
		req.Condition = &none
	}
	return req.Touch || req.Condition != nil
}

// conditionCleared remembers that a status request cleared the member's
// condition.
func (h *hook) conditionCleared(req teamapi.StatusRequest) {
	if req.Condition != nil && *req.Condition == "" {
		h.later(func(b *binding.Binding) bool { b.Notice("condition", ""); return true })
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

// notices are the one-line notices of the member's (or the lead's)
// state, each once per transition, from one status request (which also
// carries what owed adds).
func (h *hook) notices(ctx context.Context) string {
	req := teamapi.StatusRequest{Actor: h.actor(), Task: h.b.Notices["task"]}
	h.owed(&req)
	st, err := h.api.Status(ctx, req)
	if err != nil {
		return ""
	}
	h.conditionCleared(req)
	t := st.Team
	if h.b.Lead() {
		if t.LeadSession != h.b.Session && t.LeadSession != "" {
			h.later(func(b *binding.Binding) bool { b.Fenced = true; return true })
			return fmt.Sprintf("teambus: this session is no longer the lead of team %s: lead session %s (lead epoch %d) replaced it; teambus hooks stop acting here.\n", h.b.Team, Clean(t.LeadSession), t.LeadEpoch)
		}
		return h.teamNotice(t.Status)
	}
	var out []string
	if m := st.Member; m != nil {
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
	if t := st.Task; t != nil && (t.AssignedTo != h.b.Member || !t.Active()) && t.Status != teambus.TaskComplete {
		h.later(func(b *binding.Binding) bool { b.Notice("task", ""); return true })
		who := ""
		if t.AssignedTo != "" && t.AssignedTo != h.b.Member {
			who = " and assigned to " + t.AssignedTo
		}
		out = append(out, fmt.Sprintf("teambus: task %s is no longer yours: it is %s%s. Stop working on it; `teambus task next` finds other work.", t.ID, t.Status, who))
	}
	out = append(out, h.teamNotice(t.Status))
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
	_, err := h.api.Status(ctx, teamapi.StatusRequest{Actor: h.actor(), Condition: &cond})
	if err == nil || errors.Is(err, teambus.ErrNotFound) {
		h.later(func(b *binding.Binding) bool { b.Notice("condition", cond); return true })
	}
}
