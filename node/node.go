package node

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/internal/atomicfile"
)

// ErrNotLoopback marks a listen address refused because it is not
// loopback and NodeConfig.AllowRemote is not set.
var ErrNotLoopback = errors.New("not a loopback address")

// ErrNotRunning marks a Stop that found no node running in its directory:
// there was nothing to stop.
var ErrNotRunning = errors.New("no bus node runs")

// Defaults of NodeConfig.
const (
	// DefaultListen is the client address of a local node.
	DefaultListen = "127.0.0.1:4222"
	// DefaultSyncInterval is the fsync interval of bus.SyncModeInterval.
	DefaultSyncInterval = 2 * time.Minute
	// DefaultMaxStore is the disk the node's JetStream store may use.
	DefaultMaxStore int64 = 64 << 30
	// DefaultMaxMemory is the memory the node's JetStream may use for
	// memory streams.
	DefaultMaxMemory int64 = 256 << 20
	// DefaultClusterName is the cluster name when routes are configured
	// without one.
	DefaultClusterName = "teambus"
	// DefaultReadyTimeout bounds how long Start waits for the server.
	DefaultReadyTimeout = 10 * time.Second
)

// Files of a node directory, next to DiscoveryFile.
const (
	// LockFile is held (flock) by the node that runs in the directory.
	LockFile = "bus.lock"
	// TokenFile keeps the generated auth token across restarts, mode 0600.
	TokenFile = "bus.token"
	// StoreDir is the subdirectory of the JetStream store; the server adds
	// "jetstream" below it.
	StoreDir = "store"
)

// routeUser is the user name nodes of a cluster authenticate routes with;
// the password is the node token.
const routeUser = "teambus"

// NodeConfig configures an embedded bus node. The zero value of every
// field but Dir means its default.
type NodeConfig struct {
	// Dir is the node directory: lock, discovery file, token and store.
	Dir string
	// Name is the server name; default host name plus a hash of Dir.
	// Nodes of a cluster need distinct names.
	Name string
	// Listen is the client address host:port, default DefaultListen. Port 0
	// or -1 picks a free port. It must be a loopback address unless
	// AllowRemote is set.
	Listen string
	// AllowRemote allows Listen and ClusterListen on non-loopback
	// addresses. Anyone who can reach the port and knows the token can
	// read and write every team.
	AllowRemote bool
	// HTTP is the monitoring address host:port (loopback only, it has no
	// auth); empty turns monitoring off. Port 0 picks a free port.
	HTTP string
	// Sync is bus.SyncModeAlways (default) or bus.SyncModeInterval.
	Sync string
	// SyncInterval is the fsync interval of bus.SyncModeInterval, default
	// DefaultSyncInterval. It is ignored with bus.SyncModeAlways.
	SyncInterval time.Duration
	// MaxStore is the disk limit of the store in bytes, default
	// DefaultMaxStore.
	MaxStore int64
	// MaxMemory is the memory limit of memory streams in bytes, default
	// DefaultMaxMemory.
	MaxMemory int64
	// MemberMaxConns is how many connections one member credential may
	// hold at once, default MemberMaxConns.
	MemberMaxConns int
	// Token is the auth token clients must present. Empty means the token
	// kept in TokenFile, or a new random one written there.
	Token string
	// Logger receives the server's warnings and errors; default
	// slog.Default().
	Logger *slog.Logger
	// Debug also logs the server's notices (Info) and debug lines (Debug).
	Debug bool
	// ReadyTimeout bounds the start, default DefaultReadyTimeout.
	ReadyTimeout time.Duration

	// ClusterName names the cluster, default DefaultClusterName when
	// ClusterListen is set.
	ClusterName string
	// ClusterListen is the route address host:port; empty means no
	// cluster. It must be loopback unless AllowRemote is set.
	ClusterListen string
	// Routes are the route URLs of the other nodes (nats://host:port or
	// host:port). Every node of a cluster must use the same Token: it
	// authenticates the routes as well as the clients.
	Routes []string

	// Attach, if set, runs once the node is ready, before Start returns:
	// what it starts (the team service) is closed by Close before the
	// server stops. An error fails Start.
	Attach func(n *Node) (io.Closer, error)
}

