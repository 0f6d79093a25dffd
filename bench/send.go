package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/teambus/teambus/node/credstore"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/relay"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// Row keys that targets and ratios refer to.
const (
	keyFsync      = "limit.fsync"
	keyJSONL      = "peer.jsonl"
	keyInbox      = "peer.inbox." // + size
	keyInboxRead  = "peer.inbox.read"
	keyStateClaim = "peer.claim"
	keyJSONLOnce  = "peer.jsonl.once"
	keyStart      = "ref.start"
	keyAsync      = "tb.send.async"
	keyMbSend     = "tb.send.mailbox"
	keySvcSend    = "tb.send.service"
	keyReqSend    = "tb.send.request"
	keyReqAsync   = "tb.send.request.pipelined"
	keyOneShot    = "tb.send.oneshot"
	// keyOneShotClient is the same send by the client build with the
	// member's own credential: what an agent's one-shot command runs.
	keyOneShotClient = "tb.send.oneshot.client"
	// keyOneShotDirect is the client build's send without the relay.
	keyOneShotDirect = "tb.send.oneshot.client.direct"
	// keyOneShotAgent is `teambus send` as an agent runs it in a session
	// bound by the hooks: `teambus` is the client build the SessionStart
	// hook puts first on the session's PATH, the identity comes from the
	// session's exports, the send goes through the sidecar's relay.
	keyOneShotAgent = "tb.send.oneshot.agent"
	keyStartClient  = "ref.start.client"
	keyInboxAck     = "tb.inbox.ack"
	keyClaim        = "tb.claim"
	keyIntervalSfx  = ".interval"
)

func perOp(s sample) (p50, p99 float64) { return ms(s.pct(0.5)), ms(s.pct(0.99)) }

func (r *run) rateRow(group, key, name string, s sample, note string) *Row {
	p50, p99 := perOp(s)
	row := r.res.add(Row{Group: group, Key: key, Name: name, Value: s.rate(), Unit: UnitRate, P50: p50, P99: p99, N: s.n, Note: note})
	r.cfg.Progress("  %s: %s op/s", name, thousands(s.rate()))
	return row
}

// sendTeam creates a team of two joined members, tm1 and tm2, with a
// mailbox large enough for a throughput loop.
func sendTeam(ctx context.Context, svc *team.Service, id string, members ...string) ([]team.Actor, error) {
	var specs []team.MemberSpec
	for _, m := range members {
		specs = append(specs, team.MemberSpec{ID: m})
	}
	if _, err := svc.CreateTeam(ctx, id, "", specs, teambus.DefaultPolicy()); err != nil {
		return nil, fmt.Errorf("create team %s: %w", id, err)
	}
	var out []team.Actor
	for _, m := range members {
		session := "s-" + m
		if _, err := svc.Join(ctx, id, m, session); err != nil {
			return nil, fmt.Errorf("join %s: %w", m, err)
		}
		out = append(out, team.Actor{Team: id, Member: m, Session: session})
	}
	return out, nil
}

// bigMailbox is a team service whose new mailboxes hold a throughput loop
// of any length.
func bigMailbox(maxBytes int64) team.Config {
	return team.Config{Mailbox: mailbox.MailboxConfig{MaxBytes: maxBytes}, KV: kv.Config{}}
}

// benchMailbox is the mailbox of team with bigMailbox(maxBytes)'s limits,
// as the team service builds it: the throughput rows measure the mailbox
// itself, below the team service.
func benchMailbox(conn *bus.Conn, team string, maxBytes int64) *mailbox.Mailbox {
	return mailbox.NewMailbox(conn.JS, team, mailbox.MailboxConfig{MaxBytes: maxBytes, Replicas: bus.AutoReplicas(conn.NC)})
}

// meter is one figure of the throughput section.
type meter struct {
	group, key, name, short, note string
	run                           meterFunc
}

