package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/teambus/teambus/node/nodetest"
)

// failWriter fails every write, as stdout to a full device or a closed
// pipe does.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// TestInboxAck_WriteFailureAcksNothing: `inbox --ack` prints, flushes,
// then acks; when the write fails it acks nothing and exits 1, and the
// mail is there for the next read (issue 12 item 4).
func TestInboxAck_WriteFailureAcksNothing(t *testing.T) {
	t.Parallel()
	n := nodetest.NewServer(t)
	dir := []string{"--dir", n.Dir()}
	evOK(t, append([]string{"team", "create", "ia", "--member", "tm1", "--member", "tm2"}, dir...)...)
	evOK(t, append([]string{"send", "--team", "ia", "--member", "tm1", "--to", "tm2", "keep me"}, dir...)...)

	var stderr bytes.Buffer
	app := newApp(failWriter{}, &stderr)
	app.Reader = strings.NewReader("")
	ctx := t.Context()
	code := exit(ctx, runApp(ctx, app, append([]string{"teambus", "inbox", "--ack", "--team", "ia", "--member", "tm2"}, dir...)), &stderr)
	if code != 1 {
		t.Fatalf("inbox --ack to a failing stdout: exit %d, want 1 (stderr %q)", code, stderr.String())
	}
	out := evOK(t, append([]string{"inbox", "--team", "ia", "--member", "tm2"}, dir...)...)
	if !strings.Contains(out, "keep me") {
		t.Fatalf("after the failed write the mail is gone: inbox = %q", out)
	}
	out = evOK(t, append([]string{"inbox", "--ack", "--team", "ia", "--member", "tm2"}, dir...)...)
	if !strings.Contains(out, "keep me") {
		t.Fatalf("inbox --ack = %q", out)
	}
	if out := evOK(t, append([]string{"inbox", "--team", "ia", "--member", "tm2"}, dir...)...); strings.Contains(out, "keep me") {
		t.Fatalf("acked mail came back: %q", out)
	}
}