// Validate checks the configuration without touching the disk or the
// network.
func (c NodeConfig) Validate() error {
	_, err := c.plan()
	return err
}

// nodePlan is a validated NodeConfig with defaults applied and addresses
// parsed.
type nodePlan struct {
	cfg         NodeConfig
	host        string
	port        int
	httpHost    string
	httpPort    int
	clusterHost string
	clusterPort int
	routes      []*url.URL
}

func (c NodeConfig) plan() (*nodePlan, error) {
	if c.Dir == "" {
		return nil, teambus.Invalidf("bus node: no directory: set --dir or TEAMBUS_DIR")
	}
	dir, err := filepath.Abs(c.Dir)
	if err != nil {
		return nil, teambus.Invalidf("bus node directory %q: %w", c.Dir, err)
	}
	c.Dir = dir
	c.Listen = orDefault(c.Listen, DefaultListen)
	c.Sync = orDefault(c.Sync, bus.SyncModeAlways)
	if c.SyncInterval == 0 {
		c.SyncInterval = DefaultSyncInterval
	}
	if c.MaxStore == 0 {
		c.MaxStore = DefaultMaxStore
	}
	if c.MaxMemory == 0 {
		c.MaxMemory = DefaultMaxMemory
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	p := &nodePlan{cfg: c}

	if p.host, p.port, err = parseAddr("listen", c.Listen, c.AllowRemote); err != nil {
		return nil, err
	}
	if c.HTTP != "" {
		if p.httpHost, p.httpPort, err = parseAddr("http", c.HTTP, false); err != nil {
			return nil, err
		}
	}
	switch c.Sync {
	case bus.SyncModeAlways, bus.SyncModeInterval:
	default:
		return nil, teambus.Invalidf("invalid sync mode %q: must be %s or %s", c.Sync, bus.SyncModeAlways, bus.SyncModeInterval)
	}
	if c.SyncInterval < 0 {
		return nil, teambus.Invalidf("invalid sync interval %s: must be positive", c.SyncInterval)
	}
	if c.MaxStore < 0 || c.MaxMemory < 0 {
		return nil, teambus.Invalidf("invalid store limits (store %d, memory %d bytes): must be positive", c.MaxStore, c.MaxMemory)
	}
	if strings.ContainsAny(c.Token, " \t\r\n") {
		return nil, teambus.Invalidf("invalid token: must not contain white space")
	}
	if strings.ContainsAny(c.Name, " \t\r\n") {
		return nil, teambus.Invalidf("invalid server name %q: must not contain white space", c.Name)
	}

	if c.ClusterListen == "" {
		if len(c.Routes) > 0 || c.ClusterName != "" {
			return nil, teambus.Invalidf("cluster routes or name given without a cluster listen address")
		}
		return p, nil
	}
	p.cfg.ClusterName = orDefault(c.ClusterName, DefaultClusterName)
	if strings.ContainsAny(p.cfg.ClusterName, " \t\r\n") {
		return nil, teambus.Invalidf("invalid cluster name %q: must not contain white space", p.cfg.ClusterName)
	}
	if p.clusterHost, p.clusterPort, err = parseAddr("cluster listen", c.ClusterListen, c.AllowRemote); err != nil {
		return nil, err
	}
	for _, r := range c.Routes {
		u, err := parseRoute(r)
		if err != nil {
			return nil, err
		}
		p.routes = append(p.routes, u)
	}
	return p, nil
}

// parseAddr parses host:port. Port 0 and -1 pick a free port (-1 for
// nats-server, where 0 means its default port). A non-loopback host is
// refused unless remote is allowed.
func parseAddr(what, addr string, remote bool) (string, int, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, teambus.Invalidf("invalid %s address %q: want host:port, e.g. %s", what, addr, DefaultListen)
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < -1 || port > 65535 {
		return "", 0, teambus.Invalidf("invalid %s address %q: port must be 0-65535 (0 picks a free port)", what, addr)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	if !remote && !isLoopback(host) {
		return "", 0, teambus.Invalidf("refusing %s address %q: %w: the node listens on loopback only (127.0.0.1, ::1, localhost) unless remote clients are allowed", what, addr, ErrNotLoopback)
	}
	return host, port, nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func parseRoute(r string) (*url.URL, error) {
	s := strings.TrimSpace(r)
	if !strings.Contains(s, "://") {
		s = "nats://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Port() == "" {
		return nil, teambus.Invalidf("invalid route %q: want nats://host:port", r)
	}
	return u, nil
}

// options builds the server options. Routes without credentials get the
// route user and the token, as the node expects from its peers.
func (p *nodePlan) options(token string) *server.Options {
	c := p.cfg
	o := &server.Options{
		ServerName:             c.Name,
		Host:                   p.host,
		Port:                   p.port,
		NoSigs:                 true,
		JetStream:              true,
		StoreDir:               filepath.Join(c.Dir, StoreDir),
		JetStreamMaxStore:      c.MaxStore,
		JetStreamMaxMemory:     c.MaxMemory,
		SyncAlways:             c.Sync == bus.SyncModeAlways,
		DisableJetStreamBanner: true,
		// nats-server 2.15 caps a stream at 1,000 consumers unless told
		// otherwise; a mailbox has two per member, so that capped a team
		// at 499 members. teambus bounds a team by its store limits.
		JetStreamLimits: server.JSLimitOpts{DefaultMaxConsumers: -1},
	}
	if c.Sync == bus.SyncModeInterval {
		o.SyncInterval = c.SyncInterval
	}
	if o.ServerName == "" {
		o.ServerName = defaultName(c.Dir)
	}
	if p.httpPort != 0 {
		o.HTTPHost, o.HTTPPort = p.httpHost, p.httpPort
	}
	if c.ClusterListen != "" {
		o.Cluster = server.ClusterOpts{
			Name:     c.ClusterName,
			Host:     p.clusterHost,
			Port:     p.clusterPort,
			Username: routeUser,
			Password: token,
		}
		for _, r := range p.routes {
			u := *r
			if u.User == nil {
				u.User = url.UserPassword(routeUser, token)
			}
			o.Routes = append(o.Routes, &u)
		}
	}
	return o
}

// defaultName is the host name plus a short hash of the directory: stable
// across restarts, distinct for two nodes on one host.
func defaultName(dir string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "teambus"
	}
	host = strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' {
			return '-'
		}
		return r
	}, host)
	sum := sha256.Sum256([]byte(dir))
	return host + "-" + hex.EncodeToString(sum[:4])
}

