package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"time"

	"github.com/teambus/teambus/node/credstore"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/team"
	memberapi "github.com/teambus/teambus/teamapi"
)

// Units of the scale rows, printed as "%g unit".
const (
	unitS       = "s"
	unitMiBTeam = "MiB a team"
)

func round2(v float64) float64 { return math.Round(v*100) / 100 }

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
	// Default flags: the default store limit is what bounds the teams a
	// node holds (1,057 with the default per-team limits).
	nodeProc, err := start(r.logs, "bus", r.cfg.Exe, "bus", "start", "--dir", dir, "--listen", "127.0.0.1:0", "--log-level", "warn")
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
	var idle float64
	if doMem {
		idle, err = settle(ctx, nodeProc.pid(), settleFor)
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
	// The default team limits, as `teambus team create` uses them.
	svc := team.New(conn.JS, team.Config{})
	pol := teambus.DefaultPolicy()
	pol.Heartbeat = time.Second
	pol.MemberTimeout = 10 * time.Second
	pol.ProbeTimeout = 5 * time.Second
	teams, creators := r.cfg.MemoryTeams, r.cfg.MemoryCreators
	created := make([]time.Duration, teams)
	t0 := time.Now()
	if err := inParallel(ctx, creators, teams, func(i int) error {
		var specs []team.MemberSpec
		for j := 0; j < 10; j++ {
			specs = append(specs, team.MemberSpec{ID: fmt.Sprintf("m%d", j)})
		}
		c0 := time.Now()
		_, err := svc.CreateTeam(ctx, fmt.Sprintf("team%03d", i), "", specs, pol)
		created[i] = time.Since(c0)
		return err
	}); err != nil {
		return fmt.Errorf("create teams: %w", err)
	}
	took := time.Since(t0)
	cs := sample{n: teams, lat: created}
	r.res.add(Row{Group: "scale", Key: "tb.scale.teams", Name: fmt.Sprintf("%d teams of 10 members created, %d concurrent creators (team.Service.CreateTeam), node on default flags", teams, creators),
		Value: round2(took.Seconds()), Unit: unitS, P50: ms(cs.pct(0.5)), P99: ms(cs.pct(0.99)), N: teams,
		Note: "wall time of all the creates; p50/p99 are one create each"})
	r.cfg.Progress("  created %d teams of 10 members in %s", teams, took.Round(100*time.Millisecond))
	l0 := time.Now()
	list, err := start(r.logs, "team-list", r.cfg.Exe, "team", "list", "--json", "--dir", dir)
	if err != nil {
		return err
	}
	select {
	case <-list.done:
	case <-ctx.Done():
		list.kill()
		return ctx.Err()
	}
	listTook := time.Since(l0)
	if list.err != nil {
		return fmt.Errorf("team list --json: %w: %s", list.err, list.output())
	}
	r.res.add(Row{Group: "scale", Key: "tb.scale.list", Name: fmt.Sprintf("`teambus team list --json` of %d teams (one process)", teams),
		Value: round2(listTook.Seconds()), Unit: unitS, N: 1, Note: "wall time of the process, start to exit"})
	r.cfg.Progress("  team list --json of %d teams: %s", teams, listTook.Round(10*time.Millisecond))
	if doMem {
		// The lower of readings at each of MemorySamples after the creates:
		// the node's heap settles (a GC) a while after a burst.
		var low float64
		for _, at := range r.cfg.MemorySamples {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Until(t0.Add(took + at))):
			}
			v, err := rssMiB(nodeProc.pid())
			if err != nil {
				return err
			}
			if low == 0 || v < low {
				low = v
			}
		}
		r.res.add(Row{Group: "memory", Key: "tb.mem.bus.teams", Name: fmt.Sprintf("bus node with %d teams of 10 members (idle)", teams), Value: low, Unit: UnitMiB, N: 1,
			Note: fmt.Sprintf("the lower of VmRSS %v after the creates; each team: a mailbox stream, an event stream, a state and a heartbeat bucket, and no consumer until a member reads; %s", r.cfg.MemorySamples, split(nodeProc.pid()))})
		per := (low - idle) / float64(teams)
		r.res.add(Row{Group: "memory", Key: "tb.mem.team", Name: "idle memory per team of 10 members", Value: round2(per), Unit: unitMiBTeam, N: teams,
			Note: fmt.Sprintf("(%.1f MiB with %d teams − %.1f MiB empty) / %d", low, teams, idle, teams)})
		r.cfg.Progress("  bus with %d teams: %.1f MiB, %.2f MiB a team", teams, low, per)

		// One lead and one teammate sidecar on team000, as processes of
		// the client build (what init claude wires where it is
		// installed), else of the full binary.
		nodeDir := dir
		args := func(a ...string) []string { return append(a, "--dir", nodeDir, "--log-level", "warn") }
		sideExe, sideName := r.cfg.Exe, "teambus"
		if exe, err := r.clientExe(ctx); err == nil {
			sideExe, sideName = exe, "teambus-client"
		} else {
			r.cfg.Progress("  sidecars: the full binary (%v)", err)
		}
		leadProc, err := start(r.logs, "mem-lead", sideExe, args("lead", "--team", "team000", "--session", "L")...)
		if err != nil {
			return err
		}
		procs.add(leadProc)
		tmProc, err := start(r.logs, "mem-teammate", sideExe, args("teammate", "--team", "team000", "--member", "m0", "--session", "S")...)
		if err != nil {
			return err
		}
		procs.add(tmProc)
		if err := poll(ctx, 15*time.Second, func() (bool, error) {
			if tmProc.exited() || leadProc.exited() {
				return false, fmt.Errorf("sidecar exited: %s%s", tmProc.output(), leadProc.output())
			}
			m, err := svc.Member(ctx, "team000", "m0")
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
		r.res.add(Row{Group: "memory", Key: "tb.mem.teammate", Name: "teammate sidecar (" + sideName + " teammate, child process)", Value: tm, Unit: UnitMiB, N: 1,
			Note: "heartbeating, watching the lead and the team, consuming its control mail; " + split(tmProc.pid())})
		r.res.add(Row{Group: "memory", Key: "tb.mem.lead", Name: "lead sidecar (" + sideName + " lead, child process)", Value: ld, Unit: UnitMiB, N: 1, Note: split(leadProc.pid())})
		r.cfg.Progress("  teammate sidecar: %.1f MiB, lead sidecar %.1f MiB", tm, ld)
		tmProc.stop()
		leadProc.stop()
	}
	if !r.cfg.runs("scale") {
		return nil
	}
	return r.scale(ctx, nodeProc, dir)
}

