package teambus_test

import (
	"strings"
	"testing"

	"github.com/teambus/teambus"
)

// The crash notice says "with its checkpoint" only of tasks that have
// one, and says each thing once.
func TestCrashNotice_Checkpoint(t *testing.T) {
	cases := []struct {
		name string
		res  teambus.CrashResult
		want string
		not  string
	}{
		{"with", teambus.CrashResult{Counted: true, Crashes: 1, Tasks: []string{"engine"}, Checkpointed: []string{"engine"}},
			"task engine back in the queue with its checkpoint;", "without"},
		{"without", teambus.CrashResult{Counted: true, Crashes: 1, Tasks: []string{"engine"}},
			"task engine back in the queue, without a checkpoint: it starts over;", "with its checkpoint"},
		{"no task", teambus.CrashResult{Counted: true, Crashes: 1},
			"crash 1: it held no task;", "queue"},
		{"mixed", teambus.CrashResult{Counted: true, Crashes: 2, Tasks: []string{"a", "b"}, Checkpointed: []string{"b"}},
			"tasks a, b back in the queue; b with a checkpoint, a without one (starts over);", "its checkpoint"},
		{"all with", teambus.CrashResult{Counted: true, Crashes: 2, Tasks: []string{"a", "b"}, Checkpointed: []string{"a", "b"}},
			"tasks a, b back in the queue with their checkpoints;", "without"},
		{"paused, no task", teambus.CrashResult{Counted: true, Paused: true, Crashes: 4},
			"past the crash limit, the member is paused;", "none"},
		{"paused", teambus.CrashResult{Counted: true, Paused: true, Crashes: 4, Tasks: []string{"engine"}},
			"past the crash limit, task engine and the member are paused;", "queue"},
	}
	for _, c := range cases {
		got := teambus.CrashNotice("alpha", "tm1", "pid exited", c.res)
		if !strings.Contains(got, c.want) || strings.Contains(got, c.not) {
			t.Errorf("%s: %q\nwant it to contain %q and not %q", c.name, got, c.want, c.not)
		}
	}
}
