package team_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus/bustest"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/lead"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
	"github.com/teambus/teambus/teammate"
)

// The lead and teammate sidecars over team.SidecarAPI and a real server:
// the integration proof of their unit tests on an in-memory team (lead/,
// teammate/), moved here so that those run in milliseconds.

// SidecarAPI is the team each sidecar runs on.
var (
	_ lead.Team     = (*team.SidecarAPI)(nil)
	_ teammate.Team = (*team.SidecarAPI)(nil)
)

// tlog logs through t until the test ends.
type tlog struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *tlog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func newLog(t *testing.T) *slog.Logger {
	w := &tlog{t: t}
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	return slog.New(slog.NewTextHandler(w, nil))
}

// fastPolicy is a valid policy with short timeouts and the default
// (long) ack-wait, so mail not given back waits minutes.
func fastPolicy() teambus.Policy {
	pol := teambus.DefaultPolicy()
	pol.Heartbeat = 200 * time.Millisecond
	pol.MemberTimeout = 2 * time.Second
	pol.ProbeTimeout = time.Second
	pol.LeadTimeout = time.Second
	pol.ZombieMax = time.Minute
	pol.CheckpointEvery = time.Second
	return pol
}

// runningTeammate is a sidecar run in a goroutine.
type runningTeammate struct {
	cancel context.CancelFunc
	done   chan struct{}
	out    teammate.Outcome
	err    error
}

func startTeammate(t *testing.T, svc *team.Service, cfg teammate.Config) *runningTeammate {
	t.Helper()
	cfg.Logger = newLog(t)
	sc, err := teammate.New(svc.SidecarAPI(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningTeammate{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.out, r.err = sc.Run(ctx)
	}()
	t.Cleanup(r.stop)
	return r
}

func (r *runningTeammate) stop() {
	r.cancel()
	<-r.done
}

func (r *runningTeammate) wait(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(d):
		t.Fatalf("sidecar still running after %s", d)
	}
}

func registeredAs(t *testing.T, svc *team.Service, teamID, member, session string) {
	t.Helper()
	bustest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		m, _, err := svc.Store().Member(context.Background(), teamID, member)
		if err != nil || m.Session != session || m.Status == teambus.MemberSpawned {
			return fmt.Errorf("%s not registered as %s: %v", member, session, err)
		}
		return nil
	})
}

// TestSidecarAPI_TeammateFencedLeavesSuccessorMail: a teammate sidecar replaced by a
// new incarnation stops at once and does not take the lead's status check
// meant for the successor: the check stays in the member's sidecar inbox,
// readable at once, not after ack-wait (issue 12 item 3).
func TestSidecarAPI_TeammateFencedLeavesSuccessorMail(t *testing.T) {
	node := nodetest.NewBareServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	svc := team.New(nodetest.Connect(t, node).JS, team.Config{})
	if _, err := svc.CreateTeam(ctx, "fe", "", []team.MemberSpec{{ID: "tm1"}}, fastPolicy()); err != nil {
		t.Fatal(err)
	}
	old := startTeammate(t, team.New(nodetest.Connect(t, node).JS, team.Config{}), teammate.Config{Team: "fe", Member: "tm1", Session: "s-old"})
	registeredAs(t, svc, "fe", "tm1", "s-old")

	// A new incarnation registers (a hook or `join`), and the lead asks it
	// for its status at once.
	if _, err := svc.Join(ctx, "fe", "tm1", "s-new"); err != nil {
		t.Fatal(err)
	}
	res, err := svc.Notify(ctx, "fe", teambus.Lead, 0, "tm1", teambus.MsgStatusCheck, "check-1", "status?", nil)
	if err != nil {
		t.Fatal(err)
	}
	old.wait(t, 10*time.Second)
	if old.out != teammate.OutcomeFenced || !errors.Is(old.err, teambus.ErrFenced) {
		t.Fatalf("old sidecar stopped with %s, %v: want fenced", old.out, old.err)
	}
	// The successor's sidecar reads the check now.
	msgs, err := svc.Mailbox("fe").Inbox(ctx, "tm1", mailbox.InboxOptions{Sidecar: true, Wait: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0].Seq != res.Seq {
		t.Fatalf("successor's sidecar inbox = %+v, want the status check seq %d", msgs, res.Seq)
	}
}

// zombieTeammate starts a sidecar for tm1 in session and waits until it is in
// zombie mode (there is no lead).
func zombieTeammate(t *testing.T, node *node.Node, svc *team.Service, teamID, session string) *runningTeammate {
	t.Helper()
	r := startTeammate(t, team.New(nodetest.Connect(t, node).JS, team.Config{}), teammate.Config{Team: teamID, Member: "tm1", Session: session})
	bustest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		m, _, err := svc.Store().Member(context.Background(), teamID, "tm1")
		if err != nil || m.Session != session || m.Status != teambus.MemberZombie {
			return fmt.Errorf("tm1 not a zombie in %s: %+v %v", session, m, err)
		}
		return nil
	})
	return r
}

