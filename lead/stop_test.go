package lead_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus/bustest"
	"github.com/teambus/teambus/lead"
	"github.com/teambus/teambus/team"
)

// Issue 12 item 11: a lead sidecar stopped cleanly shows offline at once,
// not online until its heartbeat expires.
func TestSidecar_CleanStopShowsOffline(t *testing.T) {
	n := bustest.NewServer(t)
	svc := team.New(bustest.Connect(t, n).JS, team.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pol := teambus.DefaultPolicy()
	if _, err := svc.CreateTeam(ctx, "stop", "L", []team.MemberSpec{{ID: "tm1"}}, pol); err != nil {
		t.Fatal(err)
	}
	sc, err := lead.New(svc.SidecarAPI(), lead.Config{Team: "stop", Session: "L"})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- sc.Run(rctx) }()
	bustest.CheckFor(t, pol.LeadTimeout, 10*time.Millisecond, func() error {
		v, err := svc.Show(ctx, "stop")
		if err != nil {
			return err
		}
		if !v.Lead.Online {
			return fmt.Errorf("lead not online yet")
		}
		return nil
	})
	stop()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	v, err := svc.Show(ctx, "stop")
	if err != nil {
		t.Fatal(err)
	}
	if v.Lead.Online {
		t.Errorf("lead online after a clean stop: %+v", v.Lead)
	}
}
