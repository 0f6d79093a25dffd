package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// clusterNode is one `teambus bus start` process of a cluster.
type clusterNode struct {
	name string
	dir  string
	url  string
	args []string // the bus start command line, to start it again
	proc *child
}

// startCluster runs three `teambus bus start` processes on loopback,
// joined by routes, all with the same token.
func startCluster(t *testing.T, e *env, token string) []*clusterNode {
	t.Helper()
	ports := freePorts(t, 6)
	var routes []string
	for i := range 3 {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[3+i]))
	}
	var nodes []*clusterNode
	for i := range 3 {
		n := &clusterNode{
			name: fmt.Sprintf("n%d", i+1),
			dir:  filepath.Join(t.TempDir(), fmt.Sprintf("n%d", i+1)),
			url:  fmt.Sprintf("nats://127.0.0.1:%d", ports[i]),
		}
		n.args = []string{"bus", "start",
			"--dir", n.dir, "--name", n.name, "--token", token,
			"--listen", fmt.Sprintf("127.0.0.1:%d", ports[i]),
			"--cluster-name", "tbc", "--cluster-listen", fmt.Sprintf("127.0.0.1:%d", ports[3+i]),
			"--routes", strings.Join(routes, ","),
			"--max-store", "1GiB", "--log-level", "info"}
		n.proc = e.startCmd(n.name, exec.Command(bin, n.args...))
		nodes = append(nodes, n)
	}
	for _, n := range nodes {
		e.waitFor(15*time.Second, n.name+" discovery file", func() error {
			if n.proc.exited() {
				return fmt.Errorf("%s exited:\n%s", n.name, n.proc.output())
			}
			_, err := bus.ReadDiscovery(n.dir)
			return err
		})
	}
	return nodes
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// attempt runs f with its own 10-second timeout inside ctx: a request sent
// while the cluster elects a leader gets no answer, only a timeout, and the
// caller's next attempt must go out.
func attempt(ctx context.Context, f func(ctx context.Context) error) error {
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return f(actx)
}

// clusterTeam connects to the cluster with every URL once it reports three
// replicas, and creates team "ha" with members; the connection is closed
// when the test ends.
func clusterTeam(ctx context.Context, e *env, nodes []*clusterNode, token string, members []team.MemberSpec) (*bus.Conn, *team.Service) {
	e.t.Helper()
	var conn *bus.Conn
	e.waitFor(30*time.Second, "cluster ready", func() error {
		if conn != nil {
			conn.Close()
		}
		var err error
		conn, err = bus.Connect(ctx, bus.ConnectConfig{Server: clusterURLs(nodes), Token: token, Timeout: 2 * time.Second})
		if err != nil {
			return err
		}
		if r := conn.Replicas(); r != 3 {
			return fmt.Errorf("replicas %d", r)
		}
		return nil
	})
	e.t.Cleanup(conn.Close)
	svc := team.New(conn.JS, team.Config{})
	e.waitFor(30*time.Second, "team created", func() error {
		err := attempt(ctx, func(ctx context.Context) error {
			_, err := svc.CreateTeam(ctx, "ha", "", members, teambus.DefaultPolicy())
			return err
		})
		if errors.Is(err, teambus.ErrState) {
			return nil // created by an attempt whose answer was lost
		}
		return err
	})
	return conn, svc
}

func clusterURLs(nodes []*clusterNode) string {
	var urls []string
	for _, n := range nodes {
		urls = append(urls, n.url)
	}
	return strings.Join(urls, ",")
}