// sendHeld sends body from tm1 in session and checks it is held with no
// seq yet.
func sendHeld(t *testing.T, svc *team.Service, teamID, session, body string) {
	t.Helper()
	res, err := svc.Send(context.Background(), teamapi.SendRequest{Actor: team.Actor{Team: teamID, Member: "tm1", Session: session}, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Held || res.Seq != 0 {
		t.Fatalf("send %q from a zombie = %+v, want held with no seq yet", body, res)
	}
}

// leadGets waits until the lead's inbox holds bodies from tm1, in order,
// each released with a held_since mark.
func leadGets(t *testing.T, svc *team.Service, teamID string, bodies ...string) {
	t.Helper()
	bustest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		msgs, err := svc.Mailbox(teamID).Inbox(context.Background(), teambus.Lead, mailbox.InboxOptions{})
		if err != nil {
			return err
		}
		var got []string
		for _, m := range msgs {
			if m.From != "tm1" || m.Type == teambus.MsgSystem {
				continue
			}
			if m.HeldSince == nil {
				return fmt.Errorf("released mail %q (seq %d) has no held_since", m.Body, m.Seq)
			}
			got = append(got, m.Body)
		}
		if strings.Join(got, ",") != strings.Join(bodies, ",") {
			return fmt.Errorf("lead inbox from tm1 = %q, want %q", got, bodies)
		}
		return nil
	})
}

// TestSidecarAPI_HeldMailNeverStranded: mail held in zombie mode is released
// by whoever comes next: the member's next incarnation after a shutdown,
// the sidecar itself at zombie-max (marked held_since), or the lead when
// the sidecar is gone (issue 12 item 1).
func TestSidecarAPI_HeldMailNeverStranded(t *testing.T) {
	node := nodetest.NewBareServer(t)
	ctx := context.Background()
	svc := team.New(nodetest.Connect(t, node).JS, team.Config{})
	create := func(id string, pol teambus.Policy) {
		t.Helper()
		if _, err := svc.CreateTeam(ctx, id, "", []team.MemberSpec{{ID: "tm1"}}, pol); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("next incarnation", func(t *testing.T) {
		create("nx", fastPolicy())
		old := zombieTeammate(t, node, svc, "nx", "s1")
		sendHeld(t, svc, "nx", "s1", "h1")
		sendHeld(t, svc, "nx", "s1", "h2")
		old.stop()
		startTeammate(t, team.New(nodetest.Connect(t, node).JS, team.Config{}), teammate.Config{Team: "nx", Member: "tm1", Session: "s2"})
		leadGets(t, svc, "nx", "h1", "h2")
	})

	t.Run("zombie-max", func(t *testing.T) {
		pol := fastPolicy()
		pol.ZombieMax = 2 * time.Second
		create("zm", pol)
		r := zombieTeammate(t, node, svc, "zm", "s1")
		sendHeld(t, svc, "zm", "s1", "h1")
		r.wait(t, 10*time.Second)
		if r.out != teammate.OutcomeZombieMax {
			t.Fatalf("sidecar stopped with %s, %v: want zombie_max", r.out, r.err)
		}
		leadGets(t, svc, "zm", "h1")
	})

	t.Run("lead", func(t *testing.T) {
		create("ld", fastPolicy())
		r := zombieTeammate(t, node, svc, "ld", "s1")
		sendHeld(t, svc, "ld", "s1", "h1")
		r.stop()
		ld, err := lead.New(team.New(nodetest.Connect(t, node).JS, team.Config{}).SidecarAPI(), lead.Config{Team: "ld", Session: "L1", Logger: newLog(t)})
		if err != nil {
			t.Fatal(err)
		}
		lctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- ld.Run(lctx) }()
		defer func() { stop(); <-done }()
		leadGets(t, svc, "ld", "h1")
		bustest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
			if m, _, err := svc.Store().Member(ctx, "ld", "tm1"); err != nil || m.HeldSince != nil {
				return fmt.Errorf("tm1 = %+v, %v: want the held mark cleared", m, err)
			}
			return nil
		})
	})
}

