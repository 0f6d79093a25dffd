package teambus

import (
	"encoding/json"
	"time"
)

// Checkpoint is the progress a member recorded for its task: what is done,
// what remains, the last action, the files touched and free-form data. It is
// kept with the task so a fresh agent can continue without redoing work.
type Checkpoint struct {
	Seq            int64           `json:"seq"`
	Member         string          `json:"member"`
	Epoch          int64           `json:"epoch"`
	TasksCompleted []string        `json:"tasks_completed"`
	TasksRemaining []string        `json:"tasks_remaining"`
	LastAction     string          `json:"last_action"`
	Files          []string        `json:"files"`
	Data           json.RawMessage `json:"data,omitempty"`
	Auto           bool            `json:"auto,omitempty"`
	At             time.Time       `json:"at"`
}
