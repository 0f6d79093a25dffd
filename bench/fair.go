package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/node/credstore"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// Keys of the fair-service rows.
const (
	keyFairQuiet = "tb.fair.show.quiet"
	keyFairBusy  = "tb.fair.show"
)

// fairPolls is how many inbox long-polls one member holds.
const fairPolls = 300

// fair times another team's `team show` through the team service (on its
// member credential, over TCP) while one member of team alpha holds
// fairPolls inbox long-polls, and the same show on a quiet service.
func (r *run) fair(ctx context.Context) error {
	n, err := r.node(ctx, "node-fair", bus.SyncModeInterval)
	if err != nil {
		return err
	}
	defer n.Close()
	admin, err := n.Connect(ctx)
	if err != nil {
		return err
	}
	defer admin.Close()
	svc := team.New(admin.JS, team.Config{})
	for _, id := range []string{"alpha", "beta"} {
		if _, err := svc.CreateTeam(ctx, id, "", []team.MemberSpec{{ID: "tm1"}, {ID: "tm2"}}, teambus.DefaultPolicy()); err != nil {
			return err
		}
		for i := range 20 {
			if _, err := svc.AddTask(ctx, id, team.TaskSpec{ID: fmt.Sprintf("t%02d", i), Description: "a task of the fair bench"}); err != nil {
				return err
			}
		}
	}
	member := func(teamID string) (*teamapi.Client, func(), error) {
		cr, err := credstore.IssueCreds(ctx, admin, teamID, "tm1", []string{n.URL()})
		if err != nil {
			return nil, nil, err
		}
		file := filepath.Join(r.dir, teamID+"-tm1.creds")
		if err := bus.WriteCreds(file, cr); err != nil {
			return nil, nil, err
		}
		c, err := bus.Connect(ctx, bus.ConnectConfig{Creds: file, Timeout: 30 * time.Second})
		if err != nil {
			return nil, nil, err
		}
		cl, err := teamapi.ForConn(c, teamID, "tm1", "")
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		return cl, c.Close, nil
	}
	alpha, closeA, err := member("alpha")
	if err != nil {
		return err
	}
	defer closeA()
	beta, closeB, err := member("beta")
	if err != nil {
		return err
	}
	defer closeB()
	shows := 200
	if r.cfg.Quick {
		shows = 50
	}
	show := func() (sample, error) {
		var s sample
		t0 := time.Now()
		for range shows {
			t := time.Now()
			if _, err := beta.Show(ctx, teamapi.ShowRequest{}); err != nil {
				return s, err
			}
			s.lat = append(s.lat, time.Since(t))
		}
		s.elapsed = time.Since(t0)
		return s, nil
	}
	quiet, err := show()
	if err != nil {
		return fmt.Errorf("quiet show: %w", err)
	}
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, fairPolls)
	for range fairPolls {
		go func() {
			_, err := alpha.Inbox(pctx, teamapi.InboxRequest{Mode: teamapi.InboxPeek, WaitMS: 120_000})
			done <- err
		}()
	}
	// The polls past alpha/tm1's budget are answered at once; the others
	// hold on.
	busy := 0
	for busy < fairPolls-node.DefaultMemberWaitsBudget {
		select {
		case err := <-done:
			if !errors.Is(err, teamapi.ErrBusy) {
				return fmt.Errorf("a long-poll of alpha/tm1 ended with %v, not busy", err)
			}
			busy++
		case <-time.After(30 * time.Second):
			return fmt.Errorf("only %d of alpha/tm1's %d long-polls were answered", busy, fairPolls)
		}
	}
	loaded, err := show()
	stop()
	if err != nil {
		return fmt.Errorf("show beside the long-polls: %w", err)
	}
	for _, x := range []struct {
		key, name string
		s         sample
	}{
		{keyFairQuiet, "another team's `team show` through the team service (member credential, TCP), quiet service", quiet},
		{keyFairBusy, fmt.Sprintf("another team's `team show` while one member holds %d inbox long-polls", fairPolls), loaded},
	} {
		r.res.add(Row{Group: "fair", Key: x.key, Name: x.name, Value: ms(x.s.pct(0.5)), Unit: UnitMs,
			P50: ms(x.s.pct(0.5)), P99: ms(x.s.pct(0.99)), N: len(x.s.lat),
			Note: fmt.Sprintf("team of 2 members and 20 tasks; %d of the long-polls answered busy at once (the member's long-poll budget is %d)", busy, node.DefaultMemberWaitsBudget)})
	}
	return nil
}
