package node_test

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/node/credstore"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/teamapi"
)

// TestConnLimit_PerMemberCredential: 40 connections of one member
// credential at once: MemberMaxConns are accepted, the others refused;
// another member's credential still connects and is served; a refused
// connect with a wrong password counts for nobody; after some of the
// first member's connections close, it connects again.
func TestConnLimit_PerMemberCredential(t *testing.T) {
	e := newSecEnv(t)
	ctx := testCtx(t)
	dial := func(user, pass, prefix string) (*nats.Conn, error) {
		return nats.Connect(e.node.URL(), nats.UserInfo(user, pass), nats.CustomInboxPrefix(prefix),
			nats.NoReconnect(), nats.Timeout(5*time.Second))
	}
	// Wrong passwords claiming the user name count for nobody.
	for range 5 {
		if nc, err := dial(e.creds.User, "wrong-password-xxxxxxxx", e.creds.InboxPrefix); err == nil {
			nc.Close()
			t.Fatal("a wrong password connected")
		}
	}
	const tries = 40
	var (
		mu     sync.Mutex
		ok     []*nats.Conn
		failed int
		wg     sync.WaitGroup
	)
	for range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := dial(e.creds.User, e.creds.Password, e.creds.InboxPrefix)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				return
			}
			ok = append(ok, nc)
		}()
	}
	wg.Wait()
	defer func() {
		for _, nc := range ok {
			nc.Close()
		}
	}()
	if len(ok) != node.MemberMaxConns || failed != tries-node.MemberMaxConns {
		t.Fatalf("%d connections of one credential: %d accepted, %d refused; want %d accepted", tries, len(ok), failed, node.MemberMaxConns)
	}
	// The accepted ones work.
	cl, err := teamapi.ForConn(&bus.Conn{NC: ok[0]}, "alpha", "tm1", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Show(ctx, teamapi.ShowRequest{}); err != nil {
		t.Fatalf("show on an accepted connection: %v", err)
	}
	// Another member is unaffected.
	admin := nodetest.Connect(t, e.node)
	cr, err := credstore.IssueCreds(ctx, admin, "alpha", "tm2", []string{e.node.URL()})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "tm2.creds")
	if err := bus.WriteCreds(file, cr); err != nil {
		t.Fatal(err)
	}
	c2, err := bus.Connect(ctx, bus.ConnectConfig{Creds: file})
	if err != nil {
		t.Fatalf("tm2 connects while tm1 holds its limit: %v", err)
	}
	defer c2.Close()
	tm2, err := teamapi.ForConn(c2, "alpha", "tm2", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tm2.Show(ctx, teamapi.ShowRequest{}); err != nil {
		t.Fatalf("tm2's show: %v", err)
	}
	// Close two: tm1 connects again (the server notices a close at once
	// for a client that closed itself; wait for it all the same).
	ok[0].Close()
	ok[1].Close()
	ok = ok[2:]
	deadline := time.Now().Add(10 * time.Second)
	for {
		nc, err := dial(e.creds.User, e.creds.Password, e.creds.InboxPrefix)
		if err == nil {
			ok = append(ok, nc)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tm1 connects after closing two: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestConnLimit_Configured: NodeConfig.MemberMaxConns sets the limit.
func TestConnLimit_Configured(t *testing.T) {
	n := nodetest.NewServerConfig(t, node.NodeConfig{MemberMaxConns: 3})
	ctx := testCtx(t)
	admin := nodetest.Connect(t, n)
	cr, err := credstore.IssueCreds(ctx, admin, "alpha", "tm1", []string{n.URL()})
	if err != nil {
		t.Fatal(err)
	}
	var conns []*nats.Conn
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	for i := range 4 {
		nc, err := nats.Connect(n.URL(), nats.UserInfo(cr.User, cr.Password), nats.CustomInboxPrefix(cr.InboxPrefix), nats.NoReconnect())
		if i < 3 && err != nil {
			t.Fatalf("connection %d of 3: %v", i+1, err)
		}
		if i == 3 && err == nil {
			nc.Close()
			t.Fatal("a fourth connection past a limit of 3 was accepted")
		}
		if err == nil {
			conns = append(conns, nc)
		}
	}
}
