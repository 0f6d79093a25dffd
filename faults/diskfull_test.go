package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node"
)

// smallDisk mounts a tmpfs of size bytes on a new directory and unmounts
// it when the test ends. It skips the test, saying why, when mounting is
// not possible (not root, no CAP_SYS_ADMIN).
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Skipf("disk-full scenario skipped: cannot mount a %s tmpfs on %s (%v): run as root, or with CAP_SYS_ADMIN", size, dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// openNode opens a node in dir with the test token, logging into log.
func openNode(t *testing.T, dir string, log *memLogger, maxStore int64) (*node.Node, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return node.Start(ctx, node.NodeConfig{Dir: dir, Listen: "127.0.0.1:-1", Token: testToken, MaxStore: maxStore, Logger: log.logger(), Attach: node.Attach(node.Config{})})
}

// S6: the store's disk fills up (a small tmpfs). Sends fail with a clear
// ErrNoSpace that says the storage is full (the operator's to fix); nothing is acknowledged
// that is not stored; after space is freed and the node restarts, every
// acknowledged message is readable and sends work again.
func TestS6_DiskFull(t *testing.T) {
	t.Parallel() // no timing criterion: runs beside the other parallel scenarios
	disk := smallDisk(t, "8m")
	dir := filepath.Join(disk, "node")
	// Ballast to free later: the "space freed" of the scenario.
	ballast := filepath.Join(disk, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	log := &memLogger{}
	nd, err := openNode(t, dir, log, 1<<30) // store limit far above the device: real ENOSPC
	if err != nil {
		t.Fatal(err)
	}
	defer func() { nd.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conn, err := nd.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	loadTeam(t, conn, "df", []string{"r1"}, teambus.DefaultPolicy())
	mb := mailbox.NewMailbox(conn.JS, "df", mailbox.MailboxConfig{})

	// Send 16 KiB messages until three attempts in a row fail: the disk is
	// full. Errors are recorded as unknown (they are timeouts on the wire):
	// any of them that turns up later counts as recovered, not lost.
	h := NewHistory()
	var errs []error
	seq := uint64(0)
	for len(errs) < 3 && seq < 10000 {
		seq++
		id := MsgID("s1", seq)
		_, err := sendOnce(ctx, h, mb, "s1", "r1", id, sendBody(id, 16<<10), 2*time.Second, nil)
		if err != nil {
			errs = append(errs, err)
		} else {
			errs = errs[:0]
		}
	}
	acked := len(h.Acked())
	if len(errs) == 0 {
		t.Fatalf("sent %d messages of 16 KiB to an 8 MiB disk without an error", seq)
	}
	for _, err := range errs {
		msg := strings.ToLower(err.Error())
		// Once the node reports its write errors, the send is an
		// ErrNoSpace, the operator's problem (exit 2); before, a timeout
		// that may have stored (exit 1).
		if !(errors.Is(err, teambus.ErrNoSpace) || errors.Is(err, teambus.ErrUnavailable)) || !(strings.Contains(msg, "full") || strings.Contains(msg, "storage") || strings.Contains(msg, "space") || strings.Contains(msg, "room")) {
			t.Errorf("send on a full disk failed with %q (exit %d): want ErrNoSpace (or a timeout) saying the storage is full", err, teambus.ExitCode(err))
			break
		}
	}
	t.Logf("first error after %d acked sends: %v", acked, errs[0])
	if lines := log.matching("no space left"); len(lines) == 0 {
		t.Error("the node logged nothing about the full disk")
	}
	if h := nd.Health(); h.OK || !strings.Contains(strings.Join(h.Errors, " "), "no space left") {
		t.Errorf("node health on a full disk = %+v, want the write error", h)
	}

	// Free space, restart, read everything.
	conn.Close()
	if err := nd.Close(); err != nil {
		t.Logf("close on a full disk: %v", err)
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	nd, err = openNode(t, dir, log, 1<<30)
	if err != nil {
		t.Fatalf("restart after freeing space: %v", err)
	}
	conn, err = nd.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if h := nd.Health(); !h.OK {
		t.Errorf("node health after space was freed and a restart = %+v", h)
	}
	if _, err := scanMailbox(ctx, conn.JS, mailbox.MailboxPrefix+"df", h); err != nil {
		t.Fatal(err)
	}
	// Sends work again.
	mb = mailbox.NewMailbox(conn.JS, "df", mailbox.MailboxConfig{})
	after := 0
	for i := 0; i < 5; i++ {
		seq++
		id := MsgID("s1", seq)
		if _, err := sendOnce(ctx, h, mb, "s1", "r1", id, sendBody(id, 1<<10), 5*time.Second, nil); err != nil {
			t.Errorf("send after space was freed: %v", err)
			continue
		}
		after++
	}
	if _, err := scanMailbox(ctx, conn.JS, mailbox.MailboxPrefix+"df", h); err != nil {
		t.Fatal(err)
	}
	r := h.Check()
	result(t, "S6", "acked before full=%d errors=%d (first: %s) acked after restart=%d %s", acked, len(errs), firstLine(errs[0].Error()), after, r.Summary())
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if r.Acked != acked+after {
		t.Errorf("acked %d, want %d", r.Acked, acked+after)
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return fmt.Sprintf("%q", s)
}
