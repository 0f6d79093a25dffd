package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus/bus/bustest"
)

// TestRun_Respawn runs the respawn section (one trial) against the built
// teambus binary and the real Claude Code: its row and target are there,
// measured when Claude Code is installed, skipped with the reason when
// not.
func TestRun_Respawn(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the teambus binary and runs Claude Code")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	exe := bustest.Binary(t) // built once for the package's tests
	res, err := Run(ctx, Config{Dir: t.TempDir(), Exe: exe, Quick: true, Only: []string{"respawn"}})
	if err != nil {
		t.Fatal(err)
	}
	row := res.Row(keyRespawn)
	if row == nil {
		t.Fatal("no respawn row")
	}
	if row.Skipped {
		t.Skipf("respawn row skipped: %s", row.Note)
	}
	if row.Value <= 0 || row.N != 1 {
		t.Errorf("respawn row %+v", row)
	}
	found := false
	for _, tg := range res.Targets {
		if strings.Contains(tg.Text, "respawned session's first model request") {
			found = true
			if tg.Skipped || tg.Got == "" {
				t.Errorf("target %q not measured", tg.Text)
			}
		}
	}
	if !found {
		t.Error("no respawn target")
	}
}
