package hook

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/transcript"
)

// TestHooks_TranscriptSync: a bound session's PostToolBatch, Stop and
// SessionEnd hooks carry its transcript into the bus, each sending only
// what was appended; only SessionEnd logs transcript.synced; a restore
// gives the file back byte for byte.
func TestHooks_TranscriptSync(t *testing.T) {
	r := newRig(t)
	r.env["TEAMBUS_NO_SIDECAR"] = "1"
	r.bind()
	path := filepath.Join(t.TempDir(), r.session+".jsonl")
	appendLines := func(n int) {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for i := 0; i < n; i++ {
			f.WriteString(`{"type":"assistant","message":{"content":"` + strings.Repeat("x", 200) + `"}}` + "\n")
		}
	}
	ctx := context.Background()
	conn := r.connect()
	st, err := transcript.Open(ctx, conn.JS, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	cwd := t.TempDir()
	var size int64
	for _, ev := range []struct{ event, fixture string }{
		{"PostToolBatch", "PostToolBatch.real-2.1.330.json"},
		{"Stop", "Stop.real-2.1.330.json"},
		{"SessionEnd", "SessionEnd.real-2.1.330.json"},
	} {
		appendLines(50)
		res := r.hook(ev.event, ev.fixture, map[string]any{"transcript_path": path, "cwd": cwd})
		if res.code != 0 || res.stderr != "" {
			t.Fatalf("%s: code %d stderr %q", ev.event, res.code, res.stderr)
		}
		fi, _ := os.Stat(path)
		info, err := st.Latest(ctx, "tm1")
		if err != nil || info.Size != fi.Size() || info.SessionID != r.session || info.Cwd != cwd {
			t.Fatalf("after %s: latest %+v (%v), want %d bytes of session %s in %s\nlog:\n%s", ev.event, info, err, fi.Size(), r.session, cwd, r.hookLog())
		}
		rec := r.lastRecord()
		if rec.Transcript == nil || rec.Transcript.Sent != fi.Size()-size || rec.Transcript.Error != "" {
			t.Fatalf("after %s: hooks.log transcript %+v, want %d bytes sent", ev.event, rec.Transcript, fi.Size()-size)
		}
		size = fi.Size()
	}
	var synced []string
	err = r.svc.Events("alpha").Replay(ctx, eventlog.EventFilter{Type: eventlog.EvTranscriptSynced}, func(e *eventlog.EventRecord) error {
		var d struct{ Via string }
		_ = json.Unmarshal(e.Event.Data, &d)
		synced = append(synced, d.Via)
		return nil
	})
	if err != nil || strings.Join(synced, ",") != "SessionEnd" {
		t.Fatalf("transcript.synced events via %v (%v), want one, at SessionEnd", synced, err)
	}
	home := t.TempDir()
	_, out, err := st.Restore(ctx, "tm1", home, "")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(out)
	want, _ := os.ReadFile(path)
	if !bytes.Equal(got, want) {
		t.Fatal("restored transcript differs")
	}
}

// TestHooks_TranscriptMissing: a transcript path that does not exist yet
// is a note in hooks.log; the hook's own work is unchanged.
func TestHooks_TranscriptMissing(t *testing.T) {
	r := newRig(t)
	r.env["TEAMBUS_NO_SIDECAR"] = "1"
	r.bind()
	res := r.hook("PostToolBatch", "PostToolBatch.real-2.1.330.json", map[string]any{"transcript_path": filepath.Join(t.TempDir(), "none.jsonl")})
	if res.code != 0 || res.stderr != "" || res.stdout != "" {
		t.Fatalf("code %d stdout %q stderr %q", res.code, res.stdout, res.stderr)
	}
	rec := r.lastRecord()
	if rec.Outcome != "ok" || rec.Transcript == nil || !strings.Contains(rec.Transcript.Error, "no such file") {
		t.Fatalf("hooks.log %+v transcript %+v", rec, rec.Transcript)
	}
}

// lastRecord is the last line of hooks.log.
func (r *rig) lastRecord() record {
	r.t.Helper()
	lines := strings.Split(strings.TrimSpace(r.hookLog()), "\n")
	var rec record
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rec); err != nil {
		r.t.Fatal(err)
	}
	return rec
}

// connect is an operator connection to the rig's node.
func (r *rig) connect() *bus.Conn {
	r.t.Helper()
	ctx := context.Background()
	c, err := bus.Connect(ctx, bus.ConnectConfig{Dir: r.node.Dir()})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(c.Close)
	return c
}
