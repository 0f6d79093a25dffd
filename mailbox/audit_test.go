package mailbox_test

import (
	"testing"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node/nodetest"
)

// TestAuditStreams_DenyDeleteAndPurge: no message of a mailbox or an event
// log can be deleted or purged, not even with the node token; the whole
// stream still can (team delete).
func TestAuditStreams_DenyDeleteAndPurge(t *testing.T) {
	t.Parallel()
	n := nodetest.NewBareServer(t)
	c := nodetest.Connect(t, n)
	ctx := mailCtx(t)
	mb := mailbox.NewMailbox(c.JS, "audit", mailbox.MailboxConfig{})
	ev := eventlog.NewEvents(c.JS, "audit", eventlog.EventsConfig{})
	if err := mb.Declare(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ev.Declare(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := mb.Send(ctx, &teambus.Message{ID: "1", From: "a", To: "b", Type: teambus.MsgInfo, Body: "x"}, false); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{mb.Stream(), ev.Stream()} {
		st, err := c.JS.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if cfg := st.CachedInfo().Config; !cfg.DenyDelete || !cfg.DenyPurge {
			t.Errorf("%s: deny delete %v, deny purge %v; want both", name, cfg.DenyDelete, cfg.DenyPurge)
		}
		if err := st.DeleteMsg(ctx, 1); err == nil {
			t.Errorf("%s: a message was deleted", name)
		}
		if err := st.Purge(ctx); err == nil {
			t.Errorf("%s: purged", name)
		}
	}
	if err := mb.Delete(ctx); err != nil {
		t.Errorf("delete the whole mailbox: %v", err)
	}
}
