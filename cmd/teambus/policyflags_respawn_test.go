package main

import (
	"strings"
	"testing"

	"github.com/teambus/teambus"
)

func TestPolicyFromFlags_Respawn(t *testing.T) {
	t.Parallel()
	for arg, want := range map[string]teambus.RespawnPolicy{"auto": teambus.RespawnAuto, "off": teambus.RespawnOff, "lead": ""} {
		p, r := runPolicy(t, "alpha", "--respawn", arg)
		if r.code != 0 || p.Respawn != want {
			t.Errorf("--respawn %s: exit %d (%s), respawn %q, want %q", arg, r.code, r.stderr, p.Respawn, want)
		}
	}
	_, r := runPolicy(t, "alpha", "--respawn", "always")
	if r.code != teambus.ExitPermanent || !strings.Contains(r.stderr, "respawn") {
		t.Errorf("--respawn always: exit %d, stderr %q; want 2 naming respawn", r.code, r.stderr)
	}
}
