package transcript_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/transcript"
)

// The helper process: `<test binary> -test.run=TestHelperSyncLoop` with
// TRANSCRIPT_HELPER=<url> <token> <path>. It syncs the transcript at path
// again and again, printing "chunk <offset>" after each stored message
// (data chunk or commit with bytes) and "synced <size>" after each sync,
// until it is killed.
func TestHelperSyncLoop(t *testing.T) {
	args := os.Getenv("TRANSCRIPT_HELPER")
	if args == "" {
		t.Skip("helper process only")
	}
	var url, token, path string
	if _, err := fmt.Sscan(args, &url, &token, &path); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	ctx := context.Background()
	conn, err := bus.Connect(ctx, bus.ConnectConfig{Server: url, Token: token})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	s, err := transcript.Open(ctx, conn.JS, testTeam)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	out := bufio.NewWriter(os.Stdout)
	stored := transcript.OnStored(func(off int64) {
		fmt.Fprintf(out, "chunk %d\n", off)
		out.Flush()
		// Time for the test to kill the process before the commit.
		time.Sleep(20 * time.Millisecond)
	})
	for {
		res, err := s.Sync(ctx, testMember, testSession, path, transcript.WithCwd("/w"), stored)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		fmt.Fprintf(out, "synced %d\n", res.Size)
		out.Flush()
	}
}

// TestSync_KillMidSync kills a real process with SIGKILL while it syncs a
// growing 10 MB transcript — after a chunk was stored and before its
// manifest, and at random moments — and checks after each kill that the
// stored transcript is valid: it restores, and it is a prefix of the file
// no shorter than the last sync the process reported. A final sync after
// all the kills restores byte-identical.
func TestSync_KillMidSync(t *testing.T) {
	if testing.Short() {
		t.Skip("runs processes")
	}
	n := nodetest.NewBareServer(t)
	c := nodetest.Connect(t, n)
	ctx := testCtx(t)
	s, err := transcript.Open(ctx, c.JS, testTeam)
	if err != nil {
		t.Fatal(err)
	}
	tf := newTranscript(t)
	tf.grow(10 << 20)
	var synced int64 // the newest size a killed process reported synced
	for round := 0; round < 8; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSyncLoop$", "-test.count=1")
		cmd.Env = append(os.Environ(), "TRANSCRIPT_HELPER="+n.URL()+" "+n.Token()+" "+tf.path)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Round 0 kills the first sync of the 10 MB file after 20 chunks
		// (one manifest at 4 MiB written, the next not). Even rounds kill
		// right after the (round/2)-th chunk stored by incremental syncs,
		// before its manifest; odd rounds at a moment while the file grows
		// by 20 KB per sync.
		lines := bufio.NewScanner(stdout)
		chunks, kill := 0, max(round/2, 20*(1-min(round, 1)))
		deadline := time.Now().Add(time.Duration(5+round*7) * time.Millisecond)
		for lines.Scan() {
			f := bytes.Fields(lines.Bytes())
			if len(f) == 2 && string(f[0]) == "synced" {
				synced, _ = strconv.ParseInt(string(f[1]), 10, 64)
				// Even rounds append more than a commit carries: a data
				// chunk, then the commit, and the kill between them.
				tf.grow(20<<10 + (1-round%2)*300<<10)
			}
			if len(f) == 2 && string(f[0]) == "chunk" {
				chunks++
				if round%2 == 0 && chunks == kill {
					break
				}
			}
			if round%2 == 1 && time.Now().After(deadline) {
				break
			}
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err = cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: helper ended with %v before the kill: %s", round, err, stderr.String())
		}
		if _, err := s.Latest(ctx, testMember); errors.Is(err, transcript.ErrNone) && synced == 0 {
			t.Logf("round %d: killed during the first round of the first sync: nothing stored yet", round)
			continue
		}
		info, got := restored(t, s, "")
		file := tf.bytes()
		if !bytes.HasPrefix(file, got) || int64(len(got)) < synced || info.Size != int64(len(got)) {
			t.Fatalf("round %d: restored %d bytes (info %d), want a prefix of the %d-byte file of at least %d", round, len(got), info.Size, len(file), synced)
		}
		t.Logf("round %d: killed after %d chunks; stored %d of %d bytes", round, chunks, len(got), len(file))
		if round == 0 {
			// The later rounds kill incremental syncs.
			if _, err := s.Sync(ctx, testMember, testSession, tf.path); err != nil {
				t.Fatal(err)
			}
		}
	}
	tf.grow(20 << 10)
	if _, err := s.Sync(ctx, testMember, testSession, tf.path); err != nil {
		t.Fatal(err)
	}
	if _, got := restored(t, s, ""); !bytes.Equal(got, tf.bytes()) {
		t.Fatal("after the kills, a sync does not restore byte-identical")
	}
	stored, err := s.StoredBytes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stored %d bytes for %d (%.3fx) after the kills", stored, len(tf.bytes()), float64(stored)/float64(len(tf.bytes())))
}
