package hook

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/teambus/teambus"
)

// TestCarry_ClipsAnOldCheckpoint: a checkpoint recorded before the caps
// (700 KB of steps, 100 KB of data) is carried into a hook's checkpoint
// clipped within the caps, and the data says so: the hook's checkpoint is
// never refused for it.
func TestCarry_ClipsAnOldCheckpoint(t *testing.T) {
	big := make([]string, 50)
	for i := range big {
		big[i] = strings.Repeat("s", 14_000)
	}
	old := &teambus.Checkpoint{TasksCompleted: big, TasksRemaining: []string{strings.Repeat("r", 40_000)}, LastAction: "x",
		Files: []string{"a.go"}, Data: json.RawMessage(`"` + strings.Repeat("d", 100_000) + `"`)}
	spec := carry(old)
	if err := teambus.ValidateCheckpoint(spec.Done, spec.Remaining, spec.LastAction, spec.Files, spec.Data); err != nil {
		t.Fatalf("carried checkpoint over the caps: %v", err)
	}
	if !strings.Contains(string(spec.Data), "was clipped") {
		t.Errorf("data %s does not say what was clipped", spec.Data)
	}
	if len(old.TasksCompleted) != 50 || len(old.Data) != 100_002 {
		t.Error("carry changed the previous checkpoint")
	}
	// What a hook merges in afterwards is fitted too.
	cp := *old
	cp.Clip()
	spec.Data = mergeData(&cp, map[string]any{"compact_summary": strings.Repeat("c", 40_000)})
	fit(&spec)
	if err := teambus.ValidateCheckpoint(spec.Done, spec.Remaining, spec.LastAction, spec.Files, spec.Data); err != nil {
		t.Fatalf("fitted checkpoint over the caps: %v", err)
	}
}
