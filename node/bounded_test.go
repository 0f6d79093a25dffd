package node_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/node/credstore"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// boundedEnv is a node with the team service (svc as configured), team
// big (tm1, tm2) with a mailbox of mailboxBytes, and clients of big/tm1's
// and big/tm2's credentials over TCP.
type boundedEnv struct {
	node     *node.Node
	admin    *team.Service
	tm1, tm2 *teamapi.Client
}

func newBoundedEnv(t *testing.T, svc node.Config, mailboxBytes int64) *boundedEnv {
	t.Helper()
	ctx := testCtx(t)
	n := nodetest.NewServerConfig(t, node.NodeConfig{Attach: node.Attach(svc)})
	c := nodetest.Connect(t, n)
	admin := team.New(c.JS, team.Config{Mailbox: mailbox.MailboxConfig{MaxBytes: mailboxBytes}})
	if _, err := admin.CreateTeam(ctx, "big", "", []team.MemberSpec{{ID: "tm1"}, {ID: "tm2"}}, teambus.DefaultPolicy()); err != nil {
		t.Fatal(err)
	}
	e := &boundedEnv{node: n, admin: admin}
	for _, m := range []string{"tm1", "tm2"} {
		cr, err := credstore.IssueCreds(ctx, c, "big", m, []string{n.URL()})
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), m+".creds")
		if err := bus.WriteCreds(file, cr); err != nil {
			t.Fatal(err)
		}
		mc, err := bus.Connect(ctx, bus.ConnectConfig{Creds: file, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(mc.Close)
		cl, err := teamapi.ForConn(mc, "big", m, "")
		if err != nil {
			t.Fatal(err)
		}
		if m == "tm1" {
			e.tm1 = cl
		} else {
			e.tm2 = cl
		}
	}
	return e
}

// rssMB is the resident set of this process (the node, the service and
// the clients of the test) in MB, from /proc; 0 where there is none.
func rssMB(t *testing.T) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			return kb / 1024
		}
	}
	return 0
}

// TestBounded_ReplayOfBigMailPages: a member with ~32 MiB of mail (130
// bodies of 250 KB) replays it through the service, eight times at once:
// every reply is a page within the byte budget (a few messages, a next
// cursor), each replay gets every message once, in order. The resident
// memory of the process (node, service and clients) is logged, not
// asserted.
func TestBounded_ReplayOfBigMailPages(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 32 MiB")
	}
	e := newBoundedEnv(t, node.Config{}, 64<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const msgs, body = 130, 250_000
	text := strings.Repeat("x", body)
	for i := range msgs {
		if _, err := e.admin.Send(ctx, teamapi.SendRequest{Actor: teamapi.Actor{Team: "big", Member: teambus.Lead}, To: "tm1", Body: strconv.Itoa(i) + text}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	runtime.GC()
	before := rssMB(t)

	// One page: far fewer than ReplayMax messages, within the budget.
	page, err := e.tm1.Replay(ctx, teamapi.ReplayRequest{})
	if err != nil {
		t.Fatalf("one page of replay: %v", err)
	}
	b, _ := json.Marshal(page)
	if len(page.Messages) == 0 || len(page.Messages) >= msgs || page.Next == 0 {
		t.Fatalf("first page: %d messages, next %d; want a few and a cursor", len(page.Messages), page.Next)
	}
	if len(b) > team.DefaultMaxReply {
		t.Fatalf("first page is %d bytes, more than an answer (%d)", len(b), team.DefaultMaxReply)
	}
	t.Logf("a page holds %d messages of %d bytes: %d bytes of JSON", len(page.Messages), body, len(b))

	var (
		peak float64
		mu   sync.Mutex
		stop = make(chan struct{})
		wg   sync.WaitGroup
	)
	go func() {
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				r := rssMB(t)
				mu.Lock()
				peak = max(peak, r)
				mu.Unlock()
			}
		}
	}()
	start := time.Now()
	const readers = 8
	errs := make(chan error, readers)
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last uint64
			n := 0
			err := teamapi.ReplayOwn(ctx, e.tm1, teamapi.Actor{}, mailbox.ReplayFilter{}, func(m teambus.Message) error {
				if m.Seq <= last {
					return errors.New("replay out of order or doubled")
				}
				last = m.Seq
				n++
				return nil
			})
			if err == nil && n != msgs {
				err = errors.New("replay got " + strconv.Itoa(n) + " messages, want " + strconv.Itoa(msgs))
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(stop)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("replay of 32 MiB by the member: %v", err)
		}
	}
	mu.Lock()
	t.Logf("RSS of the test process: %.0f MB before, peak %.0f MB during %d concurrent replays of %d MiB each (%s)",
		before, peak, readers, msgs*body>>20, time.Since(start).Round(time.Millisecond))
	mu.Unlock()
}

