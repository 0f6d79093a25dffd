package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/bus/bustest"
	"github.com/teambus/teambus/node/nodetest"
)

// TestInterrupt_BlockedCommandSaysInterrupted presses Ctrl-C (SIGINT) on a
// real teambus process blocked in `inbox --wait` and checks that it says
// "interrupted", not "timed out", and exits 1 (transient: retrying helps).
func TestInterrupt_BlockedCommandSaysInterrupted(t *testing.T) {
	bin := bustest.Binary(t)
	n := nodetest.NewServer(t)
	dir := []string{"--dir", n.Dir()}
	if r := runCLI(t, append([]string{"team", "create", "alpha", "--member", "tm1"}, dir...)...); r.code != 0 {
		t.Fatalf("team create: %d %s", r.code, r.stderr)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), bin, append([]string{"inbox", "--team", "alpha", "--member", "tm1", "--wait", "60s"}, dir...)...)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The command is blocked once its pull request waits on tm1's inbox
	// consumer; only then is SIGINT the user's Ctrl-C on a waiting command.
	conn := bustest.Connect(t, n)
	bustest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		c, err := conn.JS.Consumer(ctx, bus.MailboxPrefix+"alpha", bus.InboxConsumer("tm1"))
		if err != nil {
			return err
		}
		info, err := c.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumWaiting == 0 {
			return fmt.Errorf("no pull request waits on tm1's inbox yet")
		}
		return nil
	})
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	code := -1
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err == nil {
		code = 0
	}
	got := stderr.String()
	if code != 1 || !strings.HasPrefix(got, "teambus: interrupted") || strings.Contains(got, "timed out") {
		t.Fatalf("after Ctrl-C: exit %d, stderr %q; want exit 1 and \"teambus: interrupted…\" without \"timed out\"", code, got)
	}
}
