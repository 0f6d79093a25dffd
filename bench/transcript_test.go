package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus/bus/bustest"
)

// TestRun_Transcript runs the transcript section with a few hooks against
// the built teambus binary: its rows are there and its two targets are
// checked, not skipped.
func TestRun_Transcript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the teambus binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	exe := bustest.Binary(t) // built once for the package's tests
	res, err := Run(ctx, Config{Dir: t.TempDir(), Exe: exe, Quick: true, Only: []string{"transcript"}, HookRuns: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{keyTrHookOff, keyTrHookOn, keyTrSync, keyTrBytes} {
		if row := res.Row(key); row == nil || row.Value <= 0 || row.N == 0 || row.Skipped {
			t.Errorf("row %s: %+v", key, row)
		}
	}
	n := 0
	for _, tg := range res.Targets {
		if strings.Contains(tg.Text, "transcript") {
			n++
			if tg.Skipped || tg.Got == "" {
				t.Errorf("target %q not measured", tg.Text)
			}
		}
	}
	if n != 2 {
		t.Errorf("%d transcript targets, want 2", n)
	}
	var b bytes.Buffer
	res.WriteTable(&b)
	if !strings.Contains(b.String(), "× its size") {
		t.Errorf("table lacks the bytes row:\n%s", b.String())
	}
}
