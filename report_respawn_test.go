package teambus_test

import (
	"strings"
	"testing"

	"github.com/teambus/teambus"
)

// The crash notice says who restarts the member, per the respawn policy.
func TestCrashNotice_Respawn(t *testing.T) {
	res := teambus.CrashResult{Counted: true, Crashes: 1, Tasks: []string{"t1"}}
	for pol, want := range map[teambus.RespawnPolicy]string{
		teambus.RespawnLead: "teambus spawn --team alpha --member tm1",
		"":                  "teambus spawn --team alpha --member tm1",
		teambus.RespawnAuto: "respawn=auto",
		teambus.RespawnOff:  "respawn=off",
	} {
		res.Respawn = pol
		if got := teambus.CrashNotice("alpha", "tm1", "pid exited", res); !strings.Contains(got, want) || !strings.Contains(got, "t1 back in the queue") {
			t.Errorf("%q: %q, want it to name %q", pol, got, want)
		}
	}
	res.Paused = true
	if got := teambus.CrashNotice("alpha", "tm1", "pid exited", res); !strings.Contains(got, "paused") || strings.Contains(got, "spawn") {
		t.Errorf("paused: %q", got)
	}
}
