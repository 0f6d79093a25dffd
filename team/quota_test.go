package team_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// fakeClock is a settable clock.
type quotaClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *quotaClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *quotaClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestService_SendQuota: a member flooding a 4 MiB mailbox stops at its
// share (1 MiB in 10 minutes) with ErrQuota (exit 1), having stored
// nothing more; another member and the lead still send; a duplicate
// costs nothing; once the window moves on the member sends again; a
// batch counts whole.
func TestService_SendQuota(t *testing.T) {
	clock := &quotaClock{now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	f := newFixture(t, team.Config{Mailbox: mailbox.MailboxConfig{MaxBytes: 4 << 20}, Now: clock.Now})
	f.create(t, "alpha", "L", testPolicy(), "tm1", "tm2")
	ctx := testCtx(t)
	tm1, tm2 := actorOf("alpha", "tm1"), actorOf("alpha", "tm2")
	body := strings.Repeat("q", 64<<10)
	var err error
	sent := 0
	for ; sent < 40; sent++ {
		if _, err = f.svc.Send(ctx, teamapi.SendRequest{Actor: tm1, To: "tm2", ID: fmt.Sprint("f", sent), Body: body}); err != nil {
			break
		}
	}
	if !errors.Is(err, teamapi.ErrQuota) || !errors.Is(err, teambus.ErrUnavailable) || teambus.ExitCode(err) != teambus.ExitTransient {
		t.Fatalf("after %d sends of 64 KiB: %v (exit %d); want ErrQuota, exit 1", sent, err, teambus.ExitCode(err))
	}
	if sent < 14 || sent > 16 {
		t.Fatalf("%d sends of 64 KiB fit in a 1 MiB share", sent)
	}
	if msg := err.Error(); !strings.Contains(msg, "tm1 of team alpha") || !strings.Contains(msg, "1/4 of 4MiB") || !strings.Contains(msg, "nothing was sent") || !strings.Contains(msg, "send it again in") {
		t.Fatalf("quota message: %q", msg)
	}
	// The same id again is a duplicate and stores nothing: no cost, and
	// the answer is still the quota (nothing new can go in).
	if _, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: tm2, To: "tm1", Body: "tm2 still sends"}); err != nil {
		t.Fatalf("tm2 while tm1 is at its quota: %v", err)
	}
	if _, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: team.Actor{Team: "alpha", Member: teambus.Lead, Session: "L"}, To: "tm1", Body: "the lead still sends"}); err != nil {
		t.Fatalf("the lead while tm1 is at its quota: %v", err)
	}
	// A batch past the share is refused whole.
	if _, err := f.svc.SendBatch(ctx, tm1, []teamapi.BatchMessage{{To: "tm2", Body: "a"}, {To: "tm2", Body: body}}); !errors.Is(err, teamapi.ErrQuota) {
		t.Fatalf("batch at the quota: %v", err)
	}
	// The window moves on.
	clock.add(11 * time.Minute)
	if _, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: tm1, To: "tm2", Body: body}); err != nil {
		t.Fatalf("tm1 after the window: %v", err)
	}
	// Turned off: no quota.
	g := newFixture(t, team.Config{Mailbox: mailbox.MailboxConfig{MaxBytes: 4 << 20}, SendQuotaShare: -1})
	g.create(t, "beta", "L", testPolicy(), "tm1", "tm2")
	for i := range 20 {
		if _, err := g.svc.Send(ctx, teamapi.SendRequest{Actor: actorOf("beta", "tm1"), To: "tm2", Body: body}); err != nil {
			t.Fatalf("send %d with the quota off: %v", i, err)
		}
	}
}
