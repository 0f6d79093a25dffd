package spawn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/kv"
)

// HostConfig configures a host.
type HostConfig struct {
	// Name is the host's name (ValidateHost).
	Name string
	// Max is the most sessions it runs at once (0: no limit).
	Max int
	// TTL is how long its registration outlives its last heartbeat: a
	// host silent for this long is lost. At least 1s; beats every TTL/3.
	TTL time.Duration
	// Teams limits the teams it serves; empty, every team on the bus.
	Teams []string
	// Spawner runs the starts; its Host must be Name.
	Spawner *Spawner
	NC      *nats.Conn
	Log     *slog.Logger
}

// Host registers a machine with the bus, runs the spawns addressed to it
// and restarts crashed members of the teams it serves whose policy is
// respawn=auto.
type Host struct {
	cfg     HostConfig
	reg     *Registry
	log     *slog.Logger
	started time.Time

	mu       sync.Mutex
	running  int
	rev      uint64
	teams    map[string]bool
	inflight map[string]bool
	wg       sync.WaitGroup
}

// NewHost checks cfg and returns its host.
func NewHost(cfg HostConfig) (*Host, error) {
	if err := ValidateHost(cfg.Name); err != nil {
		return nil, err
	}
	if cfg.Spawner == nil || cfg.Spawner.Host != cfg.Name || cfg.NC == nil {
		return nil, errors.New("host: a spawner for this host and a connection are required")
	}
	if cfg.Max < 0 {
		return nil, teambus.Invalidf("invalid --max %d: 0 (no limit) or more", cfg.Max)
	}
	if cfg.TTL < time.Second {
		return nil, teambus.Invalidf("invalid --ttl %s: at least 1s", cfg.TTL)
	}
	for _, t := range cfg.Teams {
		if err := teambus.ValidateID("team", t); err != nil {
			return nil, err
		}
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Host{cfg: cfg, reg: cfg.Spawner.Reg, log: log.With("host", cfg.Name), teams: map[string]bool{}, inflight: map[string]bool{}}, nil
}

// serves reports whether the host serves team.
func (h *Host) serves(team string) bool {
	return HostInfo{Teams: h.cfg.Teams}.Serves(team)
}

func (h *Host) info() HostInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	return HostInfo{Name: h.cfg.Name, Machine: Machine(), PID: os.Getpid(), Max: h.cfg.Max, Running: h.running, Teams: h.cfg.Teams, Started: h.started, TS: time.Now().UTC()}
}