// TestSidecarAPI_LeadProbeResent: the lead's status check is sent again until it
// is answered. The first check is taken by someone else (a replaced
// sidecar that acks it); the member answers the second, and is not
// declared crashed (issue 12 item 5).
func TestSidecarAPI_LeadProbeResent(t *testing.T) {
	node := nodetest.NewBareServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pol := teambus.DefaultPolicy()
	pol.Heartbeat = 200 * time.Millisecond
	pol.MemberTimeout = 5 * time.Second
	pol.ProbeTimeout = 4 * time.Second // room to resend (every probe-timeout/4)
	pol.LeadTimeout = 2 * time.Second
	svc := team.New(nodetest.Connect(t, node).JS, team.Config{})
	if _, err := svc.CreateTeam(ctx, "pr", "", []team.MemberSpec{{ID: "tm1"}}, pol); err != nil {
		t.Fatal(err)
	}
	m, err := svc.Join(ctx, "pr", "tm1", "s-tm1")
	if err != nil {
		t.Fatal(err)
	}
	log := newLog(t)
	ld, err := lead.New(team.New(nodetest.Connect(t, node).JS, team.Config{}).SidecarAPI(), lead.Config{Team: "pr", Session: "L1", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	lctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ld.Run(lctx) }()
	defer func() { stop(); <-done }()

	// The member never beats: the lead probes it after member-timeout.
	checks := func() []teambus.Message {
		msgs, err := svc.Mailbox("pr").Inbox(ctx, "tm1", mailbox.InboxOptions{Sidecar: true, Ack: true, Wait: 200 * time.Millisecond})
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

// TestSidecarAPI_LeadCleanStopShowsOffline: issue 12 item 11: a lead
// sidecar stopped cleanly shows offline at once, not online until its
// heartbeat expires.
func TestSidecarAPI_LeadCleanStopShowsOffline(t *testing.T) {
	// The team service writes the heartbeat keys from the beats.
	n := nodetest.NewServer(t)
	svc := team.New(nodetest.Connect(t, n).JS, team.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pol := teambus.DefaultPolicy()
	if _, err := svc.CreateTeam(ctx, "stop", "L", []team.MemberSpec{{ID: "tm1"}}, pol); err != nil {
		t.Fatal(err)
	}
	sc, err := lead.New(svc.SidecarAPI(), lead.Config{Team: "stop", Session: "L"})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- sc.Run(rctx) }()
	bustest.CheckFor(t, pol.LeadTimeout, 10*time.Millisecond, func() error {
		v, err := svc.Show(ctx, "stop")
		if err != nil {
			return err
		}
		if !v.Lead.Online {
			return fmt.Errorf("lead not online yet")
		}
		return nil
	})
	stop()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	v, err := svc.Show(ctx, "stop")
	if err != nil {
		t.Fatal(err)
	}
	if v.Lead.Online {
		t.Errorf("lead online after a clean stop: %+v", v.Lead)
	}
}

// TestSidecarAPI_Watches: the typed watches the sidecars run on. A
// heartbeat written is an alive event with its epoch, an expired key a
// silent one; a deleted key (a clean stop) is no event. The state watch
// gives the team and the member's record, then the member's changes.
func TestSidecarAPI_Watches(t *testing.T) {
	node := nodetest.NewBareServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc := team.New(nodetest.Connect(t, node).JS, team.Config{})
	if _, err := svc.CreateTeam(ctx, "wa", "", []team.MemberSpec{{ID: "tm1"}}, fastPolicy()); err != nil {
		t.Fatal(err)
	}
	api := svc.SidecarAPI()
	beats, err := api.WatchBeats(ctx, "wa", false)
	if err != nil {
		t.Fatal(err)
	}
	// A teammate's watch of the lead alone is sent the lead's beats only.
	leadBeats, err := api.WatchBeats(ctx, "wa", true, teambus.Lead)
	if err != nil {
		t.Fatal(err)
	}
	next := func() teambus.BeatEvent {
		t.Helper()
		select {
		case ev := <-beats:
			return ev
		case <-ctx.Done():
			t.Fatal("no heartbeat event")
			return teambus.BeatEvent{}
		}
	}
	// The keys are written as the team service writes them (the service
	// runs on no bare server).
	if _, err := svc.Store().Beat(ctx, "wa", kv.MemberKey("tm1"), &teambus.Heartbeat{Member: "tm1", Session: "s1", Epoch: 3}, time.Second, 0); err != nil {
		t.Fatal(err)
	}
	if ev := next(); ev != (teambus.BeatEvent{Member: "tm1", Alive: true, Epoch: 3}) {
		t.Fatalf("event %+v, want tm1 alive at epoch 3", ev)
	}
	rev, err := svc.Store().Beat(ctx, "wa", kv.LeadKey, &teambus.Heartbeat{Member: teambus.Lead, Session: "L1", Epoch: 1}, time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(); ev != (teambus.BeatEvent{Member: teambus.Lead, Alive: true, Epoch: 1}) {
		t.Fatalf("event %+v, want the lead alive at epoch 1", ev)
	}
	select {
	case ev := <-leadBeats:
		if ev != (teambus.BeatEvent{Member: teambus.Lead, Alive: true, Epoch: 1}) {
			t.Fatalf("lead watch: event %+v, want the lead alive at epoch 1 (tm1's beat is not the lead's)", ev)
		}
	case <-ctx.Done():
		t.Fatal("lead watch: no event")
	}
	if err := svc.Store().StopBeatAt(ctx, "wa", kv.LeadKey, rev); err != nil {
		t.Fatal(err)
	}
	// The lead's delete is skipped: the next event is tm1's expiry.
	if ev := next(); ev != (teambus.BeatEvent{Member: "tm1"}) {
		t.Fatalf("event %+v, want tm1 expired", ev)
	}
	select {
	case ev := <-leadBeats:
		t.Fatalf("lead watch: event %+v after the lead's clean stop, want none (tm1's expiry is not the lead's)", ev)
	default:
	}
	if _, err := api.WatchBeats(ctx, "wa", true, "tm1", teambus.Lead); !errors.Is(err, teambus.ErrInvalid) {
		t.Fatalf("watch of two members = %v, want refused", err)
	}

	changes, err := api.WatchState(ctx, "wa", "tm1")
	if err != nil {
		t.Fatal(err)
	}
	var sawTeam, sawMember bool
	for !sawTeam || !sawMember {
		select {
		case ch := <-changes:
			sawTeam = sawTeam || (ch.Team != nil && ch.Team.ID == "wa")
			sawMember = sawMember || (ch.Member != nil && ch.Member.ID == "tm1")
		case <-ctx.Done():
			t.Fatalf("state watch: team %v member %v", sawTeam, sawMember)
		}
	}
	m, err := svc.Join(ctx, "wa", "tm1", "s2")
	if err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case ch := <-changes:
			if ch.Member != nil && ch.Member.Epoch == m.Epoch && ch.Member.Session == "s2" {
				return
			}
		case <-ctx.Done():
			t.Fatal("no change of tm1 after a join")
		}
	}
}
