package node_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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

func storeDamage(t *testing.T, n *node.Node) []node.StoreDamage {
	t.Helper()
	var d []node.StoreDamage
	bustest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		var done bool
		if d, done = n.StoreDamage(); !done {
			return fmt.Errorf("store check still running")
		}
		return nil
	})
	return d
}

// The store check finds nothing on a healthy store, finds a message
// missing from a mailbox (teambus never deletes mail), and, through the
// marks of the last run, a mailbox whose tail is gone after a restart.
func TestCheckStore(t *testing.T) {
	dir := t.TempDir()
	n := nodetest.NewBareServerConfig(t, node.NodeConfig{Dir: dir})
	if d := storeDamage(t, n); len(d) != 0 {
		t.Fatalf("damage on a new store: %v", d)
	}
	c := nodetest.Connect(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mb := bus.NewMailbox(c.JS, "chk", bus.MailboxConfig{})
	// A mailbox denies deleting messages; this one is made by hand so the
	// test can lose one.
	if _, err := c.JS.CreateStream(ctx, jetstream.StreamConfig{Name: mb.Stream(), Subjects: []string{"tb.chk.mbx.>", "tb.chk.ctl.>", "tb.chk.held.>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 20; i++ {
		m := &teambus.Message{ID: fmt.Sprint(i), From: "a", To: "b", Type: teambus.MsgInfo, Body: "hello"}
		if _, err := mb.Send(ctx, m, false); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := node.CheckStore(ctx, c.JS); err != nil || len(d) != 0 {
		t.Fatalf("CheckStore on a healthy mailbox = %v, %v", d, err)
	}
	st, err := c.JS.Stream(ctx, mb.Stream())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(ctx, 7); err != nil {
		t.Fatal(err)
	}
	d, err := node.CheckStore(ctx, c.JS)
	if err != nil || len(d) != 1 || d[0].Lost != 1 || d[0].First != 7 || d[0].Last != 7 || !strings.Contains(d[0].String(), "lost 1") {
		t.Fatalf("CheckStore after deleting seq 7 = %v, %v", d, err)
	}
	c.Close()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, node.MarksFile)); err != nil {
		t.Fatalf("no marks after a clean close: %v", err)
	}

	// The tail of the mailbox disappears while the node is down.
	if err := os.RemoveAll(filepath.Join(dir, node.StoreDir, "jetstream", "$G", "streams", mb.Stream())); err != nil {
		t.Fatal(err)
	}
	n2 := nodetest.NewBareServerDir(t, dir)
	d = storeDamage(t, n2)
	if len(d) != 1 || !d[0].Gone || d[0].Last != 20 {
		t.Fatalf("damage after the mailbox vanished = %v", d)
	}
	if h := n2.Health(); h.OK || !strings.Contains(strings.Join(h.Errors, " "), "gone") {
		t.Fatalf("health = %+v, want the gone mailbox", h)
	}
}
