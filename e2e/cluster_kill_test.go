package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// TestCluster_KillTwoNodesUnderSendAndClaimLoad runs three node processes
// with R3 streams and keeps three senders and two claimers busy while it
// kill -9s the node that leads the team's mailbox, starts it again, waits
// until it has caught up, and kill -9s the next leader. It checks that
// nothing acknowledged is lost or stored twice and that no task is claimed
// twice, that no send is refused as permanent (an election is transient),
// and logs the longest pause between two acknowledged sends (the
// issue's ≤ 3 s goal is a measurement, never a test failure).
func TestCluster_KillTwoNodesUnderSendAndClaimLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("three node processes, two kills, two elections")
	}
	e := &env{t: t, logs: t.TempDir()}
	const token = "e2e-cluster-token"
	nodes := startCluster(t, e, token)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	senders, claimers := []string{"tm1", "tm2", "tm3"}, []string{"c1", "c2"}
	var specs []team.MemberSpec
	for _, m := range append(append([]string{}, senders...), claimers...) {
		specs = append(specs, team.MemberSpec{ID: m})
	}
	conn, svc := clusterTeam(ctx, e, nodes, token, specs)
	const tasks = 160
	var imp []team.ImportTask
	for i := range tasks {
		imp = append(imp, team.ImportTask{TaskSpec: team.TaskSpec{ID: fmt.Sprintf("t%03d", i), Description: "task"}})
	}
	e.waitFor(30*time.Second, "tasks added", func() error {
		return attempt(ctx, func(ctx context.Context) error {
			_, err := svc.ImportTasks(ctx, "ha", imp, nil)
			return err
		})
	})
	actors := map[string]team.Actor{}
	for _, m := range claimers {
		a := team.Actor{Team: "ha", Member: m, Session: "s-" + m}
		e.waitFor(30*time.Second, m+" joined", func() error {
			return attempt(ctx, func(ctx context.Context) error {
				_, err := svc.Join(ctx, "ha", m, a.Session)
				return err
			})
		})
		actors[m] = a
	}
	leader := func() (*clusterNode, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		st, err := conn.JS.Stream(ctx, mailbox.MailboxPrefix+"ha")
		if err != nil {
			return nil, err
		}
		info := st.CachedInfo()
		if info.Cluster == nil {
			return nil, fmt.Errorf("mailbox has no cluster info")
		}
		for _, n := range nodes {
			if n.name == info.Cluster.Leader {
				return n, nil
			}
		}
		return nil, fmt.Errorf("mailbox leader %q is none of the nodes", info.Cluster.Leader)
	}

	// The senders run until stop is closed: some time after the second
	// kill, so both kills happen under load.
	stop := make(chan struct{})
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	var (
		mu        sync.Mutex
		ackTimes  []time.Time
		acked     = map[string]bool{}
		claimedBy = map[string]string{}
		doubles   []string
		completed = map[string]int{}
		wg        sync.WaitGroup
		sent      int
		permanent []string
	)
	for _, member := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := team.Actor{Team: "ha", Member: member}
			for i := 0; !stopped(); i++ {
				id := fmt.Sprintf("%s-%05d", member, i)
				for ctx.Err() == nil {
					sctx, scancel := context.WithTimeout(ctx, time.Second)
					_, err := svc.Send(sctx, teamapi.SendRequest{Actor: a, To: teambus.Lead, ID: id, Body: "load " + id})
					scancel()
					if err != nil && teambus.ExitCode(err) != teambus.ExitTransient {
						// An election is transient: a send refused as
						// permanent would make an agent give up.
						mu.Lock()
						permanent = append(permanent, err.Error())
						mu.Unlock()
					}
					if err == nil {
						mu.Lock()
						acked[member+"/"+id] = true
						ackTimes = append(ackTimes, time.Now())
						sent++
						mu.Unlock()
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	for _, member := range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := actors[member]
			for ctx.Err() == nil {
				tctx, tcancel := context.WithTimeout(ctx, 2*time.Second)
				tk, err := svc.Next(tctx, a)
				tcancel()
				if err != nil && strings.Contains(err.Error(), "already works on task") {
					// The claim landed but its answer was lost in the
					// failover: carry on with the task it holds.
					sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
					snap, serr := svc.Store().Snapshot(sctx, "ha")
					scancel()
					if serr != nil {
						continue
					}
					if held := snap.MemberTasks(member); len(held) > 0 {
						tk, err = held[0], nil
					}
				}
				if err != nil {
					if strings.Contains(err.Error(), "no task left") {
						return
					}
					time.Sleep(20 * time.Millisecond)
					continue
				}
				mu.Lock()
				if by, ok := claimedBy[tk.ID]; ok && by != member {
					doubles = append(doubles, fmt.Sprintf("%s by %s and %s", tk.ID, by, member))
				}
				claimedBy[tk.ID] = member
				mu.Unlock()
				for ctx.Err() == nil {
					cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
					_, _, err := svc.Complete(cctx, a, tk.ID, "")
					ccancel()
					if err == nil {
						mu.Lock()
						completed[tk.ID]++
						mu.Unlock()
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				time.Sleep(100 * time.Millisecond) // claims spread over the whole run
			}
		}()
	}
	progress := func() int {
		mu.Lock()
		defer mu.Unlock()
		return sent
	}
	caughtUp := func() error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		st, err := conn.JS.Stream(ctx, mailbox.MailboxPrefix+"ha")
		if err != nil {
			return err
		}
		info := st.CachedInfo()
		if info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 {
			return fmt.Errorf("mailbox cluster %+v", info.Cluster)
		}
		for _, p := range info.Cluster.Replicas {
			if !p.Current || p.Offline {
				return fmt.Errorf("replica %s not current (%+v), %d sends acknowledged", p.Name, *p, progress())
			}
		}
		return nil
	}
	var kills []time.Time
	logDone := make(chan struct{})
	defer func() { cancel(); <-logDone }()
	go func() {
		defer close(logDone)
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				mu.Lock()
				t.Logf("progress: %d sends acknowledged, %d tasks completed", sent, len(completed))
				mu.Unlock()
			}
		}
	}()
	next := 150
	for k := range 2 {
		e.waitFor(2*time.Minute, fmt.Sprintf("%d sends before kill %d", next, k+1), func() error {
			if n := progress(); n < next {
				return fmt.Errorf("%d sends acknowledged", n)
			}
			return nil
		})
		var victim *clusterNode
		e.waitFor(30*time.Second, "the mailbox leader", func() error {
			var err error
			victim, err = leader()
			return err
		})
		victim.proc.kill(t)
		kills = append(kills, time.Now())
		t.Logf("kill %d: %s (mailbox leader) at %d sends", k+1, victim.name, progress())
		if k == 0 {
			// Start it again on its store; the next kill waits until it
			// has caught up, so a quorum survives the second kill.
			victim.proc = e.startCmd(victim.name+"-again", exec.Command(bin, victim.args...))
			e.waitFor(2*time.Minute, victim.name+" caught up", caughtUp)
		}
		next = progress() + 150
	}
	e.waitFor(2*time.Minute, "150 sends after the second kill", func() error {
		if n := progress(); n < next {
			return fmt.Errorf("%d sends acknowledged", n)
		}
		return nil
	})
	close(stop)
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("load did not finish: %v", ctx.Err())
	}

	total := len(acked)
	stored := map[string]int{}
	e.waitFor(time.Minute, "replay", func() error {
		clear(stored)
		return attempt(ctx, func(ctx context.Context) error {
			return svc.Mailbox("ha").Replay(ctx, mailbox.ReplayFilter{}, func(m teambus.Message) error {
				stored[m.From+"/"+m.ID]++
				return nil
			})
		})
	})
	for id := range acked {
		if stored[id] != 1 {
			t.Errorf("acknowledged %s stored %d times", id, stored[id])
		}
	}
	for _, d := range doubles {
		t.Errorf("task claimed twice: %s", d)
	}
	if len(permanent) > 0 {
		t.Errorf("%d sends refused as permanent while leaders were elected, e.g. %q", len(permanent), permanent[0])
	}
	for i := range tasks {
		if id := fmt.Sprintf("t%03d", i); completed[id] != 1 {
			t.Errorf("task %s completed %d times, want once", id, completed[id])
		}
	}
	sort.Slice(ackTimes, func(i, j int) bool { return ackTimes[i].Before(ackTimes[j]) })
	var longest time.Duration
	var at time.Time
	for i := 1; i < len(ackTimes); i++ {
		if d := ackTimes[i].Sub(ackTimes[i-1]); d > longest {
			longest, at = d, ackTimes[i-1]
		}
	}
	var since []string
	for k, kt := range kills {
		since = append(since, fmt.Sprintf("kill %d at +%s", k+1, kt.Sub(ackTimes[0]).Round(time.Millisecond)))
	}
	t.Logf("longest pause between two acknowledged sends: %s, from +%s (%s); %d sends, %d tasks claimed and completed once each",
		longest.Round(time.Millisecond), at.Sub(ackTimes[0]).Round(time.Millisecond), strings.Join(since, ", "), total, len(completed))
}
