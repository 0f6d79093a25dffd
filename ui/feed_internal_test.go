package ui

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus/bustest"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

func newFeedServer(t *testing.T, cfg Config) (*Server, *team.Service) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	n := nodetest.NewBareServer(t)
	conn := nodetest.Connect(t, n)
	svc := team.New(conn.JS, team.Config{})
	if _, err := svc.CreateTeam(ctx, "alpha", "L", []team.MemberSpec{{ID: "tm1"}}, teambus.DefaultPolicy()); err != nil {
		t.Fatalf("create team: %v", err)
	}
	cfg.Service, cfg.Token = svc, "0123456789abcdef0123456789abcdef"
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, svc
}

func sendN(t *testing.T, svc *team.Service, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := 0; i < n; i++ {
		if _, err := svc.Send(ctx, teamapi.SendRequest{Actor: team.Actor{Team: "alpha", Member: "tm1"}, To: teambus.Lead, Type: teambus.MsgInfo, Body: fmt.Sprintf("m%d", i)}); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
}

// A browser that does not read is dropped once its queue is full; the
// others go on, and the feed's backlog stays at its bound however much
// mail passes.
func TestFeed_DropsSlowBrowserAndBoundsBacklog(t *testing.T) {
	s, svc := newFeedServer(t, Config{ClientBuffer: 4, MailBacklog: 5, EventBacklog: 3})
	f, slow, _, err := s.subscribe("alpha")
	if err != nil {
		t.Fatal(err)
	}
	defer s.unsubscribe(f, slow)
	// A reader that keeps up.
	_, fast, _, err := s.subscribe("alpha")
	if err != nil {
		t.Fatal(err)
	}
	defer s.unsubscribe(f, fast)
	got := 0
	stop := make(chan struct{})
	defer close(stop)
	counted := make(chan int, 1)
	go func() {
		for {
			select {
			case fr := <-fast.ch:
				if len(fr) > 11 && string(fr[:11]) == "event: mail" {
					got++
					select {
					case <-counted:
					default:
					}
					counted <- got
				}
			case <-fast.gone:
				return
			case <-stop:
				return
			}
		}
	}()
	sendN(t, svc, 20)
	select {
	case <-slow.gone:
	case <-time.After(30 * time.Second):
		t.Fatalf("the slow browser was not dropped")
	}
	bustest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		select {
		case n := <-counted:
			counted <- n
			if n == 20 {
				return nil
			}
			return fmt.Errorf("fast browser got %d of 20 messages", n)
		default:
			return fmt.Errorf("fast browser got nothing yet")
		}
	})
	for i := 0; i < 6; i++ {
		svc.LogEvent(context.Background(), "alpha", "test.event", "", map[string]int{"i": i})
	}
	bustest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		mail, events := f.mail.items(), f.events.items()
		if len(mail) != 5 || len(events) != 3 || !strings.Contains(string(events[2]), `"i":5`) {
			return fmt.Errorf("backlog: %d mail, %d events, want the last 5 and 3", len(mail), len(events))
		}
		return nil
	})
	// A browser that joins now gets the bounded backlog and then live mail.
	_, late, backlog, err := s.subscribe("alpha")
	if err != nil {
		t.Fatal(err)
	}
	defer s.unsubscribe(f, late)
	if len(backlog) != 1+5+3 {
		t.Errorf("late backlog: %d frames, want state + 5 mail + 3 events", len(backlog))
	}
}

func TestFeed_StopsWithLastBrowser(t *testing.T) {
	s, _ := newFeedServer(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	svc := s.cfg.Service
	streams := []string{svc.Mailbox("alpha").Stream(), svc.Events("alpha").Stream(), "KV_TBS_alpha", "KV_TBH_alpha"}
	if err := svc.Events("alpha").Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	consumers := func() (map[string]int, error) {
		out := map[string]int{}
		for _, name := range streams {
			st, err := svc.Store().JetStream().Stream(ctx, name)
			if err != nil {
				return nil, err
			}
			out[name] = st.CachedInfo().State.Consumers
		}
		return out, nil
	}
	before, err := consumers() // the members' durable inboxes
	if err != nil {
		t.Fatal(err)
	}
	f, c1, _, err := s.subscribe("alpha")
	if err != nil {
		t.Fatal(err)
	}
	_, c2, _, err := s.subscribe("alpha")
	if err != nil {
		t.Fatal(err)
	}
	// While a browser watches, the feed holds consumers on the team's
	// streams; after the last leaves, none is left behind.
	bustest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		n, err := consumers()
		if err != nil {
			return err
		}
		for _, name := range streams {
			if n[name] <= before[name] {
				return fmt.Errorf("no consumer on %s yet: %v", name, n)
			}
		}
		return nil
	})
	s.unsubscribe(f, c1)
	if teams, browsers := s.Feeds(); teams != 1 || browsers != 1 {
		t.Errorf("after one left: %d teams, %d browsers", teams, browsers)
	}
	s.unsubscribe(f, c2)
	if teams, browsers := s.Feeds(); teams != 0 || browsers != 0 {
		t.Errorf("after both left: %d teams, %d browsers", teams, browsers)
	}
	// Close waits for the feed's goroutines: watches and consumers are gone.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	bustest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		n, err := consumers()
		if err != nil {
			return err
		}
		for _, name := range streams {
			if n[name] != before[name] {
				return fmt.Errorf("consumers left: %v, before %v", n, before)
			}
		}
		return nil
	})
	if _, _, _, err := s.subscribe("alpha"); err == nil {
		t.Errorf("subscribe after Close: got nil error")
	}
}