// interleave runs the meters in turn, rounds times, each for d/rounds a
// turn, and adds a row per meter. Taking turns in short slices makes a
// moment of disk contention from elsewhere weigh on every figure alike, so
// the ratios hold even when the absolute rates drift.
func (r *run) interleave(ctx context.Context, rounds int, d time.Duration, ms []meter) error {
	acc := make([]sample, len(ms))
	slice := d / time.Duration(rounds)
	for i := 0; i < rounds; i++ {
		for j, m := range ms {
			s, err := m.run(ctx, slice)
			if err != nil {
				return fmt.Errorf("%s: %w", m.name, err)
			}
			acc[j].n += s.n
			acc[j].elapsed += s.elapsed
			acc[j].lat = append(acc[j].lat, s.lat...)
		}
	}
	for j, m := range ms {
		if row := r.rateRow(m.group, m.key, m.name, acc[j], m.note); m.short != "" {
			row.Short = m.short
		}
	}
	return nil
}

// rounds is how many turns each throughput meter gets.
func (r *run) rounds() int {
	if r.cfg.Quick {
		return 3
	}
	return 6
}

// throughput measures durable writes one at a time and pipelined: the
// disk's fsync loop, the JSONL and inbox-file peers and teambus sends on a
// node with sync always, taking turns; then teambus sends on a node with
// sync interval.
func (r *run) throughput(ctx context.Context) error {
	dir := filepath.Join(r.dir, "files")
	if err := mkdir(dir); err != nil {
		return err
	}
	size := r.cfg.MsgSize
	fsyncM, closeF, err := fsyncMeter(dir)
	if err != nil {
		return err
	}
	defer closeF()
	jsonlM, closeJ, err := jsonlMeter(dir, size)
	if err != nil {
		return err
	}
	defer closeJ()
	ms := []meter{
		{group: "limit", key: keyFsync, name: "4 KiB write + fsync loop", short: "fsync loop", run: fsyncM},
		{group: "peer", key: keyJSONL, name: "JSONL append + fsync per line (fd kept open)", short: "JSONL+fsync", run: jsonlM},
	}
	for _, n := range []int{100, 1000, 10000} {
		m, err := inboxMeter(dir, n, size)
		if err != nil {
			return fmt.Errorf("inbox file of %d: %w", n, err)
		}
		ms = append(ms, meter{group: "peer", key: fmt.Sprint(keyInbox, n), name: fmt.Sprintf("inbox.json of %s msgs: read, append, tmp+fsync+rename+fsync dir", thousands(float64(n))),
			short: "inbox.json@" + thousands(float64(n)), run: m})
	}
	nd, conn, sendMs, err := r.sendMeters(ctx, bus.SyncModeAlways)
	if err != nil {
		return err
	}
	ms = append(ms, sendMs...)
	err = r.interleave(ctx, r.rounds(), r.cfg.Duration, ms)
	conn.Close()
	nd.Close()
	if err != nil {
		return err
	}
	if row := r.res.Row(keyFsync); row != nil {
		r.res.Machine.FsyncP50 = row.P50
	}
	nd, conn, sendMs, err = r.sendMeters(ctx, bus.SyncModeInterval)
	if err != nil {
		return err
	}
	defer nd.Close()
	defer conn.Close()
	return r.interleave(ctx, r.rounds(), r.cfg.Duration, sendMs)
}

