package team_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
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
