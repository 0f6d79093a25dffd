package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/team"
	memberapi "github.com/teambus/teambus/teamapi"
)

// tracker records, on this process's clock, every member status change,
// every probe the lead records, and every beat the team service receives
// (by heartbeat key), as they are delivered.
type tracker struct {
	mu     sync.Mutex
	status map[string][]statusAt
	beats  map[string][]time.Time
	probes map[string][]time.Time
	ends   map[string][]time.Time // heartbeat keys purged (expired), by key
	wake   chan struct{}
	stop   context.CancelFunc
}

type statusAt struct {
	at     time.Time
	status teambus.MemberStatus
	epoch  int64
}

// track watches the team's state and heartbeat buckets until ctx ends or
// Close is called.
func track(ctx context.Context, svc *team.Service, teamID string) (*tracker, error) {
	ctx, stop := context.WithCancel(ctx)
	t := &tracker{status: map[string][]statusAt{}, beats: map[string][]time.Time{}, probes: map[string][]time.Time{}, ends: map[string][]time.Time{}, wake: make(chan struct{}), stop: stop}
	sw, err := svc.WatchState(ctx, teamID, jetstream.UpdatesOnly())
	if err != nil {
		stop()
		return nil, err
	}
	// The beats as the team service receives them: a beat is a publish,
	// not a write (the service writes the key every half timeout).
	hb := make(chan *nats.Msg, 1024)
	hsub, err := svc.Store().JetStream().Conn().ChanSubscribe(memberapi.ServiceSubject(teamID, memberapi.VerbBeat), hb)
	if err != nil {
		sw.Stop()
		stop()
		return nil, err
	}
	hw, err := svc.WatchHeartbeats(ctx, teamID, jetstream.UpdatesOnly())
	if err != nil {
		_ = hsub.Unsubscribe()
		sw.Stop()
		stop()
		return nil, err
	}
	go func() {
		defer sw.Stop()
		defer hw.Stop()
		defer func() { _ = hsub.Unsubscribe() }()
		probing := map[string]int64{}
		for {
			select {
			case <-ctx.Done():
				return
			case e := <-sw.Updates():
				now := time.Now()
				if e == nil || e.Operation() != jetstream.KeyValuePut {
					continue
				}
				if e.Key() == "team" {
					var tm teambus.Team
					if json.Unmarshal(e.Value(), &tm) != nil {
						continue
					}
					t.note(func() {
						for id, p := range tm.Probes {
							if probing[id] != p.Epoch {
								t.probes[id] = append(t.probes[id], now)
							}
						}
						clear(probing)
						for id, p := range tm.Probes {
							probing[id] = p.Epoch
						}
					})
					continue
				}
				id, ok := strings.CutPrefix(e.Key(), "member.")
				if !ok {
					continue
				}
				var m teambus.Member
				if json.Unmarshal(e.Value(), &m) != nil {
					continue
				}
				t.note(func() { t.status[id] = append(t.status[id], statusAt{at: now, status: m.Status, epoch: m.Epoch}) })
			case e := <-hw.Updates():
				now := time.Now()
				if e == nil || e.Operation() != jetstream.KeyValuePurge {
					continue
				}
				t.note(func() { t.ends[e.Key()] = append(t.ends[e.Key()], now) })
			case m := <-hb:
				now := time.Now()
				var b memberapi.Beat
				if json.Unmarshal(m.Data, &b) != nil || b.Stop {
					continue
				}
				key := kv.LeadKey
				if b.Member != teambus.Lead {
					key = kv.MemberKey(b.Member)
				}
				t.note(func() { t.beats[key] = append(t.beats[key], now) })
			}
		}
	}()
	return t, nil
}

// Close stops watching.
func (t *tracker) Close() { t.stop() }

func (t *tracker) note(fn func()) {
	t.mu.Lock()
	fn()
	close(t.wake)
	t.wake = make(chan struct{})
	t.mu.Unlock()
}

// firstStatus is when member first had status after since.
func (t *tracker) firstStatus(member string, status teambus.MemberStatus, since time.Time) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.status[member] {
		if s.status == status && !s.at.Before(since) {
			return s.at, true
		}
	}
	return time.Time{}, false
}

// firstProbe is when the lead first recorded a probe of member after
// since.
func (t *tracker) firstProbe(member string, since time.Time) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, at := range t.probes[member] {
		if !at.Before(since) {
			return at, true
		}
	}
	return time.Time{}, false
}