// Node is a running embedded bus node: a NATS server with JetStream that
// holds the lock of its directory and advertises itself through the
// discovery file.
type Node struct {
	s         *server.Server
	log       *slog.Logger
	dir       string
	disc      bus.Discovery
	syncMode  string
	syncEvery time.Duration
	monitor   string
	lock      *os.File
	done      chan struct{}

	authConn *nats.Conn         // the node's own connection for member credentials
	health   healthState        // answers bus.HealthSubject, checks the store
	authStop context.CancelFunc // stops the credential watch
	attached io.Closer          // what NodeConfig.Attach started

	closeOnce sync.Once
	closeErr  error
}

// Start starts a node in cfg.Dir and returns when it accepts clients and
// its discovery file is written. A second node on the same directory is
// refused with an ErrState error naming the running one.
func Start(ctx context.Context, cfg NodeConfig) (*Node, error) {
	p, err := cfg.plan()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, teambus.Unavailablef("start bus node: %w", err)
	}
	c := p.cfg
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("create bus node directory: %w", err)
	}
	lock, err := lockDir(c.Dir)
	if err != nil {
		return nil, err
	}
	n, err := launch(ctx, p, lock)
	if err != nil {
		unlock(lock)
		return nil, err
	}
	return n, nil
}

// start runs the server of a locked directory.
func launch(ctx context.Context, p *nodePlan, lock *os.File) (*Node, error) {
	c := p.cfg
	token := c.Token
	if token == "" {
		var err error
		if token, err = loadToken(c.Dir); err != nil {
			return nil, err
		}
	}
	opts := p.options(token)
	auth := &authenticator{token: token, log: c.Logger, conns: connLimit{max: c.MemberMaxConns}}
	opts.CustomClientAuthentication = auth
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, teambus.Invalidf("configure bus node: %w", err)
	}
	if err := exportService(s); err != nil {
		return nil, teambus.Invalidf("configure bus node: export team service: %w", err)
	}
	auth.mu.Lock()
	auth.s = s
	auth.mu.Unlock()
	logger := &serverLogger{log: c.Logger, verbose: c.Debug}
	s.SetLoggerV2(logger, c.Debug, false, false)

	// Start returns once the listeners are up, or early after a fatal
	// error (port in use, store unusable) that only the logger sees.
	s.Start()
	logger.started.Store(true)
	fail := func(format string, args ...any) error {
		s.Shutdown()
		s.WaitForShutdown()
		return teambus.Unavailablef(format, args...)
	}
	if msg := logger.fatalText(); msg != "" {
		if strings.Contains(msg, "listen") {
			return nil, fail("start bus node in %s: %s: is another server using the address? pick another with --listen", c.Dir, msg)
		}
		return nil, fail("start bus node in %s: %s", c.Dir, msg)
	}
	wait := c.ReadyTimeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
		wait = max(time.Until(dl), time.Millisecond)
	}
	if !s.ReadyForConnections(wait) {
		return nil, fail("start bus node in %s: not ready after %s", c.Dir, wait)
	}
	addr, ok := s.Addr().(*net.TCPAddr)
	if !ok {
		return nil, fail("start bus node in %s: no client listener", c.Dir)
	}
	jsc := s.JetStreamConfig()
	if jsc == nil {
		return nil, fail("start bus node in %s: JetStream did not start", c.Dir)
	}
	n := &Node{
		s:         s,
		log:       c.Logger,
		dir:       c.Dir,
		syncMode:  c.Sync,
		syncEvery: c.SyncInterval,
		lock:      lock,
		done:      make(chan struct{}),
		disc: bus.Discovery{
			URL:       clientURL(p.host, addr.Port),
			Token:     token,
			PID:       os.Getpid(),
			Version:   server.VERSION,
			StoreDir:  jsc.StoreDir,
			Sync:      c.Sync,
			StartedAt: time.Now().UTC(),
		},
	}
	if m := s.MonitorAddr(); m != nil {
		n.monitor = "http://" + net.JoinHostPort(clientHost(p.httpHost), strconv.Itoa(m.Port))
	}
	if err := n.CheckSync(); err != nil {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, err
	}
	if err := n.attachAuth(auth, token); err != nil {
		return nil, fail("start bus node in %s: credential watch: %w", c.Dir, err)
	}
	if err := atomicfile.WriteJSON(filepath.Join(c.Dir, bus.DiscoveryFile), n.disc, 0o600); err != nil {
		n.authStop()
		n.authConn.Close()
		s.Shutdown()
		s.WaitForShutdown()
		return nil, fmt.Errorf("write discovery file: %w", err)
	}
	n.serveHealth(token)
	if c.Attach != nil {
		a, err := c.Attach(n)
		if err != nil {
			n.stopHealth()
			n.authStop()
			n.authConn.Close()
			_ = os.Remove(filepath.Join(c.Dir, bus.DiscoveryFile)) // a stale discovery file is also replaced by the next start
			return nil, fail("start bus node in %s: %w", c.Dir, err)
		}
		n.attached = a
	}
	go func() {
		s.WaitForShutdown()
		close(n.done)
	}()
	return n, nil
}

