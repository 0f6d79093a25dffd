package ui_test

import (
	"testing"

	"github.com/teambus/teambus/spawn"
	"github.com/teambus/teambus/ui"
)

// The team page names the host of each member started by teambus spawn,
// and what its last start came from.
func TestServer_TeamSpawns(t *testing.T) {
	f := newFixture(t, ui.Config{})
	c := f.client(t)
	var page struct {
		Spawns map[string]ui.SpawnItem `json:"spawns"`
	}
	getJSON(t, c, f.http.URL+"/api/teams/alpha", &page)
	if len(page.Spawns) != 0 {
		t.Errorf("spawns before any spawn: %v", page.Spawns)
	}
	reg, err := spawn.Open(testCtx(t), f.svc.Store().JetStream())
	if err != nil {
		t.Fatal(err)
	}
	sp := &spawn.Spawner{Reg: reg, Svc: f.svc, Host: "h1", Launcher: &spawn.Launcher{Dir: t.TempDir(), Bin: "/bin/true"}}
	_, st, err := sp.Spawn(testCtx(t), spawn.Request{Spec: spawn.Spec{Team: "alpha", Member: "tm1", Cwd: t.TempDir(), Mode: spawn.Headless, Agent: "true", NoSidecar: true}})
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Wait()
	getJSON(t, c, f.http.URL+"/api/teams/alpha", &page)
	got := page.Spawns["tm1"]
	if got.Host != "h1" || !got.Lost || got.Mode != "headless" || got.From != spawn.FromPrompt {
		t.Errorf("spawn of tm1 on the page: %+v (host h1 never registered: lost)", got)
	}
}