// scale heartbeats ScaleMembers members every ScaleInterval, each on its
// own member credential as its sidecar beats (a fire-and-forget publish
// to the team service, which writes the heartbeat key only when the
// incarnation or status changes and every half member-timeout), and
// reads the node's CPU time over ScaleWindow (tb.scale.cpu). The members
// are teams of ten: the first of each is the team's lead (attached, on
// the lead's credential) and watches every beat of its team; the others
// are registered teammates and watch the lead's beats and their team and
// member records, as the teammate sidecar does; the watches run on
// operator connections, as the sidecars hold them today. The teams beat
// with heartbeat 1 s and member- and lead-timeout 10 s, so the renewals
// of the keys are part of the window. Then the same members beat through
// the team service's heartbeat verb, a request and one key write per
// beat, which no sidecar uses (tb.scale.cpu.service).
func (r *run) scale(ctx context.Context, nodeProc *child, dir string) error {
	d, err := bus.ReadDiscovery(dir)
	if err != nil {
		return err
	}
	conn, err := bus.Connect(ctx, bus.ConnectConfig{Dir: dir, Name: "teambus bench", Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	defer conn.Close()
	n := r.cfg.ScaleMembers
	where := func(i int) (string, string) {
		if i%10 == 0 {
			return fmt.Sprintf("team%03d", i/10), teambus.Lead
		}
		return fmt.Sprintf("team%03d", i/10), fmt.Sprintf("m%d", i%10)
	}
	svc := team.New(conn.JS, team.Config{})
	// The lead of each team attaches; the teams beat every second.
	leads := map[string]*teambus.Report{}
	var lmu sync.Mutex
	if err := inParallel(ctx, 8, (n+9)/10, func(t int) error {
		teamID, _ := where(t * 10)
		if _, err := svc.UpdateTeam(ctx, teamID, func(tm *teambus.Team) (bool, error) {
			p := tm.Policy
			p.Heartbeat, p.MemberTimeout, p.LeadTimeout = time.Second, 10*time.Second, 10*time.Second
			if err := p.Validate(); err != nil {
				return false, err
			}
			tm.Policy = p
			return true, nil
		}); err != nil {
			return fmt.Errorf("policy of %s: %w", teamID, err)
		}
		rep, err := svc.Resume(ctx, teamID, "bench-lead-"+teamID, true, true)
		if err != nil {
			return fmt.Errorf("lead of %s: %w", teamID, err)
		}
		lmu.Lock()
		leads[teamID] = rep
		lmu.Unlock()
		return nil
	}); err != nil {
		return err
	}
	wctx, stopWatches := context.WithCancel(ctx)
	defer stopWatches()
	sidecars := make([]beatFunc, n)
	if err := inParallel(ctx, 8, n, func(i int) error {
		teamID, member := where(i)
		cr, err := credstore.IssueCreds(ctx, conn, teamID, member, []string{d.URL})
		if err != nil {
			return err
		}
		c, err := bus.Connect(ctx, bus.ConnectConfig{Server: d.URL, User: cr.User, Pass: cr.Password, InboxPrefix: cr.InboxPrefix,
			Name: "teambus bench member", Timeout: 30 * time.Second})
		if err != nil {
			return fmt.Errorf("member connection %d: %w", i, err)
		}
		w, err := bus.Connect(ctx, bus.ConnectConfig{Dir: dir, Name: "teambus bench sidecar watches", Timeout: 30 * time.Second})
		if err != nil {
			c.Close()
			return fmt.Errorf("watch connection %d: %w", i, err)
		}
		closeBoth := func() { c.Close(); w.Close() }
		api := team.New(w.JS, team.Config{}).SidecarAPI()
		b := memberapi.Beat{Member: member, Status: teambus.MemberInProgress}
		if member == teambus.Lead {
			lmu.Lock()
			rep := leads[teamID]
			lmu.Unlock()
			b.Session, b.Epoch = "bench-lead-"+teamID, rep.LeadEpoch
			beats, err := api.WatchBeats(wctx, teamID, true)
			if err != nil {
				closeBoth()
				return fmt.Errorf("heartbeat watch of %s: %w", teamID, err)
			}
			go drain(beats)
		} else {
			// Registered first, as a sidecar starts: a new incarnation
			// with its own session.
			b.Session = fmt.Sprintf("bench-%s-%s", teamID, member)
			cl, err := memberapi.ForConn(c, teamID, member, b.Session)
			var m *teambus.Member
			if err == nil {
				m, err = cl.JoinSession(ctx)
			}
			if err != nil {
				closeBoth()
				return fmt.Errorf("member %s of %s: %w", member, teamID, err)
			}
			b.Epoch = m.Epoch
			beats, err := api.WatchBeats(wctx, teamID, true, teambus.Lead)
			if err != nil {
				closeBoth()
				return fmt.Errorf("heartbeat watch of %s: %w", teamID, err)
			}
			go drain(beats)
			changes, err := api.WatchState(wctx, teamID, member)
			if err != nil {
				closeBoth()
				return fmt.Errorf("state watch of %s: %w", member, err)
			}
			go drain(changes)
		}
		var seenAt time.Time
		sidecars[i] = beatFunc{close: closeBoth, beat: func(ctx context.Context, _ uint64) (uint64, error) {
			if member == teambus.Lead && time.Since(seenAt) >= leadSeenEvery {
				// The lead sidecar persists lead_last_seen every quarter
				// of takeover-after: a team-record write each teammate's
				// watch delivers (once in the window: at the first beat).
				now := time.Now()
				if _, err := api.UpdateTeam(ctx, teamID, func(t *teambus.Team) (bool, error) {
					t.LeadLastSeen = teambus.TimePtr(now)
					return true, nil
				}); err != nil {
					return 0, err
				}
				seenAt = now
			}
			return 0, memberapi.PublishBeat(c.NC, teamID, true, b)
		}}
		return nil
	}); err != nil {
		closeBeats(sidecars)
		return fmt.Errorf("sidecar connections: %w", err)
	}
	err = r.scaleRun(ctx, nodeProc, sidecars, "tb.scale.cpu", "as the sidecars beat: member credentials, a fire-and-forget beat to the team service, which writes each key every half member-timeout (10 s); a lead and 9 teammates a team, the lead watching its team's beats, each teammate the lead's and its team and member records; each lead also writes lead_last_seen in the team record every quarter of takeover-after")
	stopWatches()
	if err == nil {
		// The same beats without the watches: what the watches cost.
		err = r.scaleRun(ctx, nodeProc, sidecars, "tb.scale.cpu.nowatch", "the same beats with the sidecars' watches stopped: the beats' own cost")
	}
	if err == nil {
		// Nothing beats: what the node spends on its teams and the open
		// connections alone.
		err = r.scaleRun(ctx, nodeProc, nil, "tb.scale.cpu.idle", fmt.Sprintf("none beating: the node with its teams and the %d member connections open; the members stopped beating as this window began, so the service ends their keys (a purge each) after member-timeout, inside it", n))
	}
	closeBeats(sidecars)
	if err != nil {
		return err
	}
	viaService := make([]beatFunc, n)
	if err := inParallel(ctx, 8, n, func(i int) error {
		teamID, member := where(i)
		if member == teambus.Lead {
			member = "m0"
		}
		cr, err := credstore.IssueCreds(ctx, conn, teamID, member, []string{d.URL})
		if err != nil {
			return err
		}
		c, err := bus.Connect(ctx, bus.ConnectConfig{Server: d.URL, User: cr.User, Pass: cr.Password, InboxPrefix: cr.InboxPrefix,
			Name: "teambus bench member", Timeout: 30 * time.Second})
		if err != nil {
			return fmt.Errorf("member connection %d: %w", i, err)
		}
		// Registered first, as a sidecar starts: a new incarnation with
		// its own session.
		cl, err := memberapi.ForConn(c, teamID, member, fmt.Sprintf("bench-verb-%s-%s", teamID, member))
		if err == nil {
			_, err = cl.JoinSession(ctx)
		}
		if err != nil {
			c.Close()
			return fmt.Errorf("member %s of %s: %w", member, teamID, err)
		}
		viaService[i] = beatFunc{close: c.Close, beat: func(ctx context.Context, rev uint64) (uint64, error) {
			return cl.Beat(ctx, memberapi.HeartbeatRequest{Status: teambus.MemberInProgress, Rev: rev})
		}}
		return nil
	}); err != nil {
		closeBeats(viaService)
		return fmt.Errorf("member connections: %w", err)
	}
	defer closeBeats(viaService)
	return r.scaleRun(ctx, nodeProc, viaService, "tb.scale.cpu.service", "member credential, through the team service's heartbeat verb: a request and a key write per beat, no watches (no sidecar beats this way)")
}

// leadSeenEvery is how often the scale row's leads persist lead_last_seen:
// a quarter of the teams' takeover-after, as the lead sidecar does.
var leadSeenEvery = teamTakeoverAfter / 4

// teamTakeoverAfter is the takeover-after of the scale row's teams (the
// default).
var teamTakeoverAfter = teambus.DefaultPolicy().TakeoverAfter

// drain reads a watch until it closes.
func drain[T any](ch <-chan T) {
	for range ch {
	}
}

// beatFunc is one heartbeating member: beat writes a beat after revision
// rev and returns its revision.
type beatFunc struct {
	beat  func(ctx context.Context, rev uint64) (uint64, error)
	close func()
}

func closeBeats(bs []beatFunc) {
	for _, b := range bs {
		if b.close != nil {
			b.close()
		}
	}
}

// scaleRun runs beats every ScaleInterval for two intervals of warm-up and
// ScaleWindow of measurement and adds the row key.
func (r *run) scaleRun(ctx context.Context, nodeProc *child, beats []beatFunc, key, how string) error {
	every, window := r.cfg.ScaleInterval, r.cfg.ScaleWindow
	bctx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		mu   sync.Mutex
		lat  []time.Duration
		errs []error
		wg   sync.WaitGroup
	)
	measuring := make(chan struct{})
	for _, b := range beats {
		wg.Add(1)
		go func() {
			defer wg.Done()
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
				nrev, err := b.beat(bctx, rev)
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
	if len(errs) > len(beats)/10 {
		return fmt.Errorf("%d heartbeats failed, first: %w", len(errs), errors.Join(errs[0]))
	}
	share := 100 * (c1 - c0).Seconds() / elapsed.Seconds()
	s := sample{n: len(lat), lat: lat}
	failed := fmt.Sprint(len(errs))
	if len(errs) > 0 {
		failed += fmt.Sprintf(" (the first: %v)", errs[0])
	}
	r.res.add(Row{Group: "scale", Key: key, Name: fmt.Sprintf("bus node CPU, %d members heartbeating every %s (%s)", len(beats), every, how),
		Value: share, Unit: UnitPct, P50: ms(s.pct(0.5)), P99: ms(s.pct(0.99)), N: s.n,
		Note: fmt.Sprintf("utime+stime of the node process from /proc/PID/stat over %s; p50/p99 are the beat calls (a request and its answer through the heartbeat verb; only the publish for a fire-and-forget beat); %.0f beats/s, %s failed; node RSS %.1f MiB; the heartbeating bench process used %.0f%% of a core",
			window, float64(s.n)/elapsed.Seconds(), failed, rss, 100*(self1-self0).Seconds()/elapsed.Seconds())})
	r.cfg.Progress("  %d heartbeating members (%s): node CPU %.1f%% of a core", len(beats), how, share)
	return nil
}

// inParallel runs fn(0) … fn(n-1) on workers goroutines and returns the
// first error.
func inParallel(ctx context.Context, workers, n int, fn func(i int) error) error {
	var (
		mu   sync.Mutex
		next int
		ferr error
		wg   sync.WaitGroup
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				stop := ferr != nil || i >= n || ctx.Err() != nil
				mu.Unlock()
				if stop {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if ferr == nil {
						ferr = fmt.Errorf("%d: %w", i, err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return ferr
}
