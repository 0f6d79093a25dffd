package faults

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/team"
)

// memberStates reads every member, tolerating a bus that is still waking
// up: ok is false when the read failed.
func memberStates(svc *team.Service, teamID string) (map[string]*teambus.Member, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	snap, err := svc.Store().Snapshot(ctx, teamID)
	if err != nil {
		return nil, false
	}
	return snap.Members, true
}

// noCrash fails the test when a member was declared crashed.
func noCrash(t *testing.T, svc *team.Service, teamID string, sides map[string]*proc) error {
	t.Helper()
	ms, ok := memberStates(svc, teamID)
	if !ok {
		return nil // the bus is not answering yet: nothing was decided either
	}
	for id, m := range ms {
		if m.Status == teambus.MemberCrashed || m.Status == teambus.MemberPaused || m.CrashCount != 0 {
			return fmt.Errorf("member %s declared crashed (status %s, crashes %d)", id, m.Status, m.CrashCount)
		}
	}
	for name, p := range sides {
		if p.exited() {
			return fmt.Errorf("sidecar %s exited: %v", name, p.err)
		}
	}
	return nil
}

// S5: SIGSTOP of the bus for longer than member-timeout, then SIGCONT. No
// member is declared crashed because the bus paused: the heartbeat keys may
// expire on the server's clock when it wakes up, but the probes that follow
// are answered. A probe already in flight when the bus stops gets a full
// probe-timeout of reachable bus to be answered.
func TestS5_BusSIGSTOP(t *testing.T) {
	node := newNodeProc(t, t.TempDir())
	node.start()
	admin := connectTCP(t, node.URL(), "admin")
	s := newSidecars(t, node.dir, admin)
	ctx := context.Background()
	pol := fastPolicy()
	members := []string{"tm1", "tm2"}
	if _, err := s.svc.CreateTeam(ctx, "s5", "", []team.MemberSpec{{ID: "tm1"}, {ID: "tm2"}}, pol); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if _, err := s.svc.AddTask(ctx, "s5", team.TaskSpec{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	sides := map[string]*proc{"lead": s.lead("s5", "L1")}
	for i, m := range members {
		_, sides[m] = s.teammate("s5", m, "s-"+m)
		if _, err := s.svc.Claim(ctx, team.Actor{Team: "s5", Member: m, Session: "s-" + m}, []string{"a", "b"}[i]); err != nil {
			t.Fatal(err)
		}
	}
	watch := pol.MemberTimeout + pol.ProbeTimeout + 3*time.Second

	// Plain pauses of the bus, longer than member-timeout.
	pauses := tier([]time.Duration{pol.MemberTimeout + 2*time.Second}, []time.Duration{2 * time.Second, pol.MemberTimeout + 2*time.Second, 3 * pol.MemberTimeout, 30 * time.Second})
	for _, d := range pauses {
		node.p.signal(syscall.SIGSTOP)
		time.Sleep(d)
		node.p.signal(syscall.SIGCONT)
		stays(t, watch, fmt.Sprintf("after a %s bus pause", d), func() error { return noCrash(t, s.svc, "s5", sides) })
		// Every member's heartbeat is back.
		checkFor(t, 30*time.Second, func() error {
			hbs, err := s.svc.Store().Heartbeats(ctx, "s5")
			if err != nil {
				return err
			}
			for _, m := range members {
				if _, ok := hbs[kv.MemberKey(m)]; !ok {
					return fmt.Errorf("no heartbeat of %s after the pause", m)
				}
			}
			return nil
		})
	}

	// A probe in flight when the bus stops: tm1 goes silent until the lead
	// probes it, then the bus stops, tm1 resumes, and the bus stays stopped
	// for longer than probe-timeout. tm1 answers as soon as the bus is back.
	sides["tm1"].signal(syscall.SIGSTOP)
	checkFor(t, 60*time.Second, func() error {
		tm, _, err := s.svc.Store().Team(ctx, "s5")
		if err != nil {
			return err
		}
		if _, ok := tm.Probes["tm1"]; !ok {
			return fmt.Errorf("no probe of tm1 yet")
		}
		return nil
	})
	node.p.signal(syscall.SIGSTOP)
	sides["tm1"].signal(syscall.SIGCONT)
	time.Sleep(pol.ProbeTimeout + 2*time.Second)
	node.p.signal(syscall.SIGCONT)
	stays(t, watch, "tm1 probed across a bus pause", func() error { return noCrash(t, s.svc, "s5", sides) })
	checkFor(t, 30*time.Second, func() error {
		tm, _, err := s.svc.Store().Team(ctx, "s5")
		if err != nil {
			return err
		}
		if _, ok := tm.Probes["tm1"]; ok {
			return fmt.Errorf("probe of tm1 still open")
		}
		return nil
	})
	for _, m := range members {
		if n := s.crashNotices("s5", m); n != 0 {
			t.Errorf("%d crash notices for %s", n, m)
		}
	}
	result(t, "S5", "bus paused %v (member-timeout %s, probe-timeout %s) and once with a probe in flight: 0 members declared crashed, all sidecars running, heartbeats back",
		pauses, pol.MemberTimeout, pol.ProbeTimeout)
}