// clientURL is the URL local clients dial: an unspecified listen host
// (all interfaces) is reached on 127.0.0.1.
func clientURL(host string, port int) string {
	return "nats://" + net.JoinHostPort(clientHost(host), strconv.Itoa(port))
}

func clientHost(host string) string {
	if host == "" {
		return "127.0.0.1"
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return "127.0.0.1"
	}
	return host
}

// URL is the client URL of the node, with the port it really listens on.
func (n *Node) URL() string { return n.disc.URL }

// Token is the auth token clients must present.
func (n *Node) Token() string { return n.disc.Token }

// Dir is the absolute node directory.
func (n *Node) Dir() string { return n.dir }

// MonitorURL is the URL of the monitoring endpoint, empty when it is off.
func (n *Node) MonitorURL() string { return n.monitor }

// Discovery is what the node wrote into its discovery file.
func (n *Node) Discovery() bus.Discovery { return n.disc }

// Server is the embedded NATS server.
func (n *Node) Server() *server.Server { return n.s }

// InProcess is the provider for in-process connections (no TCP).
func (n *Node) InProcess() nats.InProcessConnProvider { return n.s }

// Connect opens an in-process connection to the node.
func (n *Node) Connect(ctx context.Context) (*bus.Conn, error) {
	return bus.Connect(ctx, bus.ConnectConfig{Dir: n.dir, InProcess: n.s, Token: n.disc.Token, Name: "teambus-node"})
}