// Run serves until ctx ends, then deregisters (a clean leave, not a loss).
func (h *Host) Run(ctx context.Context) error {
	h.started = time.Now().UTC()
	if err := h.register(ctx); err != nil {
		return err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_ = h.reg.hosts.Delete(dctx, h.cfg.Name)
	}()
	svc, err := micro.AddService(h.cfg.NC, micro.Config{Name: "teambus-host", Version: "1.0.0", Description: "teambus host " + h.cfg.Name})
	if err != nil {
		return teambus.Unavailablef("host service: %w", err)
	}
	defer func() { _ = svc.Stop() }()
	if err := svc.AddEndpoint("spawn", micro.HandlerFunc(func(r micro.Request) { h.handleSpawn(ctx, r) }), micro.WithEndpointSubject(SpawnSubject(h.cfg.Name))); err != nil {
		return teambus.Unavailablef("host service: %w", err)
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := h.cfg.NC.FlushWithContext(fctx); err != nil {
		return teambus.Unavailablef("host service: %w", err)
	}
	h.log.Info("host running", "machine", Machine(), "max", h.cfg.Max, "ttl", h.cfg.TTL, "teams", h.cfg.Teams)
	hw, err := h.reg.hosts.WatchAll(ctx)
	if err != nil {
		return teambus.Unavailablef("watch hosts: %w", err)
	}
	defer func() { _ = hw.Stop() }()
	beat := time.NewTicker(h.cfg.TTL / 3)
	defer beat.Stop()
	scan := time.NewTicker(time.Second)
	defer scan.Stop()
	h.discover(ctx)
	rescanEvery, lastRescan := max(h.cfg.TTL, 2*time.Second), time.Now()
	for {
		select {
		case <-ctx.Done():
			h.wg.Wait()
			return nil
		case <-beat.C:
			if err := h.beat(ctx); err != nil {
				h.log.Warn("host heartbeat", "err", err)
			}
		case <-scan.C:
			h.discover(ctx)
			if time.Since(lastRescan) >= rescanEvery {
				lastRescan = time.Now()
				h.rescanAll(ctx, "")
			}
		case e, ok := <-hw.Updates():
			if !ok {
				return teambus.Unavailablef("host watch closed")
			}
			if e != nil && e.Operation() == jetstream.KeyValuePurge && !strings.HasPrefix(e.Key(), "_") && e.Key() != h.cfg.Name {
				h.lost(ctx, e.Key(), e.Revision())
			}
		}
	}
}

// register creates the host's key; a live host of the same name refuses.
func (h *Host) register(ctx context.Context) error {
	b, _ := json.Marshal(h.info())
	rev, err := h.reg.hosts.Create(ctx, h.cfg.Name, b, jetstream.KeyTTL(kv.TTL(h.cfg.TTL)))
	if err == nil {
		h.rev = rev
		return nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return teambus.Unavailablef("register host %s: %w", h.cfg.Name, err)
	}
	old, gerr := h.reg.Host(ctx, h.cfg.Name)
	if gerr == nil && (old.Machine != Machine() || pidAlive(old.PID)) {
		return teambus.Conflictf("host %s already runs (machine %s, pid %d): choose another --name", h.cfg.Name, old.Machine, old.PID)
	}
	// Our own earlier run, dead before its key expired: take the key over.
	return h.beat(ctx)
}

// beat renews the host's key.
func (h *Host) beat(ctx context.Context) error {
	b, _ := json.Marshal(h.info())
	_, err := h.reg.js.Publish(ctx, "$KV."+HostBucket+"."+h.cfg.Name, b, jetstream.WithMsgTTL(kv.TTL(h.cfg.TTL)))
	return err
}

func pidAlive(pid int) bool {
	return pid > 0 && syscall.Kill(pid, 0) == nil
}

// discover starts watching the teams it serves that it does not watch
// yet.
func (h *Host) discover(ctx context.Context) {
	ids, err := h.cfg.Spawner.Svc.ListTeams(ctx)
	if err != nil {
		h.log.Warn("list teams", "err", err)
		return
	}
	for _, id := range ids {
		h.mu.Lock()
		seen := h.teams[id]
		h.mu.Unlock()
		if seen || !h.serves(id) {
			continue
		}
		t, err := h.cfg.Spawner.Svc.Team(ctx, id)
		if err != nil || t.Closed() {
			continue
		}
		h.mu.Lock()
		h.teams[id] = true
		h.mu.Unlock()
		h.cfg.Spawner.Svc.LogEvent(ctx, id, EvHostJoined, "", map[string]any{"host": h.cfg.Name, "machine": Machine(), "max": h.cfg.Max, "pid": os.Getpid()})
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			h.watchTeam(ctx, id)
		}()
	}
}

// watchTeam watches the member records of a team and restarts the crashed
// ones.
func (h *Host) watchTeam(ctx context.Context, team string) {
	for ctx.Err() == nil {
		bucket, err := h.reg.js.KeyValue(ctx, kv.StatePrefix+team)
		if err != nil {
			h.forget(team)
			return // deleted: discover finds it again if it comes back
		}
		w, err := bucket.WatchFiltered(ctx, []string{kv.MemberKey("*")})
		if err != nil {
			h.log.Warn("watch team", "team", team, "err", err)
			sleep(ctx, time.Second)
			continue
		}
		for e := range w.Updates() {
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			var m teambus.Member
			if json.Unmarshal(e.Value(), &m) != nil || m.Status != teambus.MemberCrashed {
				continue
			}
			h.respawn(ctx, team, m.ID)
		}
		_ = w.Stop()
	}
}

func (h *Host) forget(team string) {
	h.mu.Lock()
	delete(h.teams, team)
	h.mu.Unlock()
}

