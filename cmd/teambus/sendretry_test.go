package main

import (
	"regexp"
	"strings"
	"testing"
)

// TestSend_ExitOneRetryStoresOnce: a send whose answer does not come in
// time exits 1 naming the id it was sent with (stored or not); the retry
// the message asks for, with that id, leaves exactly one copy.
func TestSend_ExitOneRetryStoresOnce(t *testing.T) {
	t.Parallel()
	dir := evTeam(t, "alpha")
	body := "sent once whatever the first answer was"
	// A deadline too short for an answer; the request may still be
	// stored after the client gave up. A deadline too short to connect
	// sends nothing (and has no id to name): try longer ones.
	var m []string
	re := regexp.MustCompile(`retry with --id (\S+):`)
	for _, d := range []string{"1ms", "2ms", "3ms", "5ms", "8ms", "12ms", "20ms", "30ms"} {
		r := runCLI(t, append([]string{"send", "--team", "alpha", "--member", "tm1", "--to", "tm2", "--timeout", d, body}, dir...)...)
		if r.code == 0 {
			break // answered in time: nothing to retry
		}
		if r.code != 1 {
			t.Fatalf("send --timeout %s: exit %d %s", d, r.code, r.stderr)
		}
		if m = re.FindStringSubmatch(r.stderr); m != nil {
			break
		}
	}
	if m == nil {
		t.Skip("no deadline ended after the request was sent and before its answer: nothing to retry")
	}
	// Whether the first request is stored before or after the retry, the
	// id makes one of them a duplicate.
	r := runCLI(t, append([]string{"send", "--team", "alpha", "--member", "tm1", "--to", "tm2", "--id", m[1], body}, dir...)...)
	if r.code != 0 {
		t.Fatalf("retry with --id %s: exit %d %s", m[1], r.code, r.stderr)
	}
	out := evOK(t, append([]string{"replay", "--team", "alpha", "--json"}, dir...)...)
	if n := strings.Count(out, body); n != 1 {
		t.Fatalf("%d copies stored after the retry, want 1:\n%s", n, out)
	}
}