// Done is closed when the server has shut down, by Close or on its own.
func (n *Node) Done() <-chan struct{} { return n.done }

// CheckSync verifies that the running JetStream uses the configured sync
// mode: with bus.SyncModeAlways the server must fsync before acknowledging.
func (n *Node) CheckSync() error {
	jsc := n.s.JetStreamConfig()
	if jsc == nil {
		return teambus.Unavailablef("bus node in %s: JetStream is not running", n.dir)
	}
	want := n.syncMode == bus.SyncModeAlways
	if jsc.SyncAlways != want {
		return teambus.Statef("bus node in %s: configured sync %s but JetStream runs with sync_always=%t", n.dir, n.syncMode, jsc.SyncAlways)
	}
	if !want && jsc.SyncInterval != n.syncEvery {
		return teambus.Statef("bus node in %s: configured sync interval %s but JetStream runs with %s", n.dir, n.syncEvery, jsc.SyncInterval)
	}
	return nil
}

// Close removes the discovery file, shuts the server down, waits for it
// and releases the directory lock. It is safe to call more than once.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		err := os.Remove(filepath.Join(n.dir, bus.DiscoveryFile))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			n.closeErr = fmt.Errorf("remove discovery file: %w", err)
		}
		if n.attached != nil {
			if err := n.attached.Close(); err != nil && n.closeErr == nil {
				n.closeErr = err
			}
		}
		n.stopHealth()
		n.authStop()
		n.authConn.Close()
		n.s.Shutdown()
		n.s.WaitForShutdown()
		<-n.done
		unlock(n.lock)
	})
	return n.closeErr
}

// Run starts a node, logs "bus node ready" and serves until ctx is done,
// then closes the node. It returns nil after a cancel, and an error when
// the node could not start or stopped on its own.
func Run(ctx context.Context, cfg NodeConfig) error {
	n, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	attrs := []any{"url", n.URL(), "dir", n.dir, "sync", n.syncMode, "pid", n.disc.PID, "version", n.disc.Version}
	if n.monitor != "" {
		attrs = append(attrs, "monitor", n.monitor)
	}
	n.log.Info("bus node ready", attrs...)
	if n.syncMode == bus.SyncModeInterval {
		n.log.Warn("sync interval: acknowledged messages may be lost on power loss or OS crash, not on a process crash", "interval", n.syncEvery)
	}
	select {
	case <-ctx.Done():
		err := n.Close()
		n.log.Info("bus node stopped", "dir", n.dir)
		return err
	case <-n.Done():
		_ = n.Close() // the start error is the one to report
		return teambus.Unavailablef("bus node in %s stopped unexpectedly: see the log above", n.dir)
	}
}

// Stop asks the node that runs in dir to stop (SIGTERM) and waits until
// it has released the directory, up to the ctx deadline (30s without
// one). With no node running it returns an ErrUnavailable error and
// removes a discovery file left by a crashed node; a node of this very
// process is refused (ErrState): close it instead.
func Stop(ctx context.Context, dir string) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	d, derr := bus.ReadDiscovery(dir)
	held, lockPID, err := probeLock(dir, true)
	if err != nil {
		return err
	}
	if !held {
		return teambus.Unavailablef("%w in %s", ErrNotRunning, dir)
	}
	pid := lockPID
	if derr == nil && d.PID > 0 {
		pid = d.PID
	}
	if pid <= 0 {
		return teambus.Unavailablef("a bus node holds %s but its pid is unknown: retry in a moment", filepath.Join(dir, LockFile))
	}
	if pid == os.Getpid() {
		return teambus.Statef("the bus node in %s runs in this process: close it instead", dir)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop bus node (pid %d) in %s: %w", pid, dir, err)
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		held, _, err := probeLock(dir, false)
		if err != nil {
			return err
		}
		if !held {
			return nil
		}
		select {
		case <-ctx.Done():
			return teambus.Unavailablef("bus node (pid %d) in %s did not stop in time: %v", pid, dir, ctx.Err())
		case <-tick.C:
		}
	}
}

