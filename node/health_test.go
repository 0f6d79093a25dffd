package node_test

import (
	"testing"

	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/node/nodetest"
)

// A healthy node answers on HealthSubject that it is fine; the disk-full
// case is the fault suite's (faults.TestS6_DiskFull).
func TestNode_Health(t *testing.T) {
	n := nodetest.NewBareServer(t)
	if h := n.Health(); !h.OK || len(h.Errors) != 0 {
		t.Fatalf("Health() = %+v, want ok", h)
	}
	c := nodetest.Connect(t, n)
	if why, _ := bus.StorageTrouble(c.NC); why != "" {
		t.Fatalf("StorageTrouble on a healthy node = %q", why)
	}
	if why, _ := bus.StorageTrouble(nil); why != "" {
		t.Fatalf("StorageTrouble(nil) = %q", why)
	}
}
