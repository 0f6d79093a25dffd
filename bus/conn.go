package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
)

// DiscoveryFile is the name of the file a running node writes into its
// directory: its client URL and auth token, mode 0600.
const DiscoveryFile = "bus.json"

// MinServerVersion is the oldest NATS server teambus works with.
const MinServerVersion = "2.11.0"

// Sync modes of a node: when the store fsyncs.
const (
	// SyncModeAlways fsyncs every write before it is acknowledged. An
	// acknowledged message survives a process crash, an OS crash and a
	// power loss. This is the default.
	SyncModeAlways = "always"
	// SyncModeInterval writes every message to the OS before acknowledging
	// it and fsyncs every SyncInterval. An acknowledged message survives a
	// process crash (kill -9) but may be lost on power loss or an OS crash.
	SyncModeInterval = "interval"
)

// Discovery is the content of the discovery file.
type Discovery struct {
	URL       string    `json:"url"`
	Token     string    `json:"token"`
	PID       int       `json:"pid"`
	Version   string    `json:"version"`
	StoreDir  string    `json:"store_dir"`
	Sync      string    `json:"sync"`
	StartedAt time.Time `json:"started_at"`
}

// ReadDiscovery reads the discovery file of the node that runs in dir.
func ReadDiscovery(dir string) (*Discovery, error) {
	path := filepath.Join(dir, DiscoveryFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, teambus.Unavailablef("no bus node runs in %s: start one with `teambus bus start --dir %s`, or pass --server", dir, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("read discovery file: %w", err)
	}
	var d Discovery
	if err := json.Unmarshal(b, &d); err != nil || d.URL == "" {
		return nil, teambus.Unavailablef("discovery file %s is damaged: restart the node with `teambus bus start --dir %s`", path, dir)
	}
	return &d, nil
}

// ConnectConfig says how to reach the bus: a local node found through Dir,
// or an external NATS deployment at Server with credentials.
type ConnectConfig struct {
	Dir     string        // node directory, read when Server is empty
	Server  string        // external NATS URL(s), comma separated
	Creds   string        // NATS credentials file
	Token   string        // auth token
	User    string        // user name
	Pass    string        // password
	TLSCA   string        // CA file for TLS
	TLSCert string        // client certificate
	TLSKey  string        // client key
	Name    string        // connection name shown by the server
	Timeout time.Duration // connect and request timeout; default 5s
	// InboxPrefix replaces _INBOX as the prefix of reply subjects; a member
	// credential needs its own (MemberInboxPrefix). A teambus credentials
	// file in Creds sets it.
	InboxPrefix string
	// Replicas overrides the replica count Conn.Replicas derives from the
	// cluster; 0 derives it.
	Replicas int
	// InProcess connects to a node in this process without TCP.
	InProcess nats.InProcessConnProvider
	// NoReadyCheck skips asking for the account's JetStream info after
	// connecting (one round trip, and the decoding of a large reply): the
	// first JetStream request then finds a JetStream that is disabled or
	// not ready yet, as an error of that request. For one-shot callers
	// that fail open within a short budget (the Claude Code hooks).
	NoReadyCheck bool
}

// Conn is a connection to the bus: the NATS connection and its JetStream
// context.
type Conn struct {
	NC      *nats.Conn
	JS      jetstream.JetStream
	Timeout time.Duration

	creds    *Creds
	replicas int

	denied *deniedError
}

// Connect opens a connection. A server older than MinServerVersion or
// without JetStream is refused with a clear error.
func Connect(ctx context.Context, cfg ConnectConfig) (*Conn, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	denied := newDeniedError()
	opts := []nats.Option{
		nats.Name(orDefault(cfg.Name, "teambus")),
		nats.ErrorHandler(denied.record),
		nats.Timeout(cfg.Timeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.RetryOnFailedConnect(false),
	}
	// A teambus member credential is a user, a password and an inbox
	// prefix, and may name the bus; any other file is a NATS .creds file.
	var creds *Creds
	if cfg.Creds != "" {
		cr, ok, err := ReadCreds(cfg.Creds)
		if err != nil {
			return nil, err
		}
		if ok {
			creds, cfg.Creds = cr, ""
			cfg.User, cfg.Pass = cr.User, cr.Password
			if cfg.InboxPrefix == "" {
				cfg.InboxPrefix = cr.InboxPrefix
			}
			if cfg.Server == "" && cfg.InProcess == nil && len(cr.Servers) > 0 {
				cfg.Server = strings.Join(cr.Servers, ",")
			}
		}
	}
	if cfg.InboxPrefix == "" && cfg.User != "" {
		// A member user name (team.member) implies its inbox prefix.
		if team, member, ok := strings.Cut(cfg.User, "."); ok && ValidateCredsIDs(team, member) == nil {
			cfg.InboxPrefix = MemberInboxPrefix(team, member)
		}
	}
	if cfg.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(cfg.InboxPrefix))
	}
	url := cfg.Server
	switch {
	case cfg.InProcess != nil:
		opts = append(opts, nats.InProcessServer(cfg.InProcess))
		if cfg.Token != "" {
			opts = append(opts, nats.Token(cfg.Token))
		}
	case url == "":
		d, err := ReadDiscovery(cfg.Dir)
		if err != nil {
			return nil, err
		}
		url = d.URL
		// The node's token is the operator's credential: a member who
		// brought its own never presents it.
		if cfg.Token == "" && cfg.Creds == "" && cfg.User == "" {
			cfg.Token = d.Token
		}
	}
	if cfg.Creds != "" {
		opts = append(opts, nats.UserCredentials(cfg.Creds))
	}
	if cfg.Token != "" && cfg.InProcess == nil {
		opts = append(opts, nats.Token(cfg.Token))
	}
	if cfg.User != "" {
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Pass))
	}
	if cfg.TLSCA != "" {
		opts = append(opts, nats.RootCAs(cfg.TLSCA))
	}
	if cfg.TLSCert != "" || cfg.TLSKey != "" {
		opts = append(opts, nats.ClientCert(cfg.TLSCert, cfg.TLSKey))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		if errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "authorization") {
			return nil, teambus.Invalidf("connect to bus %s: authorization refused: check --token/--creds (the local node's token is in %s)", url, filepath.Join(cfg.Dir, DiscoveryFile))
		}
		return nil, teambus.Unavailablef("connect to bus %s: %w: is the node running? (`teambus bus start`)", orDefault(url, "in-process"), err)
	}
	if v := nc.ConnectedServerVersion(); v != "" && !VersionAtLeast(v, MinServerVersion) {
		nc.Close()
		return nil, teambus.Invalidf("NATS server %s is too old: teambus needs %s or newer (per-key TTL, message TTL)", v, MinServerVersion)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(256))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream context: %w", err)
	}
	c := &Conn{NC: nc, JS: js, Timeout: cfg.Timeout, creds: creds, replicas: cfg.Replicas, denied: denied}
	// A member's account has no JetStream: it reaches its team through
	// the team service only.
	isMember := creds != nil || strings.HasPrefix(cfg.InboxPrefix, inboxRoot+".")
	if isMember || cfg.NoReadyCheck {
		if c.replicas <= 0 {
			c.replicas = AutoReplicas(nc)
		}
		return c, nil
	}
	if err := waitJetStream(ctx, js, cfg.Timeout); err != nil {
		nc.Close()
		if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
			return nil, teambus.Invalidf("NATS server at %s has JetStream disabled: teambus needs JetStream", url)
		}
		return nil, teambus.Unavailablef("bus %s: JetStream not ready: %w", orDefault(url, "in-process"), err)
	}
	if c.replicas <= 0 {
		c.replicas = AutoReplicas(nc)
	}
	return c, nil
}

// Close closes the connection, writing out what is buffered. It is safe
// to call more than once.
func (c *Conn) Close() {
	if c == nil || c.NC == nil || c.NC.IsClosed() {
		return
	}
	// Close writes out what is buffered. A flush round trip before it
	// (PING, wait for PONG) would only confirm that the server read it:
	// nothing written here counts as done without its own ack, so a
	// one-shot command does not wait for that.
	c.NC.Close()
}

// VersionAtLeast compares dotted versions such as "2.15.2" and "2.11.0";
// pre-release suffixes are ignored.
func VersionAtLeast(v, min string) bool {
	a, b := versionParts(v), versionParts(min)
	for i := 0; i < 3; i++ {
		if a[i] != b[i] {
			return a[i] > b[i]
		}
	}
	return true
}

func versionParts(v string) [3]int {
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	var out [3]int
	for i, p := range strings.SplitN(v, ".", 3) {
		n, _ := strconv.Atoi(p)
		out[i] = n
	}
	return out
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