// firstEnd is when heartbeat key was first purged (ended) after since.
func (t *tracker) firstEnd(key string, since time.Time) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, at := range t.ends[key] {
		if !at.Before(since) {
			return at, true
		}
	}
	return time.Time{}, false
}

// lastBeat is the last heartbeat of key seen, and how many were seen
// since.
func (t *tracker) lastBeat(key string, since time.Time) (time.Time, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	var last time.Time
	for _, b := range t.beats[key] {
		if !b.Before(since) {
			n++
		}
		last = b
	}
	return last, n
}

// wait blocks until cond holds, re-checking on every event and every
// 50 ms, up to within.
func (t *tracker) wait(ctx context.Context, within time.Duration, what string, cond func() bool) error {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		t.mu.Lock()
		wake := t.wake
		t.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("waiting for %s: not within %s", what, within)
		case <-wake:
		case <-tick.C:
		}
	}
}

// detectPolicy is the policy of the detection teams: the configured
// timeouts, everything else out of the way.
func (r *run) detectPolicy() teambus.Policy {
	p := teambus.DefaultPolicy()
	p.Heartbeat = r.cfg.Heartbeat
	p.MemberTimeout = r.cfg.MemberTimeout
	p.ProbeTimeout = r.cfg.ProbeTimeout
	p.LeadTimeout = r.cfg.LeadTimeout
	p.TakeoverAfter = r.cfg.LeadTimeout
	p.ZombieMax = time.Hour
	p.StuckTimeout = time.Hour
	p.BlockedTimeout = time.Hour
	p.CrashLimit = 1
	return p
}

// detect runs real sidecar processes against a node of this process and
// times heartbeat silence → crashed, agent exit → crashed and lead death →
// zombie.
func (r *run) detect(ctx context.Context) error {
	nd, svc, stop, err := r.teamNode(ctx, "node-detect", bus.SyncModeAlways, team.Config{})
	if err != nil {
		return err
	}
	defer stop()
	var procs children
	defer procs.killAll()
	if err := r.detectCrashes(ctx, nd, svc, &procs); err != nil {
		return err
	}
	return r.detectZombies(ctx, nd, svc, &procs)
}

// sidecarArgs are the flags every sidecar child gets.
func sidecarArgs(nd *node.Node, args ...string) []string {
	return append(args, "--dir", nd.Dir(), "--log-level", "info")
}

// startLead starts a lead sidecar child and waits until it attached.
func (r *run) startLead(ctx context.Context, nd *node.Node, svc *team.Service, procs *children, teamID, session string, force bool) (*child, error) {
	args := []string{"lead", "--team", teamID, "--session", session}
	if force {
		args = append(args, "--force")
	}
	c, err := start(r.logs, teamID+"-lead-"+session, r.cfg.Exe, sidecarArgs(nd, args...)...)
	if err != nil {
		return nil, err
	}
	procs.add(c)
	err = poll(ctx, 15*time.Second, func() (bool, error) {
		if c.exited() {
			return false, fmt.Errorf("lead sidecar exited: %s", c.output())
		}
		t, err := svc.Team(ctx, teamID)
		return err == nil && t.LeadSession == session, nil
	})
	if err != nil {
		return nil, fmt.Errorf("lead %s of %s: %w", session, teamID, err)
	}
	return c, nil
}

// startTeammate starts a teammate sidecar child (watching pid when it is
// not 0) and waits until the member registered with the session.
func (r *run) startTeammate(ctx context.Context, nd *node.Node, svc *team.Service, procs *children, teamID, member, session string, pid int) (*child, error) {
	args := []string{"teammate", "--team", teamID, "--member", member, "--session", session}
	if pid > 0 {
		args = append(args, "--pid", fmt.Sprint(pid))
	}
	c, err := start(r.logs, teamID+"-"+member+"-"+session, r.cfg.Exe, sidecarArgs(nd, args...)...)
	if err != nil {
		return nil, err
	}
	procs.add(c)
	err = poll(ctx, 15*time.Second, func() (bool, error) {
		if c.exited() {
			return false, fmt.Errorf("teammate sidecar exited: %s", c.output())
		}
		m, err := svc.Member(ctx, teamID, member)
		return err == nil && m.Session == session && m.Status != teambus.MemberSpawned, nil
	})
	if err != nil {
		return nil, fmt.Errorf("teammate %s of %s: %w", member, teamID, err)
	}
	return c, nil
}

