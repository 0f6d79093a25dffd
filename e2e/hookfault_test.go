package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// hookEnv is the environment of a hook run by Claude for the stand-in
// Claude process pid.
func hookEnv(e *env, pid int, member string, extra ...string) []string {
	return append(append(os.Environ(), "CLAUDE_PID="+strconv.Itoa(pid), "TEAMBUS_TEAM=alpha", "TEAMBUS_MEMBER="+member,
		"TEAMBUS_DIR="+e.node.Dir(), "TEAMBUS_SESSION=", "TEAMBUS_FORCE="), extra...)
}

func hookPayload(event, session string, extra map[string]any) []byte {
	p := map[string]any{"session_id": session, "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp", "hook_event_name": event}
	for k, v := range extra {
		p[k] = v
	}
	b, _ := json.Marshal(p)
	return b
}

var seqRE = regexp.MustCompile(`\[#(\d+) `)

var (
	faultsOnce sync.Once
	faultsPath string
	faultsErr  error
)

// faultsBin builds teambus with the faults tag once, beside bin (removed
// with it): the hook's fault points (TEAMBUS_HOOK_FAULT) exist only in
// that build.
func faultsBin(t *testing.T) string {
	t.Helper()
	faultsOnce.Do(func() {
		faultsPath = filepath.Join(filepath.Dir(bin), "teambus-faults")
		out, err := exec.Command("go", "build", "-tags", "faults", "-o", faultsPath, "../cmd/teambus").CombinedOutput()
		if err != nil {
			faultsErr = fmt.Errorf("build teambus -tags faults: %v\n%s", err, out)
		}
	})
	if faultsErr != nil {
		t.Fatal(faultsErr)
	}
	return faultsPath
}

// TestHookFault_KillAnywhere_NoAckWithoutWrite kills the hook at random
// points 1,000 times — before the write, after the write, during the acks
// (fault points inside the hook that SIGKILL it) and with a real SIGKILL
// from outside after a random delay — and checks the delivery invariant:
// every message is either in an output the hook wrote completely or still
// unacked (redelivered). No message is acked that was not written.
func TestHookFault_KillAnywhere_NoAckWithoutWrite(t *testing.T) {
	iterations := 1000
	if testing.Short() {
		iterations = 100
	}
	faulty := faultsBin(t)
	e := newEnv(t)
	e.createTeam("alpha", fastPolicy(), "tm1", "tm2")
	claude := e.agent("claude")
	pid := claude.Pid()
	run := func(event string, payload []byte, fault string, killAfter time.Duration) (string, bool) {
		cmd := exec.Command(faulty, "hook", event)
		cmd.Env = hookEnv(e, pid, "tm1", "TEAMBUS_NO_SIDECAR=1", "TEAMBUS_HOOK_FAULT="+fault)
		cmd.Stdin = bytes.NewReader(payload)
		var out bytes.Buffer
		cmd.Stdout = &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if killAfter > 0 {
			timer := time.AfterFunc(killAfter, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
			defer timer.Stop()
		}
		err := cmd.Wait()
		return out.String(), err == nil
	}
	out, _ := run("SessionStart", hookPayload("SessionStart", "s-fault", map[string]any{"source": "startup"}), "", 0)
	if !bytes.Contains([]byte(out), []byte("this session is member tm1")) {
		t.Fatalf("SessionStart: %q", out)
	}
	ctx := context.Background()
	delivered := map[uint64]bool{}
	sent := map[uint64]bool{}
	modes := []string{"", "crash-before-write", "crash-after-write", "crash-during-ack", "external"}
	killed := map[string]int{}
	rng := rand.New(rand.NewPCG(1, 2))
	ptb := hookPayload("PostToolBatch", "s-fault", map[string]any{"tool_calls": []any{}})
	for i := 0; i < iterations; i++ {
		res, err := e.svc.Send(ctx, teamapi.SendRequest{Actor: team.Actor{Team: "alpha", Member: "tm2"}, To: "tm1", Type: teambus.MsgInfo, Body: fmt.Sprintf("m%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		sent[res.Seq] = true
		mode := modes[i%len(modes)]
		var after time.Duration
		if mode == "external" {
			after = time.Duration(rng.IntN(40_000)) * time.Microsecond
		}
		fault := mode
		if mode == "external" {
			fault = ""
		}
		out, clean := run("PostToolBatch", ptb, fault, after)
		if !clean {
			killed[mode]++
		}
		// Delivered: a complete envelope on stdout.
		var env struct {
			HSO struct {
				AdditionalContext string `json:"additionalContext"`
			} `json:"hookSpecificOutput"`
		}
		if out != "" && json.Unmarshal([]byte(out), &env) == nil {
			for _, m := range seqRE.FindAllStringSubmatch(env.HSO.AdditionalContext, -1) {
				s, _ := strconv.ParseUint(m[1], 10, 64)
				delivered[s] = true
			}
		}
	}
	// Collect everything still unacked: lease (and hold) what is there,
	// again and again, until every message in flight is one this test
	// holds — what killed hooks leased comes back after the inbox ack
	// wait.
	mb := e.svc.Mailbox("alpha")
	js := nodetest.Connect(t, e.node).JS
	unacked := map[uint64]bool{}
	e.waitFor(mailbox.InboxAckWait+30*time.Second, "every unacked message collected", func() error {
		l, err := mb.Lease(ctx, "tm1", mailbox.LeaseOptions{Max: 500, Wait: 200 * time.Millisecond, Self: "tm1"})
		if err != nil {
			return err
		}
		t.Cleanup(func() { _ = l.Release(context.Background()) })
		for _, m := range l.Messages {
			unacked[m.Seq] = true
		}
		c, err := js.Consumer(ctx, mb.Stream(), mailbox.InboxConsumer("tm1"))
		if err != nil {
			return err
		}
		info, err := c.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumPending > 0 || info.NumAckPending > len(unacked) {
			return fmt.Errorf("%d pending, %d in flight, %d collected", info.NumPending, info.NumAckPending, len(unacked))
		}
		return nil
	})
	violations := 0
	for s := range sent {
		if !delivered[s] && !unacked[s] {
			violations++
			t.Errorf("message #%d was acked but never written in a complete output", s)
		}
	}
	t.Logf("hook fault test: %d runs, killed %v, %d messages, %d in a complete output, %d still unacked, %d acked without a write",
		iterations, killed, len(sent), len(delivered), len(unacked), violations)
	// The fault points exist only in the faults build: a hook that was
	// never killed by one was built without them.
	for _, mode := range []string{"crash-before-write", "crash-after-write", "crash-during-ack"} {
		if killed[mode] == 0 {
			t.Errorf("fault %s never killed the hook: is %s built with -tags faults?", mode, faulty)
		}
	}
}
