package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node/nodetest"
)

// TestInterrupt_BlockedCommandSaysInterrupted presses Ctrl-C (SIGINT) on a
// teambus process blocked in `inbox --wait` and checks that it says
// "interrupted", not "timed out", and exits 1 (transient: retrying helps).
func TestInterrupt_BlockedCommandSaysInterrupted(t *testing.T) {
	e := newEnv(t)
	e.createTeam("alpha", fastPolicy(), "tm1")
	var stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), bin, "inbox", "--team", "alpha", "--member", "tm1", "--wait", "60s", "--dir", e.node.Dir())
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The command is blocked once its pull request waits on tm1's inbox
	// consumer; only then is SIGINT the user's Ctrl-C on a waiting command.
	conn := nodetest.Connect(t, e.node)
	e.waitFor(30*time.Second, "inbox --wait to block", func() error {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		c, err := conn.JS.Consumer(ctx, mailbox.MailboxPrefix+"alpha", mailbox.InboxConsumer("tm1"))
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
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	got := stderr.String()
	if code != 1 || !strings.HasPrefix(got, "teambus: interrupted") || strings.Contains(got, "timed out") {
		t.Fatalf("after Ctrl-C: exit %d, stderr %q; want exit 1 and \"teambus: interrupted…\" without \"timed out\"", code, got)
	}
}