// sendMeters starts a node with the sync mode and returns the meters of
// its sends: pipelined, one at a time through the mailbox, one at a time
// through the team service. The caller closes the node and connection.
func (r *run) sendMeters(ctx context.Context, mode string) (*node.Node, *bus.Conn, []meter, error) {
	nd, err := r.node(ctx, "node-send-"+mode, mode)
	if err != nil {
		return nil, nil, nil, err
	}
	conn, err := connect(ctx, nd)
	if err != nil {
		nd.Close()
		return nil, nil, nil, err
	}
	svc := team.New(conn.JS, bigMailbox(8<<30))
	actors, err := sendTeam(ctx, svc, "send", "tm1", "tm2")
	if err != nil {
		conn.Close()
		nd.Close()
		return nil, nil, nil, err
	}
	from := actors[0]
	mb := benchMailbox(conn, "send", 8<<30)
	sfx, label, note := "", "", "sync always: the node fsyncs every message before acknowledging; client over loopback TCP"
	if mode == bus.SyncModeInterval {
		sfx, label, note = keyIntervalSfx, ", sync interval", "sync interval: written to the OS before the ack, fsync every 2 min; survives kill -9, not power loss"
	}
	size := r.cfg.MsgSize
	// A member's own credential: its sends go through the team service
	// (one request each), as every member command's do.
	cl, err := memberClient(ctx, conn, nd, from)
	if err != nil {
		conn.Close()
		nd.Close()
		return nil, nil, nil, err
	}
	var seq atomic.Int64 // message ids stay unique across turns: no send is a duplicate
	return nd, conn, append(batchMeters(mb, size, &seq, sfx, label, note), []meter{
		{group: "teambus", key: keyReqSend + sfx, name: "send one at a time through the team service (member credential, one request" + label + ")",
			run: func(ctx context.Context, d time.Duration) (sample, error) {
				return loop(ctx, d, 1, 0, func(int) error {
					_, err := cl.Send(ctx, teamapi.SendRequest{To: "tm2", ID: fmt.Sprintf("req-%d", seq.Add(1)), Body: body(size)})
					return err
				})
			}},
		{group: "teambus", key: keyReqAsync + sfx, name: fmt.Sprintf("pipelined send through the team service (member credential, %d requests in flight%s)", serviceWindow, label),
			run: func(ctx context.Context, d time.Duration) (sample, error) {
				return concurrent(ctx, d, serviceWindow, func() error {
					_, err := cl.Send(ctx, teamapi.SendRequest{To: "tm2", ID: fmt.Sprintf("reqp-%d", seq.Add(1)), Body: body(size)})
					return err
				})
			}},
		{group: "teambus", key: keyAsync + sfx, name: "pipelined send (Mailbox.SendAsync, window 256" + label + ")", note: note,
			run: func(ctx context.Context, d time.Duration) (sample, error) {
				return pipelined(ctx, conn, mb, d, size, &seq)
			}},
		{group: "teambus", key: keyMbSend + sfx, name: "send one at a time (Mailbox.Send" + label + ")",
			run: func(ctx context.Context, d time.Duration) (sample, error) {
				return loop(ctx, d, 1, 0, func(int) error {
					m := &teambus.Message{ID: fmt.Sprintf("one-%d", seq.Add(1)), From: "tm1", To: "tm2", Type: teambus.MsgInfo, Body: body(size), Epoch: 1}
					_, err := mb.Send(ctx, m, false)
					return err
				})
			}},
		{group: "teambus", key: keySvcSend + sfx, name: "send one at a time (team.Service.Send: checks sender, recipient, fencing" + label + ")",
			run: func(ctx context.Context, d time.Duration) (sample, error) {
				return loop(ctx, d, 1, 0, func(int) error {
					_, err := svc.Send(ctx, teamapi.SendRequest{Actor: from, To: "tm2", ID: fmt.Sprintf("svc-%d", seq.Add(1)), Body: body(size)})
					return err
				})
			}},
	}...), nil
}

// serviceWindow is how many requests the pipelined service meter keeps in
// flight.
const serviceWindow = 256