// respawn restarts a crashed member if it is this host's to restart.
func (h *Host) respawn(ctx context.Context, team, member string) {
	key := team + "." + member
	h.mu.Lock()
	if h.inflight[key] || (h.cfg.Max > 0 && h.running >= h.cfg.Max) {
		h.mu.Unlock()
		return
	}
	h.inflight[key] = true
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.inflight, key)
		h.mu.Unlock()
	}()
	res, st, err := h.cfg.Spawner.Respawn(ctx, team, member)
	if err != nil {
		h.log.Warn("respawn", "team", team, "member", member, "err", err)
		return
	}
	if res != nil {
		h.track(st)
		h.reclaim(ctx, res)
	}
}

// reclaimWithin bounds the wait for a respawned session to register.
const reclaimWithin = 2 * time.Minute

// reclaim gives the crashed incarnation's task back to the new one when
// it registers, in the background.
func (h *Host) reclaim(ctx context.Context, res *Result) {
	if res.Reclaim == "" {
		return
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		rctx, cancel := context.WithTimeout(ctx, reclaimWithin)
		defer cancel()
		if _, err := h.cfg.Spawner.Reclaim(rctx, res.Team, res.Member, res.Epoch, res.Reclaim); err != nil && ctx.Err() == nil {
			h.log.Warn("reclaim", "team", res.Team, "member", res.Member, "task", res.Reclaim, "err", err)
		}
	}()
}

// track counts a started session until its process exits.
func (h *Host) track(st Started) {
	if st.Wait == nil {
		return
	}
	h.mu.Lock()
	h.running++
	h.mu.Unlock()
	go func() {
		_ = st.Wait()
		h.mu.Lock()
		h.running--
		h.mu.Unlock()
	}()
}

// rescanAll looks at every watched team's spawn records again: a crash
// this host skipped while the member's own host still looked alive is
// its to restart once that host is gone. With lost set, only the members
// of that host.
func (h *Host) rescanAll(ctx context.Context, lost string) {
	h.mu.Lock()
	teams := make([]string, 0, len(h.teams))
	for t := range h.teams {
		teams = append(teams, t)
	}
	h.mu.Unlock()
	gone := map[string]bool{} // host name: no longer registered
	for _, t := range teams {
		recs, err := h.reg.Records(ctx, t)
		if err != nil {
			continue
		}
		if lost == "" {
			h.judgeGone(ctx, t, recs, gone)
		}
		for member, rec := range recs {
			if lost == "" || rec.Host == lost {
				h.respawn(ctx, t, member)
			}
		}
	}
}

// judgeGone judges again the members of team started by hosts that are
// gone: a member whose heartbeat was still fresh when its host was lost
// (it dies with its host, its sidecar too, but the loss came first) is
// crashed once its heartbeat goes stale, so it is not left "running"
// until someone looks.
func (h *Host) judgeGone(ctx context.Context, team string, recs map[string]*Record, gone map[string]bool) {
	judged := map[string]bool{}
	for _, rec := range recs {
		host := rec.Host
		if host == "" || host == h.cfg.Name || judged[host] {
			continue
		}
		g, seen := gone[host]
		if !seen {
			_, err := h.reg.Host(ctx, host)
			g = errors.Is(err, teambus.ErrNotFound)
			gone[host] = g
		}
		if !g {
			continue
		}
		judged[host] = true
		crashed, err := h.cfg.Spawner.JudgeLost(ctx, team, host)
		if err != nil {
			h.log.Warn("judge the members of a lost host", "team", team, "lost", host, "err", err)
		}
		if len(crashed) > 0 {
			h.log.Warn("members of a lost host stopped beating", "team", team, "lost", host, "crashed", crashed)
		}
	}
}

