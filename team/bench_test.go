package team_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

func reportRate(b *testing.B, unit string) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, unit)
	}
}

// BenchmarkClaim_8Contending measures one contended claim: eight members
// claim the same available task at once, one wins, seven lose with a
// conflict. An operation is the whole race; between races the winner
// releases the task (not timed).
func BenchmarkClaim_8Contending(b *testing.B) {
	f := newFixture(b, team.Config{})
	var members []string
	for i := 0; i < 8; i++ {
		members = append(members, fmt.Sprintf("tm%d", i))
	}
	f.create(b, "bench", "L", testPolicy(), members...)
	f.addTask(b, "bench", "hot", 0)
	for i := 0; i < 20; i++ {
		f.addTask(b, "bench", fmt.Sprintf("other%02d", i), 0)
	}
	ctx := context.Background()
	errs := make([]error, len(members))
	conflicts := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for j, m := range members {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[j] = f.svc.Claim(ctx, actorOf("bench", m), "hot")
			}()
		}
		close(start)
		wg.Wait()
		b.StopTimer()
		winner := ""
		for j, err := range errs {
			switch {
			case err == nil && winner == "":
				winner = members[j]
			case err == nil:
				b.Fatalf("two winners: %s and %s", winner, members[j])
			case errors.Is(err, teambus.ErrConflict):
				conflicts++
			default:
				b.Fatalf("claim by %s: %v", members[j], err)
			}
		}
		if winner == "" {
			b.Fatal("no winner")
		}
		if _, err := f.svc.Release(ctx, actorOf("bench", winner), "hot"); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	reportRate(b, "claims/s")
	b.ReportMetric(float64(conflicts)/float64(b.N), "conflicts/op")
}

// BenchmarkService_Claim is one uncontended claim by a member (read the
// team, check the member, write the task; fenced: in one atomic batch with
// the member's activity). Between claims the member releases the task (not
// timed).
func BenchmarkService_Claim(b *testing.B) {
	f := newFixture(b, team.Config{})
	f.create(b, "bench", "L", testPolicy(), "tm1")
	f.addTask(b, "bench", "t1", 0)
	ctx := context.Background()
	tm1 := actorOf("bench", "tm1")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.svc.Claim(ctx, tm1, "t1"); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if _, err := f.svc.Release(ctx, tm1, "t1"); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	reportRate(b, "claims/s")
}

// BenchmarkService_Send is team.Service.Send from one member, one at a
// time: what `teambus send` does after connecting (read the team and the
// member, store the message fsynced, record activity).
func BenchmarkService_Send(b *testing.B) {
	// A mailbox whose send quota (a quarter) holds any b.N.
	b.Run("quota", func(b *testing.B) { benchSend(b, team.Config{Mailbox: mailbox.MailboxConfig{MaxBytes: 4 << 30}}) })
	b.Run("no-quota", func(b *testing.B) {
		benchSend(b, team.Config{Mailbox: mailbox.MailboxConfig{MaxBytes: 4 << 30}, SendQuotaShare: -1})
	})
}

