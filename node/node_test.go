package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/bus/bustest"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/node/nodetest"
)

func TestOpen_StartStop(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "node")
	n, err := node.Start(ctx, node.NodeConfig{Dir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}

	path := filepath.Join(dir, bus.DiscoveryFile)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("discovery file: %v", err)
	}
	if got, want := fi.Mode().Perm(), os.FileMode(0o600); got != want {
		t.Errorf("discovery file mode = %v, want %v", got, want)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("node directory mode = %v (%v), want no group/other access", fi.Mode().Perm(), err)
	}
	d, err := bus.ReadDiscovery(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Token) != 64 || d.Token != n.Token() {
		t.Errorf("token = %q, want 64 hex characters equal to Node.Token %q", d.Token, n.Token())
	}
	if d.PID != os.Getpid() {
		t.Errorf("pid = %d, want %d", d.PID, os.Getpid())
	}
	if d.Sync != bus.SyncModeAlways {
		t.Errorf("sync = %q, want %q", d.Sync, bus.SyncModeAlways)
	}
	if d.Version == "" || d.StartedAt.IsZero() || !strings.HasPrefix(d.StoreDir, filepath.Join(dir, node.StoreDir)) {
		t.Errorf("discovery = %+v: want version, started_at and a store below %s", d, dir)
	}
	if d.URL != n.URL() {
		t.Errorf("discovery url = %q, Node.URL = %q", d.URL, n.URL())
	}
	u, err := url.Parse(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	if port, _ := strconv.Atoi(u.Port()); u.Hostname() != "127.0.0.1" || port <= 0 {
		t.Errorf("url = %q, want 127.0.0.1 and the real port", d.URL)
	}

	// A client in another process would do this: discovery file, TCP, token.
	c, err := bus.Connect(ctx, bus.ConnectConfig{Dir: dir})
	if err != nil {
		t.Fatalf("connect over TCP: %v", err)
	}
	c.Close()
	ic, err := n.Connect(ctx)
	if err != nil {
		t.Fatalf("connect in-process: %v", err)
	}
	ic.Close()

	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	select {
	case <-n.Done():
	default:
		t.Error("Done not closed after Close")
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("discovery file after Close: %v, want it removed", err)
	}
	if _, err := bus.Connect(ctx, bus.ConnectConfig{Server: d.URL, Token: d.Token, Timeout: time.Second}); !errors.Is(err, teambus.ErrUnavailable) {
		t.Errorf("connect after Close = %v, want ErrUnavailable", err)
	}
}

func TestOpen_RandomPort(t *testing.T) {
	for _, listen := range []string{"127.0.0.1:0", "127.0.0.1:-1", "localhost:0", "[::1]:0"} {
		t.Run(listen, func(t *testing.T) {
			if strings.Contains(listen, "::1") {
				l, err := net.Listen("tcp", "[::1]:0")
				if err != nil {
					t.Skipf("no IPv6 loopback: %v", err)
				}
				l.Close()
			}
			n := nodetest.NewBareServerConfig(t, node.NodeConfig{Listen: listen})
			u, err := url.Parse(n.URL())
			if err != nil {
				t.Fatal(err)
			}
			addr := n.Server().Addr().(*net.TCPAddr)
			if got, want := u.Port(), strconv.Itoa(addr.Port); got != want || addr.Port == 4222 {
				t.Errorf("url port = %s, listener port = %s, want equal and random", got, want)
			}
			if !addr.IP.IsLoopback() {
				t.Errorf("listens on %v, want loopback", addr)
			}
			nodetest.Connect(t, n)
			c, err := bus.Connect(testCtx(t), bus.ConnectConfig{Dir: n.Dir()})
			if err != nil {
				t.Fatalf("connect over TCP: %v", err)
			}
			c.Close()
		})
	}
}

func TestConnect_TokenRequired(t *testing.T) {
	n := nodetest.NewBareServer(t)
	ctx := testCtx(t)
	cases := []struct {
		name string
		cfg  bus.ConnectConfig
	}{
		{"tcp no token", bus.ConnectConfig{Server: n.URL()}},
		{"tcp wrong token", bus.ConnectConfig{Server: n.URL(), Token: "not-the-token"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Timeout = 2 * time.Second
			c, err := bus.Connect(ctx, tc.cfg)
			if err == nil {
				c.Close()
				t.Fatal("connected without the token")
			}
			if !errors.Is(err, teambus.ErrInvalid) || !strings.Contains(err.Error(), "authorization") {
				t.Errorf("err = %v, want an authorization ErrInvalid", err)
			}
		})
	}
	c, err := bus.Connect(ctx, bus.ConnectConfig{Server: n.URL(), Token: n.Token()})
	if err != nil {
		t.Fatalf("connect with the token: %v", err)
	}
	c.Close()
}