// poll calls cond every 20 ms until it is true or fails, up to within.
func poll(ctx context.Context, within time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(within)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// batch is how many trials run at once: sidecars of one team crash
// together, as they would when a machine is overloaded.
const batch = 5

// detectCrashes measures both crash paths on one team with one lead.
func (r *run) detectCrashes(ctx context.Context, nd *node.Node, svc *team.Service, procs *children) error {
	const teamID = "det"
	trials := r.cfg.Trials
	var specs []team.MemberSpec
	for i := 0; i < trials; i++ {
		specs = append(specs, team.MemberSpec{ID: fmt.Sprintf("s%d", i)}, team.MemberSpec{ID: fmt.Sprintf("p%d", i)}, team.MemberSpec{ID: fmt.Sprintf("c%d", i)})
	}
	pol := r.detectPolicy()
	if _, err := svc.CreateTeam(ctx, teamID, "", specs, pol); err != nil {
		return err
	}
	for _, s := range specs {
		if _, err := svc.AddTask(ctx, teamID, team.TaskSpec{ID: "t-" + s.ID, Description: "work of " + s.ID}); err != nil {
			return err
		}
	}
	tr, err := track(ctx, svc, teamID)
	if err != nil {
		return err
	}
	defer tr.Close()
	leadAgent, err := start(r.logs, "det-lead-agent", "sleep", "3600")
	if err != nil {
		return err
	}
	procs.add(leadAgent)
	if _, err := r.startLead(ctx, nd, svc, procs, teamID, "L1", false); err != nil {
		return err
	}

	timeout := pol.MemberTimeout + pol.ProbeTimeout
	var silence, silenceFromStop, pidExit, connLost, connLostEnd, connLostCrash []time.Duration
	for b := 0; b < trials; b += batch {
		n := min(batch, trials-b)
		// Heartbeat silence: the sidecar process is stopped (SIGSTOP) and
		// killed after the trial; it neither beats nor answers the lead's
		// status check, and its connection stays open, so silence alone
		// tells (a killed sidecar's closed connection is the next trial).
		type victim struct {
			member string
			side   *child
			agent  *child
			killed time.Time
		}
		var vs []victim
		for i := b; i < b+n; i++ {
			member, session := fmt.Sprintf("s%d", i), fmt.Sprintf("S%d", i)
			c, err := r.startTeammate(ctx, nd, svc, procs, teamID, member, session, 0)
			if err != nil {
				return err
			}
			if _, err := svc.Claim(ctx, team.Actor{Team: teamID, Member: member, Session: session}, "t-"+member); err != nil {
				return fmt.Errorf("claim for %s: %w", member, err)
			}
			vs = append(vs, victim{member: member, side: c})
		}
		armed := time.Now()
		for _, v := range vs {
			key := kv.MemberKey(v.member)
			if err := tr.wait(ctx, 10*time.Second, "heartbeats of "+v.member, func() bool { _, n := tr.lastBeat(key, armed); return n >= 2 }); err != nil {
				return err
			}
		}
		for i := range vs {
			time.Sleep(rand.N(pol.Heartbeat))
			_ = syscall.Kill(vs[i].side.pid(), syscall.SIGSTOP)
			vs[i].killed = time.Now()
		}
		for _, v := range vs {
			var at time.Time
			err := tr.wait(ctx, timeout+15*time.Second, v.member+" crashed", func() bool {
				var ok bool
				at, ok = tr.firstStatus(v.member, teambus.MemberCrashed, armed)
				return ok
			})
			if err != nil {
				return fmt.Errorf("silence: %w", err)
			}
			last, _ := tr.lastBeat(kv.MemberKey(v.member), armed)
			silence = append(silence, at.Sub(last)-timeout)
			silenceFromStop = append(silenceFromStop, at.Sub(v.killed))
		}
		for _, v := range vs {
			v.side.kill()
		}

		// Connection lost: the sidecar, started without a pid to watch,
		// and its agent session are killed together with SIGKILL. The
		// sidecar's connection closes; the lead must start its probe at
		// once, not after member-timeout.
		vs = vs[:0]
		for i := b; i < b+n; i++ {
			member, session := fmt.Sprintf("c%d", i), fmt.Sprintf("C%d", i)
			agent, err := start(r.logs, "det-agent-"+member, "sleep", "3600")
			if err != nil {
				return err
			}
			procs.add(agent)
			c, err := r.startTeammate(ctx, nd, svc, procs, teamID, member, session, 0)
			if err != nil {
				return err
			}
			if _, err := svc.Claim(ctx, team.Actor{Team: teamID, Member: member, Session: session}, "t-"+member); err != nil {
				return fmt.Errorf("claim for %s: %w", member, err)
			}
			vs = append(vs, victim{member: member, side: c, agent: agent})
		}
		armed = time.Now()
		for _, v := range vs {
			key := kv.MemberKey(v.member)
			if err := tr.wait(ctx, 10*time.Second, "heartbeats of "+v.member, func() bool { _, n := tr.lastBeat(key, armed); return n >= 2 }); err != nil {
				return err
			}
		}
		for i := range vs {
			time.Sleep(rand.N(pol.Heartbeat))
			vs[i].killed = time.Now()
			_ = syscall.Kill(vs[i].side.pid(), syscall.SIGKILL)
			_ = syscall.Kill(vs[i].agent.pid(), syscall.SIGKILL)
		}
		for _, v := range vs {
			var at, crashed time.Time
			err := tr.wait(ctx, timeout+15*time.Second, v.member+" crashed", func() bool {
				var ok bool
				crashed, ok = tr.firstStatus(v.member, teambus.MemberCrashed, armed)
				return ok
			})
			if err != nil {
				return fmt.Errorf("connection lost: %w", err)
			}
			at, ok := tr.firstProbe(v.member, v.killed)
			if !ok {
				return fmt.Errorf("connection lost: %s crashed with no probe recorded", v.member)
			}
			connLost = append(connLost, at.Sub(v.killed))
			if end, ok := tr.firstEnd(kv.MemberKey(v.member), v.killed); ok {
				connLostEnd = append(connLostEnd, end.Sub(v.killed))
			}
			connLostCrash = append(connLostCrash, crashed.Sub(v.killed))
		}

		// Agent exit: the watched agent (a real process) is killed with
		// SIGKILL; the sidecar sees it through its pidfd.
		vs = vs[:0]
		for i := b; i < b+n; i++ {
			member, session := fmt.Sprintf("p%d", i), fmt.Sprintf("P%d", i)
			agent, err := start(r.logs, "det-agent-"+member, "sleep", "3600")
			if err != nil {
				return err
			}
			procs.add(agent)
			c, err := r.startTeammate(ctx, nd, svc, procs, teamID, member, session, agent.pid())
			if err != nil {
				return err
			}
			if _, err := svc.Claim(ctx, team.Actor{Team: teamID, Member: member, Session: session}, "t-"+member); err != nil {
				return fmt.Errorf("claim for %s: %w", member, err)
			}
			vs = append(vs, victim{member: member, side: c, agent: agent})
		}
		armed = time.Now()
		for i := range vs {
			time.Sleep(rand.N(pol.Heartbeat))
			vs[i].killed = time.Now()
			vs[i].agent.kill()
		}
		for _, v := range vs {
			var at time.Time
			err := tr.wait(ctx, 15*time.Second, v.member+" crashed", func() bool {
				var ok bool
				at, ok = tr.firstStatus(v.member, teambus.MemberCrashed, armed)
				return ok
			})
			if err != nil {
				return fmt.Errorf("agent exit: %w", err)
			}
			pidExit = append(pidExit, at.Sub(v.killed))
		}
		r.cfg.Progress("  crash trials %d/%d", b+n, trials)
	}
	r.detectRow("tb.detect.silence", "heartbeat silence → crashed (sidecar SIGSTOP; the service ends the key, status probe, no reply)", silence,
		fmt.Sprintf("timeout = member-timeout %s + probe-timeout %s, from the last beat the team service received to the member record saying crashed; from the SIGSTOP: p50 %.2f s",
			pol.MemberTimeout, pol.ProbeTimeout, secs(percentile(silenceFromStop, 0.5))))
	p50, p99 := secs(percentile(connLost, 0.5)), secs(percentile(connLost, 0.99))
	r.res.add(Row{Group: "detection", Key: "tb.detect.connlost", Name: "agent connection lost (sidecar and session kill -9 together, no pid watcher) → suspicion/probe started",
		Value: round2(p99), Unit: unitS, P50: ms(percentile(connLost, 0.5)), P99: ms(percentile(connLost, 0.99)), N: len(connLost),
		Note: fmt.Sprintf("from the kill to the lead's probe recorded in the team; the heartbeat key ended by the team service (the suspicion the lead acts on): p50 %.3f s, p99 %.3f s (%d seen); crashed after the probe: p50 %.2f s from the kill (probe-timeout %s; member-timeout %s not waited for)",
			secs(percentile(connLostEnd, 0.5)), secs(percentile(connLostEnd, 0.99)), len(connLostEnd), secs(percentile(connLostCrash, 0.5)), pol.ProbeTimeout, pol.MemberTimeout)})
	r.cfg.Progress("  connection lost → probe: p50 %.2f s, p99 %.2f s (key ended: p50 %.3f s, p99 %.3f s)", p50, p99, secs(percentile(connLostEnd, 0.5)), secs(percentile(connLostEnd, 0.99)))
	r.detectRow("tb.detect.pid", "agent pid exit → crashed (agent kill -9, sidecar watching its pid)", pidExit,
		"timeout = 0: from the kill to the member record saying crashed")
	return nil
}

// detectZombies kills the lead sidecar and times the teammates' zombie
// mode, trial after trial, a new lead taking over in between.
func (r *run) detectZombies(ctx context.Context, nd *node.Node, svc *team.Service, procs *children) error {
	const teamID = "dz"
	const members = 3
	var specs []team.MemberSpec
	for i := 0; i < members; i++ {
		specs = append(specs, team.MemberSpec{ID: fmt.Sprintf("z%d", i)})
	}
	pol := r.detectPolicy()
	if _, err := svc.CreateTeam(ctx, teamID, "", specs, pol); err != nil {
		return err
	}
	tr, err := track(ctx, svc, teamID)
	if err != nil {
		return err
	}
	defer tr.Close()
	lead, err := r.startLead(ctx, nd, svc, procs, teamID, "Z0", false)
	if err != nil {
		return err
	}
	for _, s := range specs {
		if _, err := r.startTeammate(ctx, nd, svc, procs, teamID, s.ID, "sess-"+s.ID, 0); err != nil {
			return err
		}
	}
	var lat []time.Duration
	for k := 1; k <= r.cfg.Trials; k++ {
		armed := time.Now()
		if err := tr.wait(ctx, 15*time.Second, "lead heartbeats and teammates out of zombie mode", func() bool {
			if _, n := tr.lastBeat(kv.LeadKey, armed); n < 2 {
				return false
			}
			snap, err := svc.Snapshot(ctx, teamID)
			if err != nil {
				return false
			}
			for _, s := range specs {
				if snap.Members[s.ID].Status == teambus.MemberZombie {
					return false
				}
			}
			return true
		}); err != nil {
			return err
		}
		time.Sleep(rand.N(pol.Heartbeat))
		killed := time.Now()
		lead.kill()
		for _, s := range specs {
			var at time.Time
			if err := tr.wait(ctx, pol.LeadTimeout+15*time.Second, s.ID+" zombie", func() bool {
				var ok bool
				at, ok = tr.firstStatus(s.ID, teambus.MemberZombie, killed)
				return ok
			}); err != nil {
				return err
			}
			last, _ := tr.lastBeat(kv.LeadKey, armed)
			lat = append(lat, at.Sub(last)-pol.LeadTimeout)
		}
		if lead, err = r.startLead(ctx, nd, svc, procs, teamID, fmt.Sprintf("Z%d", k), true); err != nil {
			return err
		}
		if k%5 == 0 || k == r.cfg.Trials {
			r.cfg.Progress("  zombie trials %d/%d", k, r.cfg.Trials)
		}
	}
	r.detectRow("tb.detect.zombie", fmt.Sprintf("lead death → zombie (lead sidecar kill -9; %d teammates)", members), lat,
		fmt.Sprintf("timeout = lead-timeout %s, from the last lead heartbeat stored to each teammate's record saying zombie", pol.LeadTimeout))
	return nil
}

func (r *run) detectRow(key, name string, lat []time.Duration, note string) {
	p50, p99 := secs(percentile(lat, 0.5)), secs(percentile(lat, 0.99))
	r.res.add(Row{Group: "detection", Key: key, Name: name, Value: p99, Unit: UnitOverdue, P50: p50, P99: p99, N: len(lat), Note: note})
	r.cfg.Progress("  %s: p50 +%.2f s, p99 +%.2f s", name, p50, p99)
}
