package credstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/node/credstore"
	"github.com/teambus/teambus/node/nodetest"
)

// TestAccepts: the record check init claude reuses a credential file by
// says yes for the credential just issued, and no before any was issued,
// for another password, after it was issued again and after a revoke.
func TestAccepts(t *testing.T) {
	t.Parallel()
	n := nodetest.NewServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	conn, err := bus.Connect(ctx, bus.ConnectConfig{Dir: n.Dir()})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	accepts := func(cr *bus.Creds) bool {
		t.Helper()
		ok, err := credstore.Accepts(ctx, conn, cr)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	fake := &bus.Creds{Kind: bus.CredsKind, Team: "alpha", Member: "tm1", User: bus.MemberUser("alpha", "tm1"), Password: "x", InboxPrefix: bus.MemberInboxPrefix("alpha", "tm1")}
	if accepts(fake) {
		t.Error("accepted before any credential was issued")
	}
	cr, err := credstore.IssueCreds(ctx, conn, "alpha", "tm1", []string{"nats://127.0.0.1:4222"})
	if err != nil {
		t.Fatal(err)
	}
	if !accepts(cr) {
		t.Fatal("the credential just issued is not accepted")
	}
	if accepts(fake) {
		t.Error("another password accepted")
	}
	other := *cr
	other.Member, other.User, other.InboxPrefix = "tm2", bus.MemberUser("alpha", "tm2"), bus.MemberInboxPrefix("alpha", "tm2")
	if accepts(&other) {
		t.Error("tm1's password accepted for tm2")
	}
	again, err := credstore.IssueCreds(ctx, conn, "alpha", "tm1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if accepts(cr) || !accepts(again) {
		t.Error("issuing again: the old password still accepted, or the new one not")
	}
	if err := credstore.RevokeCreds(ctx, conn, "alpha", "tm1"); err != nil {
		t.Fatal(err)
	}
	if accepts(again) {
		t.Error("accepted after the revoke")
	}
}
