package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/team"
)

// settle waits for a process to reach a steady state and returns its RSS:
// the largest of a few readings over d.
func settle(ctx context.Context, pid int, d time.Duration) (float64, error) {
	var best float64
	end := time.Now().Add(d)
	for {
		v, err := rssMiB(pid)
		if err != nil {
			return 0, err
		}
		best = max(best, v)
		if time.Now().After(end) {
			return best, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// split describes the parts of a process's RSS.
func split(pid int) string {
	anon, file := rssSplit(pid)
	return fmt.Sprintf("RssAnon %.1f MiB (its own heap and stacks) + RssFile %.1f MiB (pages of the teambus binary, shared by every teambus process)", anon, file)
}

// memoryAndScale runs `teambus bus start` as a child process and reads its
// memory idle and with teams, a sidecar's memory, and the node's CPU while
// members heartbeat.
func (r *run) memoryAndScale(ctx context.Context) error {
	dir := filepath.Join(r.dir, "node-child")
	var procs children
	defer procs.killAll()
	nodeProc, err := start(r.logs, "bus", r.cfg.Exe, "bus", "start", "--dir", dir, "--listen", "127.0.0.1:0", "--max-store", "1TiB", "--log-level", "warn")
	if err != nil {
		return err
	}
	procs.add(nodeProc)
	var disc *bus.Discovery
	if err := poll(ctx, 20*time.Second, func() (bool, error) {
		if nodeProc.exited() {
			return false, fmt.Errorf("bus node exited: %s", nodeProc.output())
		}
		d, err := bus.ReadDiscovery(dir)
		if err != nil {
			return false, nil
		}
		disc = d
		return d.PID == nodeProc.pid(), nil
	}); err != nil {
		return fmt.Errorf("start bus node: %w", err)
	}
	_ = disc
	settleFor := 2 * time.Second
	if r.cfg.Quick {
		settleFor = time.Second
	}
	doMem := r.cfg.runs("memory")
	if doMem {
		idle, err := settle(ctx, nodeProc.pid(), settleFor)
		if err != nil {
			return err
		}
		r.res.add(Row{Group: "memory", Key: "tb.mem.bus.idle", Name: "bus node idle (teambus bus start, child process)", Value: idle, Unit: UnitMiB, N: 1,
			Note: "VmRSS from /proc/PID/status, the largest of readings over " + settleFor.String() + "; " + split(nodeProc.pid())})
		r.cfg.Progress("  bus idle: %.1f MiB", idle)
	}

	conn, err := bus.Connect(ctx, bus.ConnectConfig{Dir: dir, Name: "teambus bench", Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	defer conn.Close()
	// Small per-team limits, as a node with many teams would use.
	svc := team.New(conn.JS, team.Config{Mailbox: bus.MailboxConfig{MaxBytes: 64 << 20}, KV: kv.Config{MaxBytes: 16 << 20}})
	pol := teambus.DefaultPolicy()
	pol.Heartbeat = time.Second
	pol.MemberTimeout = 10 * time.Second
	pol.ProbeTimeout = 5 * time.Second
	teams := r.cfg.MemoryTeams
	t0 := time.Now()
	if err := parallel(ctx, teams, func(i int) error {
		var specs []team.MemberSpec
		for j := 0; j < 10; j++ {
			specs = append(specs, team.MemberSpec{ID: fmt.Sprintf("m%d", j)})
		}
		_, err := svc.CreateTeam(ctx, fmt.Sprintf("team%03d", i), "", specs, pol)
		return err
	}); err != nil {
		return fmt.Errorf("create teams: %w", err)
	}
	r.cfg.Progress("  created %d teams of 10 members in %s", teams, time.Since(t0).Round(100*time.Millisecond))
	if doMem {
		withTeams, err := settle(ctx, nodeProc.pid(), settleFor)
		if err != nil {
			return err
		}
		r.res.add(Row{Group: "memory", Key: "tb.mem.bus.teams", Name: fmt.Sprintf("bus node with %d teams of 10 members (idle)", teams), Value: withTeams, Unit: UnitMiB, N: 1,
			Note: "each team: a mailbox stream, an event stream, a state and a heartbeat bucket, 22 durable consumers; " + split(nodeProc.pid())})
		r.cfg.Progress("  bus with %d teams: %.1f MiB", teams, withTeams)

		// One lead and one teammate sidecar on team000, as processes.
		nodeDir := dir
		args := func(a ...string) []string { return append(a, "--dir", nodeDir, "--log-level", "warn") }
		leadProc, err := start(r.logs, "mem-lead", r.cfg.Exe, args("lead", "--team", "team000", "--session", "L")...)
		if err != nil {
			return err
		}
		procs.add(leadProc)
		tmProc, err := start(r.logs, "mem-teammate", r.cfg.Exe, args("teammate", "--team", "team000", "--member", "m0", "--session", "S")...)
		if err != nil {
			return err
		}
		procs.add(tmProc)
		if err := poll(ctx, 15*time.Second, func() (bool, error) {
			if tmProc.exited() || leadProc.exited() {
				return false, fmt.Errorf("sidecar exited: %s%s", tmProc.output(), leadProc.output())
			}
			m, _, err := svc.Store().Member(ctx, "team000", "m0")
			return err == nil && m.Session == "S" && m.Status != teambus.MemberSpawned, nil
		}); err != nil {
			return fmt.Errorf("sidecars: %w", err)
		}
		tm, err := settle(ctx, tmProc.pid(), 2*settleFor)
		if err != nil {
			return err
		}
		ld, err := rssMiB(leadProc.pid())
		if err != nil {
			return err
		}
		r.res.add(Row{Group: "memory", Key: "tb.mem.teammate", Name: "teammate sidecar (teambus teammate, child process)", Value: tm, Unit: UnitMiB, N: 1,
			Note: "heartbeating, watching the lead and the team, consuming its control mail; " + split(tmProc.pid())})
		r.res.add(Row{Group: "memory", Key: "tb.mem.lead", Name: "lead sidecar (teambus lead, child process)", Value: ld, Unit: UnitMiB, N: 1, Note: split(leadProc.pid())})
		r.cfg.Progress("  teammate sidecar: %.1f MiB, lead sidecar %.1f MiB", tm, ld)
		tmProc.stop()
		leadProc.stop()
	}
	if !r.cfg.runs("scale") {
		return nil
	}
	return r.scale(ctx, nodeProc, dir)
}

// scale heartbeats ScaleMembers members every ScaleInterval with
// kv.Store.Beat, each on its own connection as its sidecar would be, and
// reads the node's CPU time over ScaleWindow.
func (r *run) scale(ctx context.Context, nodeProc *child, dir string) error {
	n, every, window := r.cfg.ScaleMembers, r.cfg.ScaleInterval, r.cfg.ScaleWindow
	stores := make([]*kv.Store, n)
	for i := range stores {
		c, err := bus.Connect(ctx, bus.ConnectConfig{Dir: dir, Name: "teambus bench member", Timeout: 30 * time.Second})
		if err != nil {
			return fmt.Errorf("connection %d: %w", i, err)
		}
		defer c.Close()
		stores[i] = kv.New(c.JS, kv.Config{})
	}
	bctx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		mu   sync.Mutex
		lat  []time.Duration
		errs []error
		wg   sync.WaitGroup
	)
	measuring := make(chan struct{})
	for i := 0; i < n; i++ {
		teamID, member, store := fmt.Sprintf("team%03d", i/10), fmt.Sprintf("m%d", i%10), stores[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			hb := &kv.Heartbeat{Member: member, Session: "S" + member, Epoch: 1, Status: teambus.MemberInProgress}
			var rev uint64
			// Spread the members over the interval, as independent
			// sidecars are.
			next := time.Now().Add(rand.N(every))
			for {
				select {
				case <-bctx.Done():
					return
				case <-time.After(time.Until(next)):
				}
				next = next.Add(every)
				t0 := time.Now()
				hb.TS = time.Time{}
				nrev, err := store.Beat(bctx, teamID, kv.MemberKey(member), hb, 10*time.Second, rev)
				d := time.Since(t0)
				if err != nil {
					if bctx.Err() != nil {
						return
					}
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					rev = 0
					continue
				}
				rev = nrev
				select {
				case <-measuring:
					mu.Lock()
					lat = append(lat, d)
					mu.Unlock()
				default:
				}
			}
		}()
	}
	// Warm up for two intervals, then measure.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(2 * every):
	}
	pid := nodeProc.pid()
	c0, err := cpuTime(pid)
	if err != nil {
		return err
	}
	self0, _ := cpuTime(0)
	t0 := time.Now()
	close(measuring)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(window):
	}
	c1, err := cpuTime(pid)
	if err != nil {
		return err
	}
	self1, _ := cpuTime(0)
	elapsed := time.Since(t0)
	stop()
	wg.Wait()
	rss, _ := rssMiB(pid)
	mu.Lock()
	defer mu.Unlock()
	if len(errs) > n/10 {
		return fmt.Errorf("%d heartbeats failed, first: %w", len(errs), errors.Join(errs[0]))
	}
	share := 100 * (c1 - c0).Seconds() / elapsed.Seconds()
	s := sample{n: len(lat), lat: lat}
	r.res.add(Row{Group: "scale", Key: "tb.scale.cpu", Name: fmt.Sprintf("bus node CPU, %d members heartbeating every %s (kv.Store.Beat, sync always)", n, every),
		Value: share, Unit: UnitPct, P50: ms(s.pct(0.5)), P99: ms(s.pct(0.99)), N: s.n,
		Note: fmt.Sprintf("utime+stime of the node process from /proc/PID/stat over %s; p50/p99 are the heartbeat round trips; %.0f beats/s; node RSS %.1f MiB; the heartbeating bench process used %.0f%% of a core",
			window, float64(s.n)/elapsed.Seconds(), rss, 100*(self1-self0).Seconds()/elapsed.Seconds())})
	r.cfg.Progress("  %d heartbeating members: node CPU %.1f%% of a core", n, share)
	return nil
}
