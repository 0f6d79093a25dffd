package team_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// TestCheckpoint_AutoClipsNeverRefuses: the sidecar's automatic
// checkpoint of 10,000 changed files (1 MB of paths) is recorded clipped
// within the caps; so is one that carries over a checkpoint stored before
// the caps (700 KB). The data says what was cut.
func TestCheckpoint_AutoClipsNeverRefuses(t *testing.T) {
	f := newFixture(t, team.Config{})
	ctx := testCtx(t)
	f.create(t, "cp", "", testPolicy(), "tm1")
	f.addTask(t, "cp", "t1", 0)
	tm1 := actorOf("cp", "tm1")
	if _, err := f.svc.Claim(ctx, tm1, "t1"); err != nil {
		t.Fatal(err)
	}
	files := make([]string, 10_000)
	for i := range files {
		files[i] = "src/" + strings.Repeat("f", 90) + ".go"
	}
	if err := f.svc.SidecarAPI().AutoCheckpoint(ctx, "cp", "tm1", "s-tm1", files, "edited"); err != nil {
		t.Fatalf("automatic checkpoint of 10,000 files: %v", err)
	}
	cp := f.task(t, "cp", "t1").Checkpoint
	if err := cp.Validate(); err != nil || len(cp.Files) == 0 || len(cp.Files) == len(files) || !strings.Contains(string(cp.Data), "file items dropped") {
		t.Fatalf("auto checkpoint: %d files, data %s, %v; want clipped within the caps and saying so", len(cp.Files), cp.Data, err)
	}

	// A checkpoint stored before the caps, carried over by the next one.
	store := kv.New(f.conn.JS, kv.Config{})
	tk, rev, err := store.Task(ctx, "cp", "t1")
	if err != nil {
		t.Fatal(err)
	}
	big := make([]string, 50)
	for i := range big {
		big[i] = strings.Repeat("s", 14_000)
	}
	tk.Checkpoint.TasksCompleted, tk.Checkpoint.Files, tk.Checkpoint.Data = big, []string{"a.go"}, json.RawMessage(`{"k":"v"}`)
	if _, err := store.PutTask(ctx, "cp", tk, rev); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.SidecarAPI().AutoCheckpoint(ctx, "cp", "tm1", "s-tm1", []string{"b.go"}, "more"); err != nil {
		t.Fatalf("automatic checkpoint over an old 700 KB one: %v", err)
	}
	cp = f.task(t, "cp", "t1").Checkpoint
	if err := cp.Validate(); err != nil || !strings.Contains(string(cp.Data), "done items dropped") || !strings.Contains(string(cp.Data), `"k":"v"`) {
		t.Fatalf("carried checkpoint: %d done, data %s, %v", len(cp.TasksCompleted), cp.Data, err)
	}
	// An agent's own checkpoint past the caps is refused.
	if _, err := f.svc.Checkpoint(ctx, teamapi.CheckpointRequest{Actor: tm1, Done: big}); teambus.ExitCode(err) != teambus.ExitPermanent {
		t.Fatalf("700 KB checkpoint: %v, want exit 2", err)
	}
}