// TestCluster_KillNodeUnderLoad runs three node processes, creates a team
// (three replicas, automatically), sends from three members under load
// with retries by the same id, kills the node that leads the team's
// mailbox with SIGKILL half way, keeps sending through the survivors, and
// checks that every acknowledged message is stored exactly once.
func TestCluster_KillNodeUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("three node processes and an election")
	}
	e := &env{t: t, logs: t.TempDir()}
	const token = "e2e-cluster-token"
	nodes := startCluster(t, e, token)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	members := []team.MemberSpec{{ID: "tm1"}, {ID: "tm2"}, {ID: "tm3"}}
	conn, svc := clusterTeam(ctx, e, nodes, token, members)
	var info *jetstream.StreamInfo
	e.waitFor(30*time.Second, "mailbox info", func() error {
		return attempt(ctx, func(ctx context.Context) error {
			st, err := conn.JS.Stream(ctx, mailbox.MailboxPrefix+"ha")
			if err != nil {
				return err
			}
			info = st.CachedInfo()
			return nil
		})
	})
	if info.Config.Replicas != 3 || info.Cluster == nil {
		t.Fatalf("mailbox has %d replicas (%+v), want 3", info.Config.Replicas, info.Cluster)
	}
	var victim *clusterNode
	for _, n := range nodes {
		if n.name == info.Cluster.Leader {
			victim = n
		}
	}
	if victim == nil {
		t.Fatalf("mailbox leader %q is none of the nodes", info.Cluster.Leader)
	}
	// Reads of the new team may lag on a follower for a moment.
	e.waitFor(30*time.Second, "team readable", func() error {
		return attempt(ctx, func(ctx context.Context) error {
			_, err := svc.Store().Snapshot(ctx, "ha")
			return err
		})
	})

	const perSender = 150
	var (
		mu       sync.Mutex
		acked    = map[string]bool{}
		attempts int
		wg       sync.WaitGroup
		killOnce sync.Once
		killed   = make(chan struct{})
	)
	for _, m := range members {
		wg.Add(1)
		go func(member string) {
			defer wg.Done()
			a := team.Actor{Team: "ha", Member: member}
			for i := range perSender {
				id := fmt.Sprintf("%s-%03d", member, i)
				if i == perSender/3 && member == "tm1" {
					killOnce.Do(func() {
						victim.proc.kill(t)
						close(killed)
					})
				}
				// Retry with the same id until the bus acknowledges it: the
				// dedupe window stores a retried message once.
				for ctx.Err() == nil {
					mu.Lock()
					attempts++
					mu.Unlock()
					sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
					_, err := svc.Send(sctx, teamapi.SendRequest{Actor: a, To: teambus.Lead, ID: id, Body: "load " + id})
					scancel()
					if err == nil {
						mu.Lock()
						acked[member+"/"+id] = true
						mu.Unlock()
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		}(m.ID)
	}
	wg.Wait()
	select {
	case <-killed:
	default:
		t.Fatal("the victim node was never killed")
	}
	if ctx.Err() != nil {
		t.Fatalf("load did not finish: %v", ctx.Err())
	}
	if got, want := len(acked), perSender*len(members); got != want {
		t.Fatalf("acknowledged %d messages, want %d", got, want)
	}
	t.Logf("killed %s (mailbox leader); %d sends for %d messages", victim.name, attempts, len(acked))

	// Every acknowledged message is stored, once, on the survivors.
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
		if stored[id] == 0 {
			t.Errorf("acknowledged %s is lost", id)
		}
	}
	for id, n := range stored {
		if n > 1 {
			t.Errorf("%s stored %d times", id, n)
		}
		if !acked[id] {
			t.Errorf("%s stored but never sent", id)
		}
	}
	e.waitFor(time.Minute, "a mailbox leader among the survivors", func() error {
		return attempt(ctx, func(ctx context.Context) error {
			st, err := conn.JS.Stream(ctx, mailbox.MailboxPrefix+"ha")
			if err != nil {
				return err
			}
			if l := st.CachedInfo().Cluster.Leader; l == victim.name || l == "" {
				return fmt.Errorf("mailbox leader after the kill = %q", l)
			}
			return nil
		})
	})

	// A one-shot command given every URL, the dead node first, works
	// through a survivor.
	var urls []string
	urls = append(urls, victim.url)
	for _, n := range nodes {
		if n != victim {
			urls = append(urls, n.url)
		}
	}
	out, errOut, code := runCLI(t, "send", "--server", strings.Join(urls, ","), "--token", token,
		"--team", "ha", "--member", "tm2", "--to", "lead", "--id", "after-kill", "--json", "after the kill")
	if code != 0 || !strings.Contains(out, `"seq"`) {
		t.Errorf("send through the survivors: exit %d, %s %s", code, out, errOut)
	}
}

// runCLI runs the teambus binary without --dir.
func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errb.String(), 0
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	default:
		t.Fatalf("run %v: %v", args, err)
		return "", "", -1
	}
}
