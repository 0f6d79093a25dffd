package main

import (
	"strings"
	"testing"
)

// `teambus team set`: a full mailbox refuses a send with exit 2 naming
// the command; the command raises the live team's limit and the same
// send then works; bad input and a smaller limit exit 2.
func TestTeamSet_RaisesAFullMailbox(t *testing.T) {
	t.Parallel()
	dir := evTeam(t, "room", "--mailbox-max-bytes", "1MiB", "--max-body", "256KiB")
	body := strings.Repeat("x", 200<<10)
	var r result
	for i := 0; i < 10; i++ {
		if r = runCLI(t, append([]string{"send", "--team", "room", "--member", "lead", "--to", "tm1", body}, dir...)...); r.code != 0 {
			break
		}
	}
	r.wantError(t, 2, "team room's mailbox is full (1MiB)", "`teambus team set room --mailbox-max-bytes 2MiB`")
	runCLI(t, append([]string{"team", "set", "room"}, dir...)...).wantError(t, 2, "needs --mailbox-max-bytes or --events-max-bytes")
	runCLI(t, append([]string{"team", "set", "room", "--mailbox-max-bytes", "512KiB"}, dir...)...).wantError(t, 2, "at least 1MiB")
	runCLI(t, append([]string{"team", "set", "room", "--events-max-bytes", "8MiB"}, dir...)...).wantError(t, 2, "a limit only grows")
	runCLI(t, append([]string{"team", "set", "nosuch", "--mailbox-max-bytes", "2MiB"}, dir...)...).wantError(t, 2, "team nosuch not found")
	if out := evOK(t, append([]string{"team", "set", "room", "--mailbox-max-bytes", "2MiB"}, dir...)...); !strings.Contains(out, "mailbox raised from 1MiB to 2MiB") {
		t.Fatalf("team set: %q", out)
	}
	evOK(t, append([]string{"send", "--team", "room", "--member", "lead", "--to", "tm1", body}, dir...)...)
}
