package lead_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/bus/bustest"
	"github.com/teambus/teambus/lead"
	"github.com/teambus/teambus/team"
)

type tlog struct{ t *testing.T }

func (w tlog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestSidecar_ProbeResent: the lead's status check is sent again until it
// is answered. The first check is taken by someone else (a replaced
// sidecar that acks it); the member answers the second, and is not
// declared crashed (issue 12 item 5).
func TestSidecar_ProbeResent(t *testing.T) {
	node := bustest.NewServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pol := teambus.DefaultPolicy()
	pol.Heartbeat = 200 * time.Millisecond
	pol.MemberTimeout = 5 * time.Second
	pol.ProbeTimeout = 4 * time.Second // room to resend (every probe-timeout/4)
	pol.LeadTimeout = 2 * time.Second
	svc := team.New(bustest.Connect(t, node).JS, team.Config{})
	if _, err := svc.CreateTeam(ctx, "pr", "", []team.MemberSpec{{ID: "tm1"}}, pol); err != nil {
		t.Fatal(err)
	}
	m, err := svc.Join(ctx, "pr", "tm1", "s-tm1")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(tlog{t}, nil))
	ld, err := lead.New(team.New(bustest.Connect(t, node).JS, team.Config{}).SidecarAPI(), lead.Config{Team: "pr", Session: "L1", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	lctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ld.Run(lctx) }()
	defer func() { stop(); <-done }()

	// The member never beats: the lead probes it after member-timeout.
	checks := func() []teambus.Message {
		msgs, err := svc.Mailbox("pr").Inbox(ctx, "tm1", bus.InboxOptions{Sidecar: true, Ack: true, Wait: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		var out []teambus.Message
		for _, msg := range msgs {
			if msg.Type == teambus.MsgStatusCheck {
				out = append(out, msg)
			}
		}
		return out
	}
	var first teambus.Message
	bustest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if got := checks(); len(got) > 0 {
			first = got[0]
			return nil
		}
		return fmt.Errorf("no status check yet")
	})
	// The first check was swallowed; wait for it to be sent again well
	// within probe-timeout.
	var again teambus.Message
	bustest.CheckFor(t, pol.ProbeTimeout, 10*time.Millisecond, func() error {
		if got := checks(); len(got) > 0 {
			again = got[0]
			return nil
		}
		return fmt.Errorf("status check %d was not sent again", first.Seq)
	})
	if again.Seq <= first.Seq {
		t.Fatalf("resent check seq %d, first %d", again.Seq, first.Seq)
	}
	if _, err := svc.Notify(ctx, "pr", "tm1", m.Epoch, teambus.Lead, teambus.MsgStatus, fmt.Sprintf("status/%d", again.Seq), "tm1 alive: idle", map[string]any{"reply_to": again.Seq}); err != nil {
		t.Fatal(err)
	}
	bustest.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		tm, _, err := svc.Store().Team(ctx, "pr")
		if err != nil {
			return err
		}
		if _, open := tm.Probes["tm1"]; open {
			return fmt.Errorf("probe of tm1 still open")
		}
		return nil
	})
	if got, _, err := svc.Store().Member(ctx, "pr", "tm1"); err != nil || got.Status == teambus.MemberCrashed {
		t.Fatalf("tm1 = %+v, %v: want not crashed after answering the resent check", got, err)
	}
}