func benchSend(b *testing.B, cfg team.Config) {
	f := newFixture(b, cfg)
	f.create(b, "bench", "L", testPolicy(), "tm1")
	ctx := context.Background()
	body := strings.Repeat("x", 1000)
	tm1 := actorOf("bench", "tm1")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.svc.Send(ctx, teamapi.SendRequest{Actor: tm1, ID: "s" + strconv.Itoa(i), Body: body}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportRate(b, "msgs/s")
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// teambusBinary builds cmd/teambus once per test binary run.
func teambusBinary(b *testing.B) string {
	b.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		b.Skip("go tool not found: can not build teambus")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "teambus-bench-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "teambus")
		cmd := exec.Command(gobin, "build", "-o", builtBin, "./cmd/teambus")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		b.Fatal(buildErr)
	}
	return builtBin
}

// BenchmarkSendProcess runs `teambus send` as a process per message
// against a node (sync=always) found through its directory: start, read
// the discovery file, connect over TCP, read team and member, publish
// with PubAck, exit. Compare BenchmarkJSONLOneShotProcess.
func BenchmarkSendProcess(b *testing.B) {
	bin := teambusBinary(b)
	f := newFixture(b, team.Config{})
	f.create(b, "bench", "L", testPolicy())
	if _, err := f.svc.AddMember(context.Background(), "bench", team.MemberSpec{ID: "tm1"}); err != nil {
		b.Fatal(err)
	}
	body := strings.Repeat("x", 1000)
	env := append(os.Environ(), "TEAMBUS_DIR="+f.node.Dir(), "TEAMBUS_TEAM=bench", "TEAMBUS_MEMBER=tm1")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(bin, "send", "--to", "lead", "--id", "p"+strconv.Itoa(i), body)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "stored seq ") {
			b.Fatalf("teambus send: %v: %s", err, out)
		}
	}
	b.StopTimer()
	reportRate(b, "msgs/s")
	if got := f.msgCount(b, "bench"); got != uint64(b.N) {
		b.Fatalf("stream holds %d messages after %d sends", got, b.N)
	}
}

// BenchmarkJSONLOneShotProcess is the file baseline of
// BenchmarkSendProcess: a process per message that opens a JSONL file,
// appends a ~1 KiB line, fsyncs and exits. The process is this test
// binary (TestMain), which links the same libraries as teambus, so start
// up costs are alike.
func BenchmarkJSONLOneShotProcess(b *testing.B) {
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "mail.jsonl")
	env := append(os.Environ(), jsonlEnv+"="+path)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(self)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("jsonl writer: %v: %s", err, out)
		}
	}
	b.StopTimer()
	reportRate(b, "msgs/s")
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	if got := strings.Count(string(data), "\n"); got != b.N {
		b.Fatalf("file holds %d lines after %d writes", got, b.N)
	}
}

// BenchmarkProcess_True is the floor of the process benchmarks: fork and
// exec of /bin/true.
func BenchmarkProcess_True(b *testing.B) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no true(1)")
	}
	for i := 0; i < b.N; i++ {
		if err := exec.Command(truePath).Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNextComplete_4Members is the claims row of issue 15 in
// process: four members, each on its own connection, take the best task
// (Service.Next) and complete it until b.N tasks are done, in a team of
// TEAMBUS_BENCH_TASKS tasks (default 11,000: past the 1,024 keys of one
// multi_last). An op is one task claimed and completed.
func BenchmarkNextComplete_4Members(b *testing.B) {
	n := 11000
	if v, err := strconv.Atoi(os.Getenv("TEAMBUS_BENCH_TASKS")); err == nil && v > 0 {
		n = v
	}
	n = max(n, b.N)
	f := newFixture(b, team.Config{})
	members := []string{"tm1", "tm2", "tm3", "tm4"}
	f.create(b, "bench", "L", testPolicy(), members...)
	ctx := context.Background()
	var specs []team.ImportTask
	for i := 0; i < n; i++ {
		specs = append(specs, team.ImportTask{Line: i + 1, TaskSpec: team.TaskSpec{ID: fmt.Sprintf("t%05d", i)}})
	}
	if _, err := f.svc.ImportTasks(ctx, "bench", specs, nil); err != nil {
		b.Fatal(err)
	}
	var (
		left = int64(b.N)
		mu   sync.Mutex
	)
	take := func() bool {
		mu.Lock()
		defer mu.Unlock()
		left--
		return left >= 0
	}
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := actorOf("bench", m)
			for take() {
				for {
					t, err := f.svc.Next(ctx, a)
					if errors.Is(err, teambus.ErrConflict) || errors.Is(err, teambus.ErrUnavailable) {
						continue
					}
					if err == nil {
						_, _, err = f.svc.Complete(ctx, a, t.ID, "")
					}
					if err != nil {
						b.Error(err)
						return
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	reportRate(b, "claims/s")
}
