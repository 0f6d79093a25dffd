package ui

import (
	"context"
	"time"

	"github.com/teambus/teambus/spawn"
)

// SpawnItem is where a member started by `teambus spawn` runs.
type SpawnItem struct {
	Host     string `json:"host,omitempty"`
	Lost     bool   `json:"lost,omitempty"`
	Machine  string `json:"machine,omitempty"`
	Mode     string `json:"mode"`
	From     string `json:"from,omitempty"`
	Respawns int    `json:"respawns"`
}

// spawnItems reads the team's spawn records; nil when there are none or
// they can not be read in a second (the page then shows no hosts).
func (s *Server) spawnItems(teamID string) map[string]SpawnItem {
	ctx, cancel := context.WithTimeout(s.ctx, time.Second)
	defer cancel()
	reg, err := spawn.OpenExisting(ctx, s.cfg.Service.JetStream())
	if err != nil || reg == nil {
		return nil
	}
	recs, err := reg.Records(ctx, teamID)
	if err != nil || len(recs) == 0 {
		return nil
	}
	hosts, _ := reg.Hosts(ctx)
	out := make(map[string]SpawnItem, len(recs))
	for m, r := range recs {
		_, alive := hosts[r.Host]
		out[m] = SpawnItem{Host: r.Host, Lost: r.Host != "" && !alive, Machine: r.Machine, Mode: string(r.Spec.Mode), From: r.From, Respawns: r.Respawns}
	}
	return out
}