func TestOpen_SecondNodeSameDirRefused(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	first, err := node.Start(ctx, node.NodeConfig{Dir: dir, Listen: "127.0.0.1:-1"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := node.Start(ctx, node.NodeConfig{Dir: dir, Listen: "127.0.0.1:-1"})
	if err == nil {
		second.Close()
		first.Close()
		t.Fatal("second node on the same directory started")
	}
	if !errors.Is(err, teambus.ErrState) || teambus.ExitCode(err) != teambus.ExitPermanent {
		t.Errorf("err = %v, want ErrState (exit 2)", err)
	}
	for _, want := range []string{
		"a bus node already runs in " + dir,
		fmt.Sprintf("pid %d", os.Getpid()),
		first.URL(),
		"teambus bus stop --dir " + dir,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %q, want it to contain %q", err, want)
		}
	}
	// The refused node must not have touched the running one.
	if d, err := bus.ReadDiscovery(dir); err != nil || d.URL != first.URL() {
		t.Errorf("discovery after refusal = %+v, %v; want the first node's", d, err)
	}

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := node.Start(ctx, node.NodeConfig{Dir: dir, Listen: "127.0.0.1:-1"})
	if err != nil {
		t.Fatalf("open after Close: %v", err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestNodeConfig_Validate(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name    string
		cfg     node.NodeConfig
		wantErr string // empty: valid
	}{
		{"defaults", node.NodeConfig{Dir: dir}, ""},
		{"ipv6 loopback", node.NodeConfig{Dir: dir, Listen: "[::1]:4222"}, ""},
		{"localhost", node.NodeConfig{Dir: dir, Listen: "localhost:4222"}, ""},
		{"no dir", node.NodeConfig{}, "no directory"},
		{"all interfaces", node.NodeConfig{Dir: dir, Listen: "0.0.0.0:4222"}, "loopback only"},
		{"empty host", node.NodeConfig{Dir: dir, Listen: ":4222"}, "loopback only"},
		{"lan address", node.NodeConfig{Dir: dir, Listen: "10.1.2.3:4222"}, "loopback only"},
		{"host name", node.NodeConfig{Dir: dir, Listen: "example.com:4222"}, "loopback only"},
		{"remote allowed", node.NodeConfig{Dir: dir, Listen: "0.0.0.0:4222", AllowRemote: true}, ""},
		{"no port", node.NodeConfig{Dir: dir, Listen: "127.0.0.1"}, "want host:port"},
		{"bad port", node.NodeConfig{Dir: dir, Listen: "127.0.0.1:70000"}, "port must be"},
		{"http remote", node.NodeConfig{Dir: dir, HTTP: "0.0.0.0:8222", AllowRemote: true}, "loopback only"},
		{"http loopback", node.NodeConfig{Dir: dir, HTTP: "127.0.0.1:8222"}, ""},
		{"sync interval", node.NodeConfig{Dir: dir, Sync: bus.SyncModeInterval}, ""},
		{"sync bogus", node.NodeConfig{Dir: dir, Sync: "never"}, "invalid sync mode"},
		{"negative store", node.NodeConfig{Dir: dir, MaxStore: -1}, "must be positive"},
		{"token with space", node.NodeConfig{Dir: dir, Token: "a b"}, "white space"},
		{"routes without cluster", node.NodeConfig{Dir: dir, Routes: []string{"127.0.0.1:6222"}}, "without a cluster listen"},
		{"cluster remote", node.NodeConfig{Dir: dir, ClusterListen: "0.0.0.0:6222"}, "loopback only"},
		{"cluster", node.NodeConfig{Dir: dir, ClusterListen: "127.0.0.1:6222", Routes: []string{"127.0.0.1:6223", "nats://127.0.0.1:6224"}}, ""},
		{"bad route", node.NodeConfig{Dir: dir, ClusterListen: "127.0.0.1:6222", Routes: []string{"nats://"}}, "invalid route"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Validate = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Validate = %v, want an error containing %q", err, tc.wantErr)
			case tc.wantErr != "" && !errors.Is(err, teambus.ErrInvalid):
				t.Errorf("Validate = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestOpen_NonLoopbackRefusedBeforeAnything(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "node")
	_, err := node.Start(testCtx(t), node.NodeConfig{Dir: dir, Listen: "0.0.0.0:-1"})
	if !errors.Is(err, teambus.ErrInvalid) {
		t.Fatalf("Open = %v, want ErrInvalid", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refused node created its directory: %v", err)
	}
}

func TestOpen_SyncAlwaysByDefault(t *testing.T) {
	n := nodetest.NewBareServer(t)
	jsc := n.Server().JetStreamConfig()
	if jsc == nil || !jsc.SyncAlways {
		t.Fatalf("JetStreamConfig = %+v, want SyncAlways", jsc)
	}
	if err := n.CheckSync(); err != nil {
		t.Error(err)
	}
	if got, want := jsc.StoreDir, filepath.Join(n.Dir(), node.StoreDir, "jetstream"); got != want {
		t.Errorf("store dir = %q, want %q", got, want)
	}
	if addr := n.Server().Addr().(*net.TCPAddr); !addr.IP.IsLoopback() {
		t.Errorf("client listener on %v, want loopback", addr)
	}
	if n.Server().MonitorAddr() != nil || n.MonitorURL() != "" {
		t.Error("monitoring is on by default")
	}
	if d := n.Discovery(); d.Sync != bus.SyncModeAlways {
		t.Errorf("discovery sync = %q, want %q", d.Sync, bus.SyncModeAlways)
	}
}

func TestOpen_SyncInterval(t *testing.T) {
	n := nodetest.NewBareServerConfig(t, node.NodeConfig{Sync: bus.SyncModeInterval, SyncInterval: 30 * time.Second})
	jsc := n.Server().JetStreamConfig()
	if jsc.SyncAlways || jsc.SyncInterval != 30*time.Second {
		t.Errorf("JetStreamConfig sync_always=%t interval=%s, want false and 30s", jsc.SyncAlways, jsc.SyncInterval)
	}
	if err := n.CheckSync(); err != nil {
		t.Error(err)
	}
	if d := n.Discovery(); d.Sync != bus.SyncModeInterval {
		t.Errorf("discovery sync = %q, want %q", d.Sync, bus.SyncModeInterval)
	}
}

func TestOpen_RestartKeepsTokenAndData(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	cfg := node.NodeConfig{Dir: dir, Listen: "127.0.0.1:-1"}
	n, err := node.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	token := n.Token()
	c, err := n.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "KEEP", Subjects: []string{"keep"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.JS.Publish(ctx, "keep", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, node.TokenFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file: %v, %v; want mode 0600", fi, err)
	}

	n = nodetest.NewBareServerDir(t, dir)
	if n.Token() != token {
		t.Errorf("token changed across restart")
	}
	c = nodetest.Connect(t, n)
	st, err := c.JS.Stream(ctx, "KEEP")
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetMsg(ctx, 1)
	if err != nil || string(m.Data) != "hello" {
		t.Errorf("message after restart = %v, %v", m, err)
	}
}

func TestOpen_ExplicitToken(t *testing.T) {
	n := nodetest.NewBareServerConfig(t, node.NodeConfig{Token: "s3cret"})
	if n.Token() != "s3cret" {
		t.Errorf("token = %q, want s3cret", n.Token())
	}
	c, err := bus.Connect(testCtx(t), bus.ConnectConfig{Server: n.URL(), Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := os.Stat(filepath.Join(n.Dir(), node.TokenFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("explicit token written to the token file: %v", err)
	}
}

func TestOpen_PortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dir := t.TempDir()
	start := time.Now()
	_, err = node.Start(testCtx(t), node.NodeConfig{Dir: dir, Listen: l.Addr().String()})
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("Open on a busy port = %v, want an address-in-use error", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Open took %s to fail, want it to fail fast", d)
	}
	// The failed start released the directory.
	n := nodetest.NewBareServerDir(t, dir)
	if n.URL() == "" {
		t.Error("no URL")
	}
}

func TestOpen_Monitoring(t *testing.T) {
	n := nodetest.NewBareServerConfig(t, node.NodeConfig{HTTP: "127.0.0.1:0"})
	if n.MonitorURL() == "" {
		t.Fatal("no monitor URL")
	}
	resp, err := http.Get(n.MonitorURL() + "/varz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var varz struct {
		Version string `json:"version"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&varz); err != nil || varz.Version == "" {
		t.Errorf("varz = %+v, %v", varz, err)
	}
}

func TestRun_StopsOnCancel(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- node.Run(ctx, node.NodeConfig{Dir: dir, Listen: "127.0.0.1:-1"}) }()
	bustest.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		_, err := bus.ReadDiscovery(dir)
		return err
	})
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("Run = %v, want nil after cancel", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if _, err := bus.ReadDiscovery(dir); !errors.Is(err, teambus.ErrUnavailable) {
		t.Errorf("discovery after Run = %v, want none", err)
	}
}

func TestStop_NoNode(t *testing.T) {
	err := node.Stop(testCtx(t), t.TempDir())
	if !errors.Is(err, teambus.ErrUnavailable) || !errors.Is(err, node.ErrNotRunning) || !strings.Contains(err.Error(), "no bus node runs") {
		t.Errorf("Stop = %v, want ErrUnavailable no bus node runs", err)
	}
}

func TestStop_RefusesOwnProcess(t *testing.T) {
	n := nodetest.NewBareServer(t)
	err := node.Stop(testCtx(t), n.Dir())
	if !errors.Is(err, teambus.ErrState) {
		t.Errorf("Stop of a node in this process = %v, want ErrState", err)
	}
}

func TestOpen_Cluster(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster election takes a few seconds")
	}
	ports := freePorts(t, 3)
	routes := make([]string, len(ports))
	for i, p := range ports {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", p)
	}
	var nodes []*node.Node
	for i, p := range ports {
		nodes = append(nodes, nodetest.NewBareServerConfig(t, node.NodeConfig{
			Name:          fmt.Sprintf("n%d", i+1),
			Token:         "cluster-token",
			ClusterName:   "tb",
			ClusterListen: fmt.Sprintf("127.0.0.1:%d", p),
			Routes:        routes,
		}))
	}
	// JetStream answers once the cluster has elected a meta leader; a
	// request sent before that gets no reply, so poll with short timeouts.
	ctx := testCtx(t)
	var c *bus.Conn
	bustest.CheckFor(t, 8*time.Second, 50*time.Millisecond, func() error {
		var err error
		c, err = bus.Connect(ctx, bus.ConnectConfig{InProcess: nodes[0].InProcess(), Token: nodes[0].Token(), Timeout: 500 * time.Millisecond})
		return err
	})
	t.Cleanup(c.Close)
	bustest.CheckFor(t, 8*time.Second, 50*time.Millisecond, func() error {
		_, err := c.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3"}, Replicas: 3})
		return err
	})
	if _, err := c.JS.Publish(ctx, "r3", []byte("x")); err != nil {
		t.Fatal(err)
	}
	c2 := nodetest.Connect(t, nodes[2])
	st, err := c2.JS.Stream(ctx, "R3")
	if err != nil {
		t.Fatal(err)
	}
	if info := st.CachedInfo(); info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Errorf("stream info = %+v, want 3 replicas", info.Cluster)
	}
	info, err := bus.Status(ctx, c2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if info.Cluster != "tb" {
		t.Errorf("status cluster = %q, want tb", info.Cluster)
	}
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// TestConnect_NoReadyCheck: a connection with NoReadyCheck sends no
// JetStream request of its own, one without sends the ready check, and the first request works either way. The count is the
// connection's own messages out: the account's API counter also moves with
// the node's background store check and marks.
func TestConnect_NoReadyCheck(t *testing.T) {
	n := nodetest.NewBareServer(t)
	ctx := testCtx(t)
	for _, tc := range []struct {
		name     string
		noCheck  bool
		requests uint64
	}{{"ready check", false, 1}, {"no ready check", true, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := bus.Connect(ctx, bus.ConnectConfig{Dir: n.Dir(), NoReadyCheck: tc.noCheck})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// The ready check repeats an attempt that timed out (a loaded
			// machine), so it is at least one.
			if got := c.NC.Stats().OutMsgs; got != tc.requests && (tc.requests == 0 || got < tc.requests) {
				t.Errorf("JetStream requests during connect = %d, want %d", got, tc.requests)
			}
			if _, err := c.JS.AccountInfo(ctx); err != nil {
				t.Errorf("first request after connect: %v", err)
			}
		})
	}
}
