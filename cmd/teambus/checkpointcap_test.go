package main

import (
	"strings"
	"testing"
)

// TestCheckpoint_CapRefusedBeforeConnecting: a 700 KB checkpoint (50
// steps of 14 KB) exits 2 naming the cap, before any connection (there is
// no bus here); so does one step over the per-step cap.
func TestCheckpoint_CapRefusedBeforeConnecting(t *testing.T) {
	t.Setenv("TEAMBUS_URL", "nats://127.0.0.1:1")
	args := []string{"checkpoint", "--team", "alpha", "--member", "tm1", "--session", "s1"}
	step := strings.Repeat("s", 14_000)
	for range 50 {
		args = append(args, "--remaining", step)
	}
	runCLI(t, args...).wantError(t, 2, "at most 65536 (64 KiB) in all", "files whose paths the checkpoint names")
	runCLI(t, "checkpoint", "--team", "alpha", "--member", "tm1", "--session", "s1", "--done", strings.Repeat("d", 20_000)).
		wantError(t, 2, "done item 1 is 20000 bytes, at most 16384 (16 KiB)")
}
