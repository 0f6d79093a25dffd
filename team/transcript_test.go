package team_test

import (
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