// lost handles the expiry of another host's key (revision rev of its
// marker): its members that no longer beat are judged crashed, the loss is
// logged once (whichever host records it first), and its crashed members
// are restarted here if this host wins their claim.
func (h *Host) lost(ctx context.Context, name string, rev uint64) {
	first := false
	if _, err := h.reg.hosts.Create(ctx, "_lost."+name+"."+strconv.FormatUint(rev, 10), []byte(h.cfg.Name), jetstream.KeyTTL(2*hostMarkerTTL)); err == nil {
		first = true
	}
	h.mu.Lock()
	teams := make([]string, 0, len(h.teams))
	for t := range h.teams {
		teams = append(teams, t)
	}
	h.mu.Unlock()
	for _, t := range teams {
		recs, err := h.reg.Records(ctx, t)
		if err != nil {
			continue
		}
		had := false
		for _, rec := range recs {
			had = had || rec.Host == name
		}
		if !had {
			continue
		}
		crashed, err := h.cfg.Spawner.JudgeLost(ctx, t, name)
		if err != nil {
			h.log.Warn("judge the members of a lost host", "team", t, "lost", name, "err", err)
		}
		if first {
			h.cfg.Spawner.Svc.LogEvent(ctx, t, EvHostLost, "", map[string]any{"host": name, "seen_by": h.cfg.Name, "crashed": nonNil(crashed)})
		}
	}
	h.log.Warn("host lost", "lost", name)
	h.rescanAll(ctx, name)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// wireReply is a host's answer to a spawn request.
type wireReply struct {
	Result *Result `json:"result,omitempty"`
	Error  string  `json:"error,omitempty"`
	Code   int     `json:"code,omitempty"`
}

// handleSpawn runs a spawn request addressed to this host.
func (h *Host) handleSpawn(ctx context.Context, r micro.Request) {
	reply := func(w wireReply) {
		b, _ := json.Marshal(w)
		_ = r.Respond(b)
	}
	fail := func(err error) {
		reply(wireReply{Error: err.Error(), Code: teambus.ExitCode(err)})
	}
	var req Request
	if err := json.Unmarshal(r.Data(), &req); err != nil {
		fail(teambus.Invalidf("bad spawn request: %v", err))
		return
	}
	if err := req.Spec.Validate(); err != nil {
		fail(err)
		return
	}
	if !h.serves(req.Spec.Team) {
		fail(teambus.Invalidf("host %s does not serve team %s (its teams: %s)", h.cfg.Name, req.Spec.Team, strings.Join(h.cfg.Teams, ", ")))
		return
	}
	h.mu.Lock()
	full := h.cfg.Max > 0 && h.running >= h.cfg.Max
	h.mu.Unlock()
	if full {
		fail(teambus.Unavailablef("host %s runs %d sessions, its --max: try later or another host", h.cfg.Name, h.cfg.Max))
		return
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, st, err := h.cfg.Spawner.Spawn(sctx, req)
	if err != nil {
		fail(err)
		return
	}
	h.track(st)
	h.reclaim(ctx, res)
	reply(wireReply{Result: res})
}

// registered reports whether host has a registration, read without
// creating anything; when the registry can not be read it says yes, so
// the caller's error stays a transient one.
func registered(ctx context.Context, nc *nats.Conn, host string) bool {
	js, err := jetstream.New(nc)
	if err != nil {
		return true
	}
	hosts, err := js.KeyValue(ctx, HostBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return false
	}
	if err != nil {
		return true
	}
	_, err = hosts.Get(ctx, host)
	return !errors.Is(err, jetstream.ErrKeyNotFound)
}

// RemoteSpawn asks host to run req.
func RemoteSpawn(ctx context.Context, nc *nats.Conn, host string, req Request) (*Result, error) {
	if err := ValidateHost(host); err != nil {
		return nil, err
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	msg, err := nc.RequestWithContext(ctx, SpawnSubject(host), b)
	if errors.Is(err, nats.ErrNoResponders) {
		if !registered(ctx, nc, host) {
			return nil, teambus.NotFoundf("no host %s is running (`teambus bus status` lists the hosts; `teambus host --name %s` starts it)", host, host)
		}
		return nil, teambus.Unavailablef("host %s does not answer: is `teambus host --name %s` running?", host, host)
	}
	if err != nil {
		return nil, teambus.Unavailablef("spawn on host %s: %w", host, err)
	}
	var w wireReply
	if err := json.Unmarshal(msg.Data, &w); err != nil {
		return nil, fmt.Errorf("reply of host %s: %w", host, err)
	}
	switch {
	case w.Error == "":
		return w.Result, nil
	case w.Code == teambus.ExitPermanent:
		return nil, teambus.Invalidf("host %s: %s", host, w.Error)
	case w.Code == teambus.ExitConflict:
		return nil, teambus.Conflictf("host %s: %s", host, w.Error)
	default:
		return nil, teambus.Unavailablef("host %s: %s", host, w.Error)
	}
}
