package teambus

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
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

// Caps of a checkpoint's content. A checkpoint travels in every reply that
// shows its task (team show, task show, the brief) and one team holds many
// tasks, so it is a pointer to the work, not the work: big content goes in
// files whose paths the checkpoint names. At 64 KiB a checkpoint, a dozen
// or so fit one answer of the bus's default 1 MiB payload beside the rest
// of a team view; a view with more shows the largest ones clipped.
const (
	// MaxCheckpointLastAction caps the last action (one line of text).
	MaxCheckpointLastAction = 4 << 10
	// MaxCheckpointItem caps each done and remaining step and each file
	// path.
	MaxCheckpointItem = 16 << 10
	// MaxCheckpointData caps the free-form JSON data.
	MaxCheckpointData = 32 << 10
	// MaxCheckpointSize caps the whole content (steps, last action, files
	// and data) as JSON.
	MaxCheckpointSize = 64 << 10
)

// checkpointHint is the advice every cap refusal ends with.
const checkpointHint = "nothing recorded; big content goes in files whose paths the checkpoint names (--file)"

// ValidateCheckpoint checks the content of a checkpoint against the caps:
// the last action, each step done and remaining, each file path, the data
// (valid JSON) and the whole. A refusal (ErrInvalid, exit 2) names the
// field and the cap.
func ValidateCheckpoint(done, remaining []string, lastAction string, files []string, data json.RawMessage) error {
	if len(data) > 0 && !json.Valid(data) {
		return Invalidf("invalid checkpoint data: not valid JSON")
	}
	if n := len(lastAction); n > MaxCheckpointLastAction {
		return Invalidf("checkpoint last_action is %d bytes, at most %d (%s): %s", n, MaxCheckpointLastAction, sizeName(MaxCheckpointLastAction), checkpointHint)
	}
	for _, l := range []struct {
		name  string
		items []string
	}{{"done", done}, {"remaining", remaining}, {"file", files}} {
		for i, s := range l.items {
			if n := len(s); n > MaxCheckpointItem {
				return Invalidf("checkpoint %s item %d is %d bytes, at most %d (%s) each: %s", l.name, i+1, n, MaxCheckpointItem, sizeName(MaxCheckpointItem), checkpointHint)
			}
		}
	}
	if n := len(data); n > MaxCheckpointData {
		return Invalidf("checkpoint data is %d bytes, at most %d (%s): %s", n, MaxCheckpointData, sizeName(MaxCheckpointData), checkpointHint)
	}
	if n := CheckpointSize(done, remaining, lastAction, files, data); n > MaxCheckpointSize {
		return Invalidf("checkpoint is %d bytes as JSON (%d done, %d remaining, %d files, %d bytes of data), at most %d (%s) in all: %s",
			n, len(done), len(remaining), len(files), len(data), MaxCheckpointSize, sizeName(MaxCheckpointSize), checkpointHint)
	}
	return nil
}

// Validate checks c's content against the caps (ValidateCheckpoint).
func (c *Checkpoint) Validate() error {
	return ValidateCheckpoint(c.TasksCompleted, c.TasksRemaining, c.LastAction, c.Files, c.Data)
}

// CheckpointSize is the size of a checkpoint's content as JSON: what
// MaxCheckpointSize caps.
func CheckpointSize(done, remaining []string, lastAction string, files []string, data json.RawMessage) int {
	n := jsonStringLen(lastAction) + len(data)
	for _, l := range [][]string{done, remaining, files} {
		n += 2 // [ ]
		for _, s := range l {
			n += jsonStringLen(s) + 1
		}
	}
	return n
}

// jsonStringLen is the length of s encoded as a JSON string.
func jsonStringLen(s string) int {
	b, _ := json.Marshal(s) // a string always encodes
	return len(b)
}

