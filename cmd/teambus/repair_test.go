package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/node/nodetest"
)

// Issue 12 item 8: garbage in a task key does not take the team down.
// `team show` lists it and works, `task list` and a claim of another task
// work, a claim of the damaged task exits 2 with the repair hint, `team
// repair` shows its plan and with --apply restores the last good
// revision; a key without one is deleted and logged; a second repair
// does nothing.
func TestTeamRepair_DamagedTask(t *testing.T) {
	t.Parallel()
	n := nodetest.NewServer(t)
	dir := []string{"--dir", n.Dir()}
	cli := func(args ...string) string { t.Helper(); return evOK(t, append(args, dir...)...) }
	cli("team", "create", "fix", "--member", "tm1", "--member", "tm2")
	for _, id := range []string{"t1", "t2"} {
		cli("task", "add", id, "--team", "fix", "--desc", "work on "+id)
	}
	b, err := nodetest.Connect(t, n).JS.KeyValue(t.Context(), kv.StatePrefix+"fix")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(t.Context(), "task.t2", []byte("\x1b[31m{garbage")); err != nil {
		t.Fatal(err)
	}

	out := cli("team", "show", "fix")
	if !strings.Contains(out, "1 damaged record(s)") || !strings.Contains(out, "task.t2") || !strings.Contains(out, "teambus team repair fix") {
		t.Errorf("team show does not list the damaged record:\n%s", out)
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("team show printed an escape from the damaged record:\n%q", out)
	}
	var v struct {
		Damaged []kv.DamagedRecord `json:"damaged"`
		Tasks   []struct{ ID string }
	}
	if err := json.Unmarshal([]byte(cli("team", "show", "fix", "--json")), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Damaged) != 1 || v.Damaged[0].Key != "task.t2" || v.Damaged[0].Revision == 0 || v.Damaged[0].Reason == "" || len(v.Tasks) != 1 {
		t.Errorf("team show --json: damaged %+v, tasks %+v", v.Damaged, v.Tasks)
	}
	if out := cli("task", "list", "--team", "fix"); !strings.Contains(out, "t1") {
		t.Errorf("task list:\n%s", out)
	}
	cli("task", "claim", "t1", "--team", "fix", "--member", "tm1")
	runCLI(t, append([]string{"task", "claim", "t2", "--team", "fix", "--member", "tm2"}, dir...)...).wantError(t, 2, "task t2 of team fix is damaged", "teambus team repair fix")

	out = cli("team", "repair", "fix")
	if !strings.Contains(out, "task.t2 (revision") || !strings.Contains(out, "would restore revision") || !strings.Contains(out, "dry run, nothing changed") {
		t.Errorf("repair plan:\n%s", out)
	}
	out = cli("team", "repair", "fix", "--apply")
	if !strings.Contains(out, "restored revision") || !strings.Contains(out, "repaired 1 record(s)") {
		t.Errorf("repair --apply:\n%s", out)
	}
	if out := cli("task", "claim", "t2", "--team", "fix", "--member", "tm2"); !strings.Contains(out, "t2") {
		t.Errorf("claim of the restored task:\n%s", out)
	}

	// No good revision: deleted, and logged.
	if _, err := b.Put(t.Context(), "task.t9", []byte("junk")); err != nil {
		t.Fatal(err)
	}
	if out := cli("team", "repair", "fix", "--apply", "--json"); !strings.Contains(out, `"action": "delete"`) || !strings.Contains(out, `"applied": true`) {
		t.Errorf("repair --apply --json:\n%s", out)
	}
	if _, err := b.Get(t.Context(), "task.t9"); err == nil {
		t.Errorf("task.t9 still there after repair")
	}
	out = cli("events", "replay", "--team", "fix", "--type", "state.repaired")
	if strings.Count(out, "state.repaired") != 2 || !strings.Contains(out, "task.t9") {
		t.Errorf("events of the repairs:\n%s", out)
	}
	if out := cli("team", "repair", "fix", "--apply"); out != "team fix: no damaged records, nothing to do\n" {
		t.Errorf("second repair: %q", out)
	}
	if out := cli("events", "replay", "--team", "fix", "--type", "state.repaired"); strings.Count(out, "state.repaired") != 2 {
		t.Errorf("a repair with nothing to do logged:\n%s", out)
	}

	// Only the operator repairs.
	creds := filepath.Join(t.TempDir(), "tm1.creds")
	cli("team", "creds", "fix", "--member", "tm1", "--out", creds)
	runCLI(t, append([]string{"team", "repair", "fix", "--creds", creds}, dir...)...).wantError(t, 2, "operator")
}

// Issue 12 item 8: a damaged team record is fatal for that team only,
// with the hint; `team list` shows it as damaged; repair restores it.
func TestTeamRepair_DamagedTeamRecord(t *testing.T) {
	t.Parallel()
	n := nodetest.NewServer(t)
	dir := []string{"--dir", n.Dir()}
	cli := func(args ...string) string { t.Helper(); return evOK(t, append(args, dir...)...) }
	cli("team", "create", "bad", "--member", "tm1")
	cli("team", "create", "good", "--member", "tm1")
	b, err := nodetest.Connect(t, n).JS.KeyValue(t.Context(), kv.StatePrefix+"bad")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(t.Context(), "team", []byte(`{"id":"other","status":"active"}`)); err != nil {
		t.Fatal(err)
	}
	runCLI(t, append([]string{"team", "show", "bad"}, dir...)...).wantError(t, 2, "record of team bad is damaged", "teambus team repair bad")
	runCLI(t, append([]string{"task", "add", "x", "--team", "bad"}, dir...)...).wantError(t, 2, "teambus team repair bad")
	cli("team", "show", "good")
	cli("task", "add", "x", "--team", "good")
	out := cli("team", "list")
	if !strings.Contains(out, "bad ") || !strings.Contains(out, "damaged") || !strings.Contains(out, "good ") {
		t.Errorf("team list:\n%s", out)
	}
	if out := cli("team", "repair", "bad", "--apply"); !strings.Contains(out, "team (revision") || !strings.Contains(out, "restored revision") {
		t.Errorf("repair of the team record:\n%s", out)
	}
	if out := cli("team", "show", "bad"); !strings.HasPrefix(out, "team bad: pending") {
		t.Errorf("team show after repair:\n%s", out)
	}
}