// memberClient issues a credential for the actor, connects with it over
// TCP and returns its team service client; the connection closes with
// conn's node.
func memberClient(ctx context.Context, conn *bus.Conn, nd *node.Node, a team.Actor) (*teamapi.Client, error) {
	cr, err := credstore.IssueCreds(ctx, conn, a.Team, a.Member, []string{nd.URL()})
	if err != nil {
		return nil, err
	}
	mc, err := bus.Connect(ctx, bus.ConnectConfig{Server: nd.URL(), User: cr.User, Pass: cr.Password, InboxPrefix: cr.InboxPrefix, Name: "teambus bench member", Timeout: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	go func() {
		<-nd.Done()
		mc.Close()
	}()
	return teamapi.ForConn(mc, a.Team, a.Member, a.Session)
}

// concurrent runs op from n goroutines for d and returns how many
// completed in how long, with each one's latency.
func concurrent(ctx context.Context, d time.Duration, n int, op func() error) (sample, error) {
	var (
		mu   sync.Mutex
		s    sample
		errs error
		wg   sync.WaitGroup
	)
	start := time.Now()
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			for time.Since(start) < d && ctx.Err() == nil {
				t0 := time.Now()
				if err := op(); err != nil {
					mu.Lock()
					errs = errors.Join(errs, err)
					mu.Unlock()
					return
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			s.lat = append(s.lat, lat...)
			s.n += len(lat)
			mu.Unlock()
		}()
	}
	wg.Wait()
	s.elapsed = time.Since(start)
	if errs != nil {
		return s, errs
	}
	return s, ctx.Err()
}

// pipelined sends for d with up to 256 sends in flight and returns how
// many were acknowledged in how long.
func pipelined(ctx context.Context, conn *bus.Conn, mb *mailbox.Mailbox, d time.Duration, size int, seq *atomic.Int64) (sample, error) {
	var futures []jetstream.PubAckFuture
	start := time.Now()
	for time.Since(start) < d {
		if err := ctx.Err(); err != nil {
			return sample{}, err
		}
		m := &teambus.Message{ID: fmt.Sprintf("async-%d", seq.Add(1)), From: "tm1", To: "tm2", Type: teambus.MsgInfo, Body: body(size), Epoch: 1}
		f, err := mb.SendAsync(m, false)
		if err != nil {
			return sample{}, err
		}
		futures = append(futures, f)
	}
	select {
	case <-conn.JS.PublishAsyncComplete():
	case <-ctx.Done():
		return sample{}, ctx.Err()
	case <-time.After(time.Minute):
		return sample{}, errors.New("acks did not arrive within a minute")
	}
	elapsed := time.Since(start)
	n := 0
	for _, f := range futures {
		select {
		case <-f.Ok():
			n++
		case err := <-f.Err():
			return sample{}, err
		}
	}
	return sample{n: n, elapsed: elapsed}, nil
}

// oneShot times one-shot processes: `teambus send` against a node of this
// process, and beside it the standalone JSONL peer (bench/peers/jsonl).
// The sender's teammate sidecar runs, as it does beside every agent
// session, so the client build's send goes through its relay (package
// relay); the same send connecting itself (TEAMBUS_NO_RELAY) and the full
// build's are timed beside it.
func (r *run) oneShot(ctx context.Context) error {
	nd, svc, stop, err := r.teamNode(ctx, "node-oneshot", bus.SyncModeAlways, team.Config{})
	if err != nil {
		return err
	}
	defer stop()
	if _, err := sendTeam(ctx, svc, "oneshot", "tm1", "tm2"); err != nil {
		return err
	}
	exe, size := r.cfg.Exe, r.cfg.MsgSize
	direct := []string{relay.DisableEnv + "=1"}
	kinds := []procKind{
		{key: keyStart, group: "ref", name: "one-shot process start-up only (teambus version)", exe: exe, args: []string{"version"}},
	}
	if peer, err := r.peerKind(ctx, keyJSONLOnce, "oneshot.jsonl"); err != nil {
		r.skippedRow("peer", keyJSONLOnce, peerName, err)
	} else {
		kinds = append(kinds, peer)
	}
	kinds = append(kinds, procKind{key: keyOneShot, group: "teambus", name: "one-shot `teambus send` process (full build, operator token, connects itself: TCP, checks, stored + fsynced)", exe: exe, env: direct,
		args: []string{"send", "--dir", nd.Dir(), "--team", "oneshot", "--member", "tm1", "--session", "s-tm1", "--to", "tm2", body(size)}})
	if client, creds, err := r.clientKinds(ctx, nd, "oneshot", "tm1"); err != nil {
		r.skippedRow("teambus", keyOneShotClient, "one-shot `teambus-client send` process (client build, member credential)", err)
	} else {
		side, err := r.relaySidecar(ctx, client, nd, "oneshot", "tm1", "s-tm1")
		if err != nil {
			return err
		}
		defer side.stop()
		args := []string{"send", "--creds", creds, "--session", "s-tm1", "--to", "tm2", body(size)}
		linked := r.agentExe(ctx, client)
		agent, err := r.agentShim(linked)
		if err != nil {
			return err
		}
		kinds = append(kinds,
			procKind{key: keyOneShotAgent, group: "teambus", name: "one-shot `teambus send` as an agent runs it in a hook-bound session (the session's PATH: $TEAMBUS_DIR/bin/teambus, a link to " + filepath.Base(linked) + "; identity from the session's exports; through its sidecar's relay: stored + fsynced)",
				exe: agent, env: []string{"TEAMBUS_DIR=" + nd.Dir(), "TEAMBUS_TEAM=oneshot", "TEAMBUS_MEMBER=tm1", "TEAMBUS_SESSION=s-tm1"},
				args: []string{"send", "--to", "tm2", body(size)}})
		kinds = append(kinds,
			procKind{key: keyStartClient, group: "ref", name: "one-shot process start-up only (teambus-client version)", exe: client, args: []string{"version"}},
			procKind{key: keyOneShotClient, group: "teambus", name: "one-shot `teambus-client send` process (client build, member credential, through its sidecar's relay: stored + fsynced)", exe: client, args: args},
			procKind{key: keyOneShotDirect, group: "ref", name: "one-shot `teambus-client send` process (client build, member credential, connects itself: TCP, NATS handshake, one request)", exe: client, env: direct, args: args})
	}
	return r.timeKinds(ctx, r.cfg.OneShotRuns, kinds)
}

// agentShim is what the SessionStart hook makes of the lean agent build
// (or the client build) for the session's shell: a `teambus` in a
// directory of its own, a symbolic link to client. It returns the link's
// path.
func (r *run) agentShim(client string) (string, error) {
	dir := filepath.Join(r.dir, "agent-bin")
	if err := mkdir(dir); err != nil {
		return "", err
	}
	link := filepath.Join(dir, "teambus")
	_ = os.Remove(link)
	if err := os.Symlink(client, link); err != nil {
		return "", fmt.Errorf("agent's teambus: %w", err)
	}
	return link, nil
}

// relaySidecar starts the teammate sidecar of member in teamID on nd
// (client build, the node's token, as the SessionStart hook starts it)
// and waits until its relay answers.
func (r *run) relaySidecar(ctx context.Context, exe string, nd *node.Node, teamID, member, session string) (*child, error) {
	c, err := start(r.logs, "sidecar-"+teamID+"-"+member, exe, "teammate", "--dir", nd.Dir(), "--team", teamID, "--member", member, "--session", session)
	if err != nil {
		return nil, err
	}
	d, err := bus.ReadDiscovery(nd.Dir())
	if err == nil {
		err = poll(ctx, 30*time.Second, func() (bool, error) {
			if c.exited() {
				return false, fmt.Errorf("sidecar exited: %s", c.output())
			}
			rc, err := relay.Dial(ctx, d.URL, teamID, member, relay.Auth{Token: d.Token})
			if err != nil {
				return false, nil
			}
			rc.Close()
			return true, nil
		})
	}
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("relay of the %s sidecar: %w", member, err)
	}
	return c, nil
}

// clientKinds returns the client build and a credential file of member of
// teamID on nd, for the rows of what an agent's own process runs.
func (r *run) clientKinds(ctx context.Context, nd *node.Node, teamID, member string) (exe, creds string, err error) {
	if exe, err = r.clientExe(ctx); err != nil {
		return "", "", err
	}
	conn, err := connect(ctx, nd)
	if err != nil {
		return "", "", err
	}
	defer conn.Close()
	cr, err := credstore.IssueCreds(ctx, conn, teamID, member, []string{nd.URL()})
	if err != nil {
		return "", "", err
	}
	creds = filepath.Join(r.dir, teamID+"-"+member+".creds")
	return exe, creds, bus.WriteCreds(creds, cr)
}

// peerName is the name of the one-shot JSONL peer's rows.
const peerName = "one-shot process: open, append one JSONL line, fsync (standalone peer, bench/peers/jsonl)"

// peerKind is the one-shot JSONL peer appending to file in the run's
// directory, built on first use.
func (r *run) peerKind(ctx context.Context, key, file string) (procKind, error) {
	exe, err := r.jsonlPeer(ctx)
	if err != nil {
		return procKind{}, err
	}
	return procKind{key: key, group: "peer", name: peerName, short: "one-shot JSONL process", exe: exe,
		args: []string{"--size", fmt.Sprint(r.cfg.MsgSize), filepath.Join(r.dir, file)}}, nil
}

// procKind is one kind of one-shot process a section times.
type procKind struct {
	key, group, name, short, note string
	exe                           string
	args                          []string
	// env is added to the child environment; stdin is its input.
	env   []string
	stdin []byte
	// setup, when set, runs before each run, untimed, and returns the
	// run's env and stdin instead of the fields.
	setup func(ctx context.Context) (env []string, stdin []byte, err error)
	// after runs after each run, untimed (cleanup between runs).
	after func(ctx context.Context) error
}

// timeKinds runs each kind runs times, interleaved so a noisy moment hurts
// all alike, after one untimed warm-up run each (it loads the binary into
// the page cache), and adds a row per kind with p50 as the value.
func (r *run) timeKinds(ctx context.Context, runs int, kinds []procKind) error {
	lat := make([][]time.Duration, len(kinds))
	for i := -1; i < runs; i++ {
		for k, kd := range kinds {
			env, stdin := kd.env, kd.stdin
			if kd.setup != nil {
				var err error
				if env, stdin, err = kd.setup(ctx); err != nil {
					return fmt.Errorf("%s: %w", kd.name, err)
				}
			}
			d, err := timeProc(ctx, kd.exe, env, stdin, kd.args...)
			if err != nil {
				return err
			}
			if i >= 0 {
				lat[k] = append(lat[k], d)
			}
			if kd.after != nil {
				if err := kd.after(ctx); err != nil {
					return fmt.Errorf("%s: %w", kd.name, err)
				}
			}
		}
	}
	for k, kd := range kinds {
		s := sample{n: len(lat[k]), lat: lat[k]}
		p50, p99 := perOp(s)
		r.res.add(Row{Group: kd.group, Key: kd.key, Name: kd.name, Short: kd.short, Value: p50, Unit: UnitMs, P50: p50, P99: p99, N: s.n, Note: kd.note})
		r.cfg.Progress("  %s: p50 %.2f ms, p99 %.2f ms", kd.name, p50, p99)
	}
	return nil
}

// inbox measures reading and acking mail, 100 messages per call, against
// the inbox file drained 100 at a time.
func (r *run) inbox(ctx context.Context) error {
	dir := filepath.Join(r.dir, "files")
	if err := mkdir(dir); err != nil {
		return err
	}
	s, err := inboxReadAck(ctx, dir, 1000, 100, r.cfg.MsgSize)
	if err != nil {
		return fmt.Errorf("inbox file read: %w", err)
	}
	r.rateRow("peer", keyInboxRead, "inbox.json of 1,000 msgs read + acked 100 at a time (rewrite the rest atomically)", s, "op = one message; p50/p99 per batch of 100").Short = "inbox.json read+ack"

	nd, err := r.node(ctx, "node-inbox", bus.SyncModeAlways)
	if err != nil {
		return err
	}
	defer nd.Close()
	conn, err := connect(ctx, nd)
	if err != nil {
		return err
	}
	defer conn.Close()
	svc := team.New(conn.JS, bigMailbox(4<<30))
	actors, err := sendTeam(ctx, svc, "read", "tm1", "tm2")
	if err != nil {
		return err
	}
	mb := benchMailbox(conn, "read", 4<<30)
	n := r.cfg.ReadMessages
	for i := 0; i < n; i++ {
		m := &teambus.Message{ID: fmt.Sprintf("r%d", i), From: "tm1", To: "tm2", Type: teambus.MsgInfo, Body: body(r.cfg.MsgSize), Epoch: 1}
		if _, err := mb.SendAsync(m, false); err != nil {
			return err
		}
	}
	select {
	case <-conn.JS.PublishAsyncComplete():
	case <-ctx.Done():
		return ctx.Err()
	}
	reader := actors[1]
	var got sample
	start := time.Now()
	for got.n < n {
		t0 := time.Now()
		// A call has a deadline, as every command's does (--timeout).
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		msgs, err := svc.Inbox(cctx, reader, mailbox.InboxOptions{Max: 100, Ack: true})
		cancel()
		if err != nil {
			return fmt.Errorf("inbox: %w", err)
		}
		if len(msgs) == 0 {
			return fmt.Errorf("inbox: empty after %d of %d messages", got.n, n)
		}
		got.n += len(msgs)
		got.lat = append(got.lat, time.Since(t0))
	}
	got.elapsed = time.Since(start)
	r.rateRow("teambus", keyInboxAck, "inbox read + ack (team.Service.Inbox --ack, 100 per call)", got, "op = one message; p50/p99 per call of 100")
	return nil
}

// claims lets members contend for tasks: each claims the best available
// task (Service.Next, compare-and-set) and completes it, until none is
// left.
func (r *run) claims(ctx context.Context) error {
	dir := filepath.Join(r.dir, "files")
	if err := mkdir(dir); err != nil {
		return err
	}
	tasks, workers := r.cfg.ClaimTasks, r.cfg.ClaimMembers
	s, err := stateClaims(ctx, dir, tasks, workers)
	if err != nil {
		return fmt.Errorf("state file claims: %w", err)
	}
	r.rateRow("peer", keyStateClaim, fmt.Sprintf("state.json claim + complete under flock, %d members, %d tasks", workers, tasks), s, "op = one task claimed and completed (two atomic rewrites)").Short = "state.json claims"

	nd, svc, stop, actors, err := r.claimTeam(ctx, "node-claim", "claim", workers)
	if err != nil {
		return err
	}
	defer stop()
	if err := addTasks(ctx, svc, "claim", tasks); err != nil {
		return err
	}
	var (
		mu      sync.Mutex
		lat     []time.Duration
		done    atomic.Int64
		firstEr error
		wg      sync.WaitGroup
	)
	start := time.Now()
	for _, a := range actors {
		// Each member has its own connection, as its own process would.
		c, err := connect(ctx, nd)
		if err != nil {
			return err
		}
		defer c.Close()
		msvc := team.New(c.JS, team.Config{})
		wg.Add(1)
		go func(a team.Actor) {
			defer wg.Done()
			for ctx.Err() == nil {
				t0 := time.Now()
				t, err := msvc.Next(ctx, a)
				if errors.Is(err, teambus.ErrState) {
					return // nothing left
				}
				if errors.Is(err, teambus.ErrUnavailable) || errors.Is(err, teambus.ErrConflict) {
					continue
				}
				if err == nil {
					_, _, err = msvc.Complete(ctx, a, t.ID, "")
				}
				if err != nil {
					mu.Lock()
					firstEr = errors.Join(firstEr, err)
					mu.Unlock()
					return
				}
				done.Add(1)
				mu.Lock()
				lat = append(lat, time.Since(t0))
				mu.Unlock()
			}
		}(a)
	}
	wg.Wait()
	if firstEr != nil {
		return firstEr
	}
	got := sample{n: int(done.Load()), elapsed: time.Since(start), lat: lat}
	if got.n != tasks {
		return fmt.Errorf("claimed %d of %d tasks", got.n, tasks)
	}
	r.rateRow("teambus", keyClaim, fmt.Sprintf("claim + complete (team.Service.Next), %d contending members, %d tasks", workers, tasks), got, "op = one task claimed and completed; every claim is a compare-and-set, losers retry")
	return nil
}

// addTasks adds n new tasks of no dependencies to team, in one import.
func addTasks(ctx context.Context, svc *team.Service, teamID string, n int) error {
	tasks := make([]team.ImportTask, n)
	for i := range tasks {
		tasks[i].TaskSpec = team.TaskSpec{ID: fmt.Sprintf("t%05d", i), Description: "task"}
	}
	_, err := svc.ImportTasks(ctx, teamID, tasks, nil)
	return err
}

// putTasks writes n tasks straight into the state bucket, 16 at a time:
// setup, not measured.
func putTasks(ctx context.Context, store *kv.Store, teamID string, n int, mk func(i int, now time.Time) *teambus.Task) error {
	now := time.Now().UTC()
	work := make(chan int)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if _, err := store.PutTask(ctx, teamID, mk(i, now), 0); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var err error
feed:
	for i := 0; i < n; i++ {
		select {
		case work <- i:
		case err = <-errs:
			break feed
		}
	}
	close(work)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	if err != nil {
		return fmt.Errorf("add tasks: %w", err)
	}
	return nil
}