// Clip fits a checkpoint recorded before the caps (or carried over from
// one) within them, and says what it changed (nil when it fitted): too
// long text is cut, data that does not fit or is not JSON is dropped, and
// while the whole is too big the oldest done steps go first, then the
// last remaining steps, then the last files. When it changed anything the
// data says so (key "clipped", ClipNote).
func (c *Checkpoint) Clip() []string {
	var notes []string
	if n := len(c.LastAction); n > MaxCheckpointLastAction {
		c.LastAction = clipUTF8(c.LastAction, MaxCheckpointLastAction)
		notes = append(notes, fmt.Sprintf("last_action cut from %d bytes", n))
	}
	clipItems := func(name string, items []string) []string {
		cut := 0
		out := items
		for i, s := range items {
			if len(s) > MaxCheckpointItem {
				if cut == 0 {
					out = append([]string(nil), items...)
				}
				out[i] = clipUTF8(s, MaxCheckpointItem)
				cut++
			}
		}
		if cut > 0 {
			notes = append(notes, fmt.Sprintf("%d %s items cut to %d bytes", cut, name, MaxCheckpointItem))
		}
		return out
	}
	c.TasksCompleted = clipItems("done", c.TasksCompleted)
	c.TasksRemaining = clipItems("remaining", c.TasksRemaining)
	c.Files = clipItems("file", c.Files)
	if n := len(c.Data); n > MaxCheckpointData || n > 0 && !json.Valid(c.Data) {
		c.Data = nil
		notes = append(notes, fmt.Sprintf("data (%d bytes) dropped", n))
	}
	size := CheckpointSize(c.TasksCompleted, c.TasksRemaining, c.LastAction, c.Files, c.Data)
	if size <= MaxCheckpointSize && len(notes) == 0 {
		return nil
	}
	// Room for the note in the data.
	limit := MaxCheckpointSize - clipNoteRoom
	drop := func(name string, l []string, oldest bool) []string {
		k := 0
		for len(l) > 0 && size > limit {
			i := len(l) - 1
			if oldest {
				i = 0
			}
			size -= jsonStringLen(l[i]) + 1
			if oldest {
				l = l[1:]
			} else {
				l = l[:i]
			}
			k++
		}
		if k > 0 {
			notes = append(notes, fmt.Sprintf("%d %s items dropped", k, name))
		}
		return l
	}
	c.TasksCompleted = drop("done", c.TasksCompleted, true)
	c.TasksRemaining = drop("remaining", c.TasksRemaining, false)
	c.Files = drop("file", c.Files, false)
	c.Data = clipData(c.Data, ClipNote(notes))
	return notes
}

// clipNoteRoom is the room Clip keeps for its note in the data.
const clipNoteRoom = 2 << 10

// ClipNote is the one line a clipped checkpoint carries in its data (key
// "clipped") to say what was cut.
func ClipNote(notes []string) string {
	return fmt.Sprintf("a checkpoint over the caps (%s each step or file, %s data, %s in all) was clipped: %s",
		sizeName(MaxCheckpointItem), sizeName(MaxCheckpointData), sizeName(MaxCheckpointSize), strings.Join(notes, "; "))
}

// clipData adds note to data, a JSON object (key "clipped"); data that is
// not an object, or that the note would push over the cap or out of the
// room Clip kept, is replaced by the note alone.
func clipData(data json.RawMessage, note string) json.RawMessage {
	note = clipUTF8(note, clipNoteRoom/2)
	alone, _ := json.Marshal(map[string]string{"clipped": note}) // a map of strings always encodes
	obj := map[string]json.RawMessage{}
	if len(data) == 0 || json.Unmarshal(data, &obj) != nil || obj == nil {
		return alone
	}
	obj["clipped"], _ = json.Marshal(note) // a string always encodes
	b, err := json.Marshal(obj)
	if err != nil || len(b) > MaxCheckpointData || len(b) > len(data)+len(alone) {
		return alone
	}
	return b
}

// clipUTF8 cuts s to at most n bytes on a character boundary.
func clipUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// sizeName names a size in KiB or MiB.
func sizeName(n int) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}