// lockedError reports a directory that another node holds.
func lockedError(dir string) error {
	what := ""
	if d, err := bus.ReadDiscovery(dir); err == nil {
		what = fmt.Sprintf(" (pid %d, %s)", d.PID, d.URL)
	} else if pid := readLockPID(dir); pid > 0 {
		what = fmt.Sprintf(" (pid %d, starting)", pid)
	}
	return teambus.Statef("a bus node already runs in %s%s: stop it with `teambus bus stop --dir %s`", dir, what, dir)
}

// lockDir takes the exclusive lock of dir and writes our pid into it.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := flock(f); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, lockedError(dir)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0) // the pid in the lock file is informational (bus stop finds the node by the discovery file)
	}
	return f, nil
}

func flock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

func unlock(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) // closing the file releases the lock too
	_ = f.Close()                                   // read-only use: nothing to lose
}

// probeLock reports whether a node holds the lock of dir, and the pid
// written into the lock file. When the lock is free and cleanStale is set,
// a discovery file left behind by a crashed node is removed while the lock
// is briefly held, so no starting node loses its fresh one.
func probeLock(dir string, cleanStale bool) (held bool, pid int, err error) {
	f, err := os.Open(filepath.Join(dir, LockFile))
	if errors.Is(err, os.ErrNotExist) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("open lock file: %w", err)
	}
	defer f.Close()
	if err := flock(f); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return true, readLockPID(dir), nil
		}
		return false, 0, fmt.Errorf("probe lock of %s: %w", dir, err)
	}
	if cleanStale {
		_ = os.Remove(filepath.Join(dir, bus.DiscoveryFile)) // a stale discovery file is also replaced by the next start
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) // closing the file releases the lock too
	return false, 0, nil
}

func readLockPID(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, LockFile))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// loadToken returns the token kept in dir, creating a random one the
// first time, so clients that reconnect after a restart still get in.
func loadToken(dir string) (string, error) {
	path := filepath.Join(dir, TokenFile)
	b, err := os.ReadFile(path)
	if err == nil {
		if tok := strings.TrimSpace(string(b)); tok != "" {
			return tok, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read token file: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	tok := hex.EncodeToString(raw)
	if err := atomicfile.Write(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write token file: %w", err)
	}
	return tok, nil
}

// serverLogger routes the server's log to slog. Notices and debug lines
// pass only in verbose mode. A fatal error during the start is kept for
// Start to return instead of being logged: the server's own logger would
// exit the process.
type serverLogger struct {
	log     *slog.Logger
	verbose bool
	started atomic.Bool

	mu    sync.Mutex
	fatal string
}

const serverLogMsg = "nats server"

func (l *serverLogger) Noticef(format string, v ...any) {
	if l.verbose {
		l.log.Info(serverLogMsg, "line", fmt.Sprintf(format, v...))
	}
}

func (l *serverLogger) Warnf(format string, v ...any) {
	l.log.Warn(serverLogMsg, "line", fmt.Sprintf(format, v...))
}

func (l *serverLogger) Errorf(format string, v ...any) {
	l.log.Error(serverLogMsg, "line", fmt.Sprintf(format, v...))
}

func (l *serverLogger) Fatalf(format string, v ...any) {
	line := fmt.Sprintf(format, v...)
	if !l.started.Load() {
		l.mu.Lock()
		if l.fatal == "" {
			l.fatal = line
		}
		l.mu.Unlock()
		return
	}
	l.log.Error(serverLogMsg, "line", line, "fatal", true)
}

func (l *serverLogger) Debugf(format string, v ...any) {
	if l.verbose {
		l.log.Debug(serverLogMsg, "line", fmt.Sprintf(format, v...))
	}
}

func (l *serverLogger) Tracef(format string, v ...any) {
	if l.verbose {
		l.log.Debug(serverLogMsg, "line", fmt.Sprintf(format, v...))
	}
}

func (l *serverLogger) fatalText() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fatal
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
