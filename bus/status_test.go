package bus_test

import (
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/node/nodetest"
)

func TestStatus_TeamsAndUsage(t *testing.T) {
	n := nodetest.NewBareServer(t)
	c := nodetest.Connect(t, n)
	ctx := testCtx(t)
	for _, team := range []string{"beta", "alpha"} {
		if _, err := c.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "TBS_" + team}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "TBM_alpha", Subjects: []string{"tbm.alpha.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.JS.Publish(ctx, "tbm.alpha.x", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	d := n.Discovery()

	info, err := bus.Status(ctx, c, &d)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(info.Teams, ","), "alpha,beta"; got != want {
		t.Errorf("teams = %s, want %s", got, want)
	}
	if info.Version != server.VERSION || info.URL != n.URL() || info.PID != d.PID {
		t.Errorf("status = %+v, want version %s, url %s, pid %d", info, server.VERSION, n.URL(), d.PID)
	}
	if info.Sync != bus.SyncModeAlways || !info.SyncAlways {
		t.Errorf("sync = %q (always %t), want always", info.Sync, info.SyncAlways)
	}
	if info.JetStream.Streams != 3 || info.JetStream.StoreUsed == 0 {
		t.Errorf("jetstream = %+v, want 3 streams and some store used", info.JetStream)
	}
	if len(info.Streams) != 3 || info.Streams[0].Name != "KV_TBS_alpha" || info.Streams[2].Name != "TBM_alpha" || info.Streams[2].Messages != 1 {
		t.Errorf("streams = %+v", info.Streams)
	}
	if s := info.String(); !strings.Contains(s, "2 teams") || !strings.Contains(s, "sync always") {
		t.Errorf("String = %q", s)
	}
}

func TestStatus_OverTCPWithoutDiscovery(t *testing.T) {
	n := nodetest.NewBareServer(t)
	c, err := bus.Connect(testCtx(t), bus.ConnectConfig{Server: n.URL(), Token: n.Token()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	info, err := bus.Status(testCtx(t), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if info.URL != n.URL() || info.Sync != "" || info.SyncAlways || info.PID != 0 {
		t.Errorf("status = %+v, want the connected URL and no local node details", info)
	}
	if len(info.Teams) != 0 || info.Teams == nil {
		t.Errorf("teams = %#v, want empty, not nil", info.Teams)
	}
}