// bigItems is n checkpoint steps of size bytes each.
func bigItems(n, size int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = strconv.Itoa(i) + strings.Repeat("s", size-len(strconv.Itoa(i)))
	}
	return out
}

// TestBounded_CheckpointCaps: a 700 KB checkpoint is refused (exit 2,
// the cap and the field named) by the client and, sent around the
// client's check, by the service; nothing is recorded.
func TestBounded_CheckpointCaps(t *testing.T) {
	e := newBoundedEnv(t, node.Config{}, 0)
	ctx := testCtx(t)
	if _, err := e.admin.AddTask(ctx, "big", team.TaskSpec{ID: "t1", Description: "work"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.tm1.Task(ctx, teamapi.TaskRequest{Op: teamapi.TaskClaim, ID: "t1"}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		req   teamapi.CheckpointRequest
		parts []string
	}{
		{"700 KB in steps of 14 KB", teamapi.CheckpointRequest{Remaining: bigItems(50, 14_000)}, []string{"at most 65536 (64 KiB) in all", "files whose paths"}},
		{"one step of 700 KB", teamapi.CheckpointRequest{Done: bigItems(1, 700_000)}, []string{"done item 1 is 700000 bytes, at most 16384 (16 KiB)"}},
		{"a file path of 20 KB", teamapi.CheckpointRequest{Files: bigItems(1, 20_000)}, []string{"file item 1", "16 KiB"}},
		{"data of 40 KB", teamapi.CheckpointRequest{Data: json.RawMessage(`"` + strings.Repeat("d", 40_000) + `"`)}, []string{"checkpoint data is 40002 bytes, at most 32768 (32 KiB)"}},
		{"a last action of 5 KB", teamapi.CheckpointRequest{LastAction: strings.Repeat("a", 5000)}, []string{"last_action is 5000 bytes, at most 4096"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			check := func(how string, err error) {
				t.Helper()
				if !errors.Is(err, teambus.ErrInvalid) || teambus.ExitCode(err) != teambus.ExitPermanent {
					t.Fatalf("%s: %v (exit %d), want a refusal with exit 2", how, err, teambus.ExitCode(err))
				}
				for _, p := range tt.parts {
					if !strings.Contains(err.Error(), p) {
						t.Errorf("%s: %q does not name %q", how, err, p)
					}
				}
			}
			_, err := e.tm1.Checkpoint(ctx, tt.req)
			check("client", err)
			// Around the client's check: the service refuses it the same way.
			var rep teamapi.TaskReply
			err = e.tm1.Call(ctx, teamapi.VerbCheckpoint, tt.req, &rep)
			check("service", err)
		})
	}
	v, err := e.admin.Show(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	if cp := v.Tasks[0].Checkpoint; cp != nil {
		t.Fatalf("a refused checkpoint was recorded: %+v", cp)
	}
	// At the caps it is recorded.
	if _, err := e.tm1.Checkpoint(ctx, teamapi.CheckpointRequest{Remaining: bigItems(4, 15_000)}); err != nil {
		t.Fatalf("a checkpoint within the caps: %v", err)
	}
}

// TestBounded_ShowWithFullCheckpoints: 24 tasks, each with a checkpoint
// at the cap (64 KiB: 1.5 MiB together, more than an answer carries).
// team show through the service answers: the largest checkpoints come
// clipped to a summary that says so, the view fits an answer.
func TestBounded_ShowWithFullCheckpoints(t *testing.T) {
	e := newBoundedEnv(t, node.Config{}, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const tasks = 24
	for i := range tasks {
		id := "t" + strconv.Itoa(i)
		if _, err := e.admin.AddTask(ctx, "big", team.TaskSpec{ID: id, Description: "work " + id}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.tm2.Task(ctx, teamapi.TaskRequest{Op: teamapi.TaskClaim, ID: id}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.tm2.Checkpoint(ctx, teamapi.CheckpointRequest{Task: id, Done: bigItems(4, 15_000), LastAction: "step " + id}); err != nil {
			t.Fatalf("checkpoint %s: %v", id, err)
		}
		if _, err := e.tm2.Task(ctx, teamapi.TaskRequest{Op: teamapi.TaskComplete, ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	for _, cl := range []*teamapi.Client{e.tm1, e.tm2} {
		raw, err := cl.Show(ctx, teamapi.ShowRequest{})
		if err != nil {
			t.Fatalf("team show through the service with %d full checkpoints: %v", tasks, err)
		}
		b, _ := raw.(json.RawMessage)
		var v team.View
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		full, clipped := 0, 0
		for _, tk := range v.Tasks {
			switch {
			case tk.Checkpoint == nil:
				t.Errorf("task %s lost its checkpoint", tk.ID)
			case len(tk.Checkpoint.TasksCompleted) == 4:
				full++
			case strings.Contains(string(tk.Checkpoint.Data), "left out so the answer fits"):
				clipped++
				if tk.Checkpoint.LastAction != "step "+tk.ID {
					t.Errorf("clipped checkpoint of %s: last action %q", tk.ID, tk.Checkpoint.LastAction)
				}
			default:
				t.Errorf("task %s: checkpoint neither whole nor marked clipped: %s", tk.ID, tk.Checkpoint.Data)
			}
		}
		if full == 0 || clipped == 0 || full+clipped != tasks || len(b) > team.DefaultMaxReply {
			t.Fatalf("view of %d bytes: %d checkpoints whole, %d clipped; want both, %d in all, within %d bytes", len(b), full, clipped, tasks, team.DefaultMaxReply)
		}
		t.Logf("team show: %d bytes, %d checkpoints whole, %d clipped", len(b), full, clipped)
	}
	// A task that depends on all of them: its member's brief answers, the
	// dependencies' checkpoints clipped as needed.
	deps := make([]string, tasks)
	for i := range deps {
		deps[i] = "t" + strconv.Itoa(i)
	}
	if _, err := e.admin.AddTask(ctx, "big", team.TaskSpec{ID: "final", Description: "join it all", Deps: deps}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.tm1.Task(ctx, teamapi.TaskRequest{Op: teamapi.TaskClaim, ID: "final"}); err != nil {
		t.Fatal(err)
	}
	var br team.Brief
	if err := e.tm1.BriefInto(ctx, "tm1", 10, &br); err != nil {
		t.Fatalf("brief of a task with %d dependencies with full checkpoints: %v", tasks, err)
	}
	if br.Task == nil || br.Task.ID != "final" || len(br.Deps) != tasks {
		t.Fatalf("brief: task %v, %d dependencies", br.Task, len(br.Deps))
	}
	clippedDeps := 0
	for _, d := range br.Deps {
		if d.Checkpoint != nil && strings.Contains(string(d.Checkpoint.Data), "left out") {
			clippedDeps++
		}
	}
	if clippedDeps == 0 {
		t.Fatal("brief of 1.5 MiB of dependencies' checkpoints answered without clipping any")
	}
	// The operator's own view is whole.
	v, err := e.admin.Show(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range v.Tasks {
		if tk.ID != "final" && len(tk.Checkpoint.TasksCompleted) != 4 {
			t.Fatalf("the stored checkpoint of %s was changed by a view", tk.ID)
		}
	}
}

// TestBounded_TooBigReplyIsAnError: a service whose pages are larger than
// the bus carries (MaxReply far past the max payload) answers a replay
// that does not fit with too_big (exit 2, the verb and the size named)
// at once, not with silence the caller takes for a timeout.
func TestBounded_TooBigReplyIsAnError(t *testing.T) {
	e := newBoundedEnv(t, node.Config{Team: team.Config{MaxReply: 64 << 20}}, 0)
	ctx := testCtx(t)
	for i := range 8 {
		if _, err := e.admin.Send(ctx, teamapi.SendRequest{Actor: teamapi.Actor{Team: "big", Member: teambus.Lead}, To: "tm1", Body: strconv.Itoa(i) + strings.Repeat("y", 200_000)}); err != nil {
			t.Fatal(err)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err := e.tm1.Replay(rctx, teamapi.ReplayRequest{})
	if !errors.Is(err, teamapi.ErrTooBig) || teambus.ExitCode(err) != teambus.ExitPermanent {
		t.Fatalf("replay of 1.6 MB in one answer: %v (exit %d) after %s; want too_big, exit 2", err, teambus.ExitCode(err), time.Since(start))
	}
	for _, p := range []string{"replay answer", "more than the bus carries"} {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%q does not say %q", err, p)
		}
	}
	t.Logf("too big: %v (after %s)", err, time.Since(start).Round(time.Millisecond))
}

// TestBounded_InboxReadsFitAnAnswer: 8 messages of 200 KB (1.6 MB, more
// than an answer carries) in tm1's inbox. An acking read returns the
// oldest that fit the page budget and leaves the rest for the next read;
// a lease read does the same. Every message comes exactly once, in order.
func TestBounded_InboxReadsFitAnAnswer(t *testing.T) {
	e := newBoundedEnv(t, node.Config{}, 0)
	ctx := testCtx(t)
	send := func(n int) {
		for i := range n {
			if _, err := e.admin.Send(ctx, teamapi.SendRequest{Actor: teamapi.Actor{Team: "big", Member: teambus.Lead}, To: "tm1", Body: strconv.Itoa(i) + strings.Repeat("z", 200_000)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(8)
	var got []uint64
	for reads := 0; len(got) < 8; reads++ {
		if reads > 8 {
			t.Fatalf("after %d reads only %d of 8 messages", reads, len(got))
		}
		rep, err := e.tm1.Inbox(ctx, teamapi.InboxRequest{Mode: teamapi.InboxAck, Max: 100})
		if err != nil {
			t.Fatalf("inbox read %d: %v", reads+1, err)
		}
		if n := len(rep.Messages); n == 0 || n > 2 {
			t.Fatalf("inbox read %d: %d messages of 200 KB; want 1 or 2 (half an answer)", reads+1, n)
		}
		for _, m := range rep.Messages {
			if len(got) > 0 && m.Seq <= got[len(got)-1] {
				t.Fatalf("seq %d after %d: out of order or doubled", m.Seq, got[len(got)-1])
			}
			got = append(got, m.Seq)
		}
	}
	if rep, err := e.tm1.Inbox(ctx, teamapi.InboxRequest{Mode: teamapi.InboxPeek, Max: 100}); err != nil || len(rep.Messages) != 0 {
		t.Fatalf("inbox after reading all: %d messages, %v", len(rep.Messages), err)
	}
	// A lease holds only what it returns: the rest comes to the next one.
	send(4)
	var leased []uint64
	for reads := 0; len(leased) < 4; reads++ {
		if reads > 4 {
			t.Fatalf("after %d leases only %d of 4 messages", reads, len(leased))
		}
		rep, err := e.tm1.Inbox(ctx, teamapi.InboxRequest{Mode: teamapi.InboxLease, Max: 100})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(rep.Messages); n == 0 || n > 2 {
			t.Fatalf("lease %d: %d messages; want 1 or 2", reads+1, n)
		}
		var toks []teamapi.Token
		for _, m := range rep.Messages {
			leased = append(leased, m.Seq)
			toks = append(toks, teamapi.Token{Seq: m.Seq, Token: m.Token})
		}
		if _, err := e.tm1.Ack(ctx, teamapi.AckRequest{Tokens: toks}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < len(leased); i++ {
		if leased[i] <= leased[i-1] {
			t.Fatalf("leased %v: out of order or doubled", leased)
		}
	}
}
