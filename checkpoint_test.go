package teambus_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/teambus/teambus"
)

func items(n, size int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = strings.Repeat("i", size)
	}
	return out
}

func TestValidateCheckpoint_Caps(t *testing.T) {
	ok := []teambus.Checkpoint{
		{},
		{TasksCompleted: items(3, teambus.MaxCheckpointItem), LastAction: strings.Repeat("a", teambus.MaxCheckpointLastAction), Data: json.RawMessage(`{"k":1}`)},
		{Files: items(1000, 40)},
	}
	for i, c := range ok {
		if err := c.Validate(); err != nil {
			t.Errorf("checkpoint %d: %v", i, err)
		}
	}
	bad := []struct {
		c    teambus.Checkpoint
		want string
	}{
		{teambus.Checkpoint{TasksRemaining: items(2, teambus.MaxCheckpointItem+1)}, "remaining item 1 is 16385 bytes, at most 16384 (16 KiB)"},
		{teambus.Checkpoint{Files: []string{"a", strings.Repeat("f", 70_000)}}, "file item 2"},
		{teambus.Checkpoint{LastAction: strings.Repeat("a", 4097)}, "last_action is 4097 bytes, at most 4096 (4 KiB)"},
		{teambus.Checkpoint{Data: json.RawMessage(`"` + strings.Repeat("d", 33_000) + `"`)}, "data is 33002 bytes, at most 32768 (32 KiB)"},
		{teambus.Checkpoint{Data: json.RawMessage(`{not json`)}, "not valid JSON"},
		{teambus.Checkpoint{TasksCompleted: items(5, 14_000)}, "at most 65536 (64 KiB) in all"},
	}
	for _, tt := range bad {
		err := tt.c.Validate()
		if !errors.Is(err, teambus.ErrInvalid) || teambus.ExitCode(err) != teambus.ExitPermanent || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("got %v, want exit 2 naming %q", err, tt.want)
		}
		if tt.want != "not valid JSON" && !strings.Contains(err.Error(), "files whose paths the checkpoint names") {
			t.Errorf("%v: no advice", err)
		}
	}
}

// TestCheckpoint_Clip: a checkpoint over every cap is clipped within
// them, keeps the newest done steps and the first remaining ones, and its
// data says what was cut; one within the caps is left alone.
func TestCheckpoint_Clip(t *testing.T) {
	within := teambus.Checkpoint{TasksCompleted: []string{"a"}, Data: json.RawMessage(`{"k":1}`)}
	if notes := within.Clip(); notes != nil || string(within.Data) != `{"k":1}` {
		t.Fatalf("a checkpoint within the caps was clipped: %v %s", notes, within.Data)
	}
	done := items(40, 20_000)
	done[39] = "newest"
	c := teambus.Checkpoint{
		TasksCompleted: done,
		TasksRemaining: append([]string{"first"}, items(3, 10_000)...),
		LastAction:     strings.Repeat("é", 5000),
		Files:          items(20, 1000),
		Data:           json.RawMessage(`{"keep":"me"}`),
	}
	notes := c.Clip()
	if len(notes) == 0 {
		t.Fatal("nothing clipped")
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("clipped checkpoint over the caps: %v", err)
	}
	if c.TasksCompleted[len(c.TasksCompleted)-1] != "newest" {
		t.Errorf("the newest done step was dropped: %v", c.TasksCompleted)
	}
	if len(c.TasksRemaining) == 0 || c.TasksRemaining[0] != "first" {
		t.Errorf("the first remaining step was dropped")
	}
	var data map[string]string
	if err := json.Unmarshal(c.Data, &data); err != nil || data["keep"] != "me" || !strings.Contains(data["clipped"], "was clipped") {
		t.Errorf("data %s: want the old data and the note", c.Data)
	}
	if !strings.HasPrefix(c.LastAction, "é") || len(c.LastAction) > teambus.MaxCheckpointLastAction {
		t.Errorf("last action of %d bytes", len(c.LastAction))
	}
	// Data that is not JSON, or too big, is replaced by the note.
	d := teambus.Checkpoint{Data: json.RawMessage(`[` + strings.Repeat(`1,`, 20_000) + `1]`)}
	d.Clip()
	if err := d.Validate(); err != nil || !strings.Contains(string(d.Data), "dropped") {
		t.Errorf("data %s: %v", d.Data, err)
	}
}

// TestCheckpoint_ClipAllLists: when dropping the done steps is not enough,
// the last remaining steps and files go too; the result is within the caps.
func TestCheckpoint_ClipAllLists(t *testing.T) {
	c := teambus.Checkpoint{TasksCompleted: items(40, 20_000), TasksRemaining: items(30, 10_000), Files: items(300, 1000), Data: json.RawMessage(`7`)}
	if notes := c.Clip(); len(notes) == 0 {
		t.Fatal("nothing clipped")
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(c.Data), "clipped") {
		t.Errorf("data %s: no note", c.Data)
	}
}
