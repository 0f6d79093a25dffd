package hook

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/teambus/teambus/agent/binding"
	"github.com/teambus/teambus/proc"
	"github.com/teambus/teambus/teamapi"
)

// Waiter timings (§12.5).
const (
	// WaitPull is how long one pull request of the waiter lasts; renewed,
	// so a killed waiter strands nothing longer than the inbox ack wait.
	WaitPull = 25 * time.Second
	// WaitBatch is how long the waiter waits after the first message for
	// more, so one wake carries a burst.
	WaitBatch = 300 * time.Millisecond
)

// wait is `teambus hook wait`, the asyncRewake Stop handler: one per
// process; it exits 0 on SIGUSR1 (a prompt started a turn), when the
// Claude process exits, when the session is fenced or after MaxWait; when
// mail (or a notice that needs action) arrives it writes it to stderr,
// closes stderr, acks within the budget and exits 2, which wakes Claude.
func (h *hook) wait(ctx context.Context) int {
	// Registered before the pid is published, so a UserPromptSubmit can
	// never kill the waiter with SIGUSR1's default action.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	if !h.bound() {
		return 0
	}
	lock, err := binding.TryLock(ctx, binding.WaitLockPath(h.cfg.StateDir, h.pid), 0)
	if err != nil {
		h.rec.Outcome = "waiter-running"
		return 0
	}
	defer lock.Unlock()
	me := os.Getpid()
	meStart, _ := binding.StartTime(me)
	h.updateBinding(ctx, func(b *binding.Binding) bool { b.WaiterPID, b.WaiterStart = me, meStart; return true })
	defer h.updateBinding(context.WithoutCancel(ctx), func(b *binding.Binding) bool {
		if b.WaiterPID != me {
			return false
		}
		b.WaiterPID, b.WaiterStart = 0, 0
		return true
	})

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	gone := proc.Exited(wctx, h.pid)
	deadline := time.NewTimer(h.cfg.MaxWait)
	defer deadline.Stop()
	found := make(chan string, 1)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		h.watch(wctx, found)
	}()
	// The watcher shares h: it must be gone before the waiter goes on.
	stopWatch := func() {
		cancel()
		<-watched
	}
	defer stopWatch()
	select {
	case <-sig:
		h.rec.Outcome = "prompt"
		return 0
	case <-gone:
		h.rec.Outcome = "agent-exited"
		return 0
	case <-deadline.C:
		h.rec.Outcome = "timeout"
		return 0
	case why := <-found:
		if why != "mail" && why != "notice" {
			h.rec.Outcome = why
			return 0
		}
	}
	// Something arrived: drain within the budget, text on stderr, exit 2.
	stopWatch()
	h.t0 = time.Now()
	bctx, bcancel := context.WithTimeout(ctx, h.cfg.Budget)
	defer bcancel()
	select {
	case <-sig:
		h.rec.Outcome = "prompt"
		return 0
	case <-time.After(WaitBatch):
	}
	notes := h.notices(bctx)
	if h.b.Fenced {
		h.flush(bctx)
		return 0
	}
	var d *drained
	if h.drainLock(bctx) {
		if d, err = h.drain(bctx, h.cfg.MaxContext-Chars(notes)); err != nil {
			h.rec.Error = Clean(clipChars(err.Error(), 300))
		}
	}
	text := joinText(notes, d.text())
	h.flush(bctx)
	if text == "" {
		h.rec.Outcome = "nothing"
		return 0
	}
	_, werr := h.errw.Write([]byte(text))
	if cerr := h.errw.Close(); werr == nil {
		werr = cerr
	}
	h.settle(bctx, d, werr == nil)
	h.rec.Outcome = "wake"
	return 2
}

func (d *drained) text() string {
	if d == nil {
		return ""
	}
	return d.mail.Text
}

// watch waits for mail on the member's inbox, pull by pull, and for
// notices; it reports "mail", "notice", "fenced" or an error outcome.
func (h *hook) watch(ctx context.Context, found chan<- string) {
	for ctx.Err() == nil {
		if err := h.connect(ctx); err != nil {
			// The bus is down: try again after the memo, without leasing.
			h.api, h.conn = nil, nil
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Second):
			}
			if h.b != nil {
				h.b.BusDownUntil = nil
			}
			continue
		}
		if notes := h.notices(ctx); h.b.Fenced {
			found <- "fenced"
			return
		} else if notes != "" {
			// Shown by the wake itself; forget the transition so it is
			// computed again there.
			h.pending = nil
			if b, err := binding.Load(h.cfg.StateDir, h.pid); err == nil {
				h.b = b
			}
			found <- "notice"
			return
		}
		l, err := teamapi.LeaseInbox(ctx, h.api, h.actor(), 1, WaitPull)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		n := len(l.Messages())
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = l.Release(rctx) // unreleased mail comes back after the ack wait
		cancel()
		if n > 0 {
			found <- "mail"
			return
		}
	}
}
