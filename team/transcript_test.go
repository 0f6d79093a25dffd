package team_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/transcript"
)

// TestDeleteTeam_Transcripts: deleting a team removes its transcripts.
func TestDeleteTeam_Transcripts(t *testing.T) {
	f := newFixture(t, team.Config{})
	ctx := testCtx(t)
	if _, err := f.svc.CreateTeam(ctx, "tr", "", []team.MemberSpec{{ID: "tm1"}}, testPolicy()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "s1.jsonl")
	if err := os.WriteFile(path, []byte(strings.Repeat(`{"type":"user"}`+"\n", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := transcript.Open(ctx, f.conn.JS, "tr")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Sync(ctx, "tm1", "s1", path); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.DeleteTeam(ctx, "tr", true); err != nil {
		t.Fatal(err)
	}
	if _, err := f.conn.JS.Stream(ctx, transcript.StreamPrefix+"tr"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("transcript stream after the delete: %v", err)
	}
	if _, err := st.Latest(ctx, "tm1"); !errors.Is(err, teambus.ErrNotFound) {
		t.Fatalf("latest after the delete: %v", err)
	}
}

// TestCheckpointTeam_ExportTranscripts: `team checkpoint --export` copies
// every stored transcript byte for byte and lists them.
func TestCheckpointTeam_ExportTranscripts(t *testing.T) {
	f := newFixture(t, team.Config{})
	ctx := testCtx(t)
	if _, err := f.svc.CreateTeam(ctx, "trx", "", []team.MemberSpec{{ID: "tm1"}, {ID: "tm2"}}, testPolicy()); err != nil {
		t.Fatal(err)
	}
	st, err := transcript.Open(ctx, f.conn.JS, "trx")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	for i, id := range []string{"tm2/s9", "tm1/s1"} {
		member, session, _ := strings.Cut(id, "/")
		b := []byte(strings.Repeat(`{"type":"assistant","n":`+string(rune('0'+i))+`}`+"\n", 2000))
		path := filepath.Join(t.TempDir(), session+".jsonl")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Sync(ctx, member, session, path, transcript.WithCwd("/w")); err != nil {
			t.Fatal(err)
		}
		want[id] = b
	}
	dir := t.TempDir()
	exp, err := f.svc.ExportCheckpoint(ctx, "trx", dir)
	if err != nil {
		t.Fatal(err)
	}
	if exp.Transcripts != 2 {
		t.Fatalf("export %+v, want 2 transcripts", exp)
	}
	var list []team.TranscriptEntry
	b, err := os.ReadFile(filepath.Join(dir, team.TranscriptsFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Member != "tm1" || list[1].Member != "tm2" {
		t.Fatalf("transcripts.json %s", b)
	}
	for _, e := range list {
		got, err := os.ReadFile(filepath.Join(dir, e.File))
		if err != nil || !bytes.Equal(got, want[e.Member+"/"+e.Session]) || e.Cwd != "/w" || e.Size != int64(len(got)) {
			t.Fatalf("%s: %v, or not the transcript (%+v)", e.File, err, e)
		}
	}
}

// TestRestoreTranscript: a restore logs transcript.restored, ok with the
// path, or the reason and the fallback to the brief.
func TestRestoreTranscript(t *testing.T) {
	f := newFixture(t, team.Config{})
	ctx := testCtx(t)
	if _, err := f.svc.CreateTeam(ctx, "trr", "", []team.MemberSpec{{ID: "tm1"}}, testPolicy()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.svc.RestoreTranscript(ctx, "trr", "tm1", t.TempDir(), "/w"); !errors.Is(err, transcript.ErrNone) {
		t.Fatalf("restore without a transcript: %v", err)
	}
	path := filepath.Join(t.TempDir(), "s1.jsonl")
	if err := os.WriteFile(path, []byte(strings.Repeat(`{"type":"user"}`+"\n", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := transcript.Open(ctx, f.conn.JS, "trr")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Sync(ctx, "tm1", "s1", path, transcript.WithCwd("/w")); err != nil {
		t.Fatal(err)
	}
	info, out, err := f.svc.RestoreTranscript(ctx, "trr", "tm1", t.TempDir(), "")
	if err != nil || info.SessionID != "s1" || !strings.HasSuffix(out, "/.claude/projects/-w/s1.jsonl") {
		t.Fatalf("restore: %+v %s %v", info, out, err)
	}
	var got []string
	err = f.svc.Events("trr").Replay(ctx, eventlog.EventFilter{Type: eventlog.EvTranscriptRestored}, func(r *eventlog.EventRecord) error {
		var d struct {
			OK       bool   `json:"ok"`
			Reason   string `json:"reason"`
			Fallback string `json:"fallback"`
			Path     string `json:"path"`
		}
		if err := json.Unmarshal(r.Event.Data, &d); err != nil {
			return err
		}
		got = append(got, fmt.Sprintf("%v %s %s %v", d.OK, d.Reason, d.Fallback, d.Path == out))
		return nil
	})
	if err != nil || strings.Join(got, "; ") != "false none brief false; true   true" {
		t.Fatalf("transcript.restored events %q (%v)", got, err)
	}
}
