package node_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus/node/credstore"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/bus/bustest"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// newCluster starts n in-process nodes joined into one cluster.
func newCluster(t *testing.T, n int) []*node.Node {
	t.Helper()
	ports := freePorts(t, n)
	routes := make([]string, n)
	for i, p := range ports {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", p)
	}
	var nodes []*node.Node
	for i, p := range ports {
		nodes = append(nodes, nodetest.NewServerConfig(t, node.NodeConfig{
			Name:          fmt.Sprintf("n%d", i+1),
			Token:         "cluster-token",
			ClusterName:   "tb",
			ClusterListen: fmt.Sprintf("127.0.0.1:%d", p),
			Routes:        routes,
		}))
	}
	return nodes
}

// connectReady connects over TCP once the cluster answers JetStream
// requests and advertises all its nodes.
func connectReady(t *testing.T, cfg bus.ConnectConfig, nodes int) *bus.Conn {
	t.Helper()
	ctx := testCtx(t)
	var c *bus.Conn
	bustest.CheckFor(t, 15*time.Second, 100*time.Millisecond, func() error {
		if c != nil {
			c.Close()
		}
		var err error
		cfg.Timeout = time.Second
		if c, err = bus.Connect(ctx, cfg); err != nil {
			return err
		}
		if got := len(c.NC.Servers()); got < nodes {
			return fmt.Errorf("client knows %d servers, want %d", got, nodes)
		}
		return nil
	})
	t.Cleanup(c.Close)
	return c
}

func TestAutoReplicas_SingleNode(t *testing.T) {
	n := nodetest.NewBareServer(t)
	c, err := bus.Connect(testCtx(t), bus.ConnectConfig{Dir: n.Dir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.Replicas(); got != 1 {
		t.Errorf("replicas on one node = %d, want 1", got)
	}
	c2, err := bus.Connect(testCtx(t), bus.ConnectConfig{Dir: n.Dir(), Replicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got := c2.Replicas(); got != 2 {
		t.Errorf("explicit replicas = %d, want 2", got)
	}
}

// TestCluster_TeamReplicatedAndMemberCreds creates a team on a cluster of
// three: its mailbox and buckets get three replicas, and a member
// credential issued through one node works on another.
func TestCluster_TeamReplicatedAndMemberCreds(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster election takes a few seconds")
	}
	nodes := newCluster(t, 3)
	admin := connectReady(t, bus.ConnectConfig{Server: nodes[0].URL(), Token: "cluster-token"}, 3)
	if got := admin.Replicas(); got != 3 {
		t.Fatalf("replicas on a cluster of 3 = %d, want 3", got)
	}
	ctx := testCtx(t)
	svc := team.New(admin.JS, team.Config{})
	bustest.CheckFor(t, 10*time.Second, 200*time.Millisecond, func() error {
		_, err := svc.CreateTeam(ctx, "alpha", "", []team.MemberSpec{{ID: "tm1"}}, teambus.DefaultPolicy())
		if err != nil && strings.Contains(err.Error(), "already exists") {
			return nil
		}
		return err
	})
	for _, name := range []string{mailbox.MailboxPrefix + "alpha", "KV_" + kv.StatePrefix + "alpha", "KV_" + kv.HeartbeatPrefix + "alpha"} {
		st, err := admin.JS.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if info := st.CachedInfo(); info.Config.Replicas != 3 {
			t.Errorf("%s has %d replicas, want 3", name, info.Config.Replicas)
		}
	}
	cr, err := credstore.IssueCreds(ctx, admin, "alpha", "tm1", []string{nodes[2].URL()})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "tm1.creds")
	if err := bus.WriteCreds(file, cr); err != nil {
		t.Fatal(err)
	}
	var m *bus.Conn
	bustest.CheckFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		var err error
		m, err = bus.Connect(ctx, bus.ConnectConfig{Creds: file, Timeout: time.Second})
		return err
	})
	defer m.Close()
	if got := m.NC.ConnectedServerName(); got != "n3" {
		t.Errorf("member connected to %s, want n3 (its credential's URL)", got)
	}
	// Every node runs the team service in one queue group: the member's
	// request on n3 is answered by one of them.
	cl, err := teamapi.ForConn(m, "alpha", "tm1", "")
	if err != nil {
		t.Fatal(err)
	}
	bustest.CheckFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		_, err := cl.Send(ctx, teamapi.SendRequest{ID: "hello", Body: "from n3"})
		return err
	})
	msgs, err := svc.Inbox(ctx, team.Actor{Team: "alpha", Member: teambus.Lead}, mailbox.InboxOptions{})
	if err != nil || len(msgs) != 1 || msgs[0].Body != "from n3" {
		t.Errorf("lead inbox = %+v, %v", msgs, err)
	}
}
