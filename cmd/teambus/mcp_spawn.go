//go:build !teambus_client

package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/agent/mcpserver"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/spawn"
	"github.com/teambus/teambus/team"
)

// mcpSpawner is the lead's member_spawn tool on the operator's connection:
// a spawn on host On, else on the member's last host if alive, else on
// this machine (as `teambus spawn` does). A member credential has no
// JetStream: no tool then.
type mcpSpawner struct {
	conn     *bus.Conn
	svc      *team.Service
	launcher *spawn.Launcher
	log      *slog.Logger
}

// newMCPSpawner returns the spawner of `teambus mcp`, or nil when the
// connection is a member's.
func newMCPSpawner(c *cli.Context, conn *bus.Conn, svc *team.Service, log *slog.Logger) mcpserver.MemberSpawner {
	if _, _, ok := conn.MemberOf(); ok {
		return nil
	}
	l, err := launcher(c)
	if err != nil {
		log.Warn("member_spawn not offered", "err", err)
		return nil
	}
	l.Log = log
	return &mcpSpawner{conn: conn, svc: svc, launcher: l, log: log}
}

func (m *mcpSpawner) SpawnMember(ctx context.Context, teamID string, in mcpserver.MemberSpawnIn) (mcpserver.MemberSpawnOut, error) {
	cwd := in.Cwd
	if cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return mcpserver.MemberSpawnOut{}, teambus.Invalidf("no cwd given and no working directory: %v", err)
		}
		cwd = wd
	}
	cwd = filepath.Clean(cwd)
	mode := spawn.Headless
	if in.Tmux {
		mode = spawn.Tmux
	}
	req := spawn.Request{Spec: spawn.Spec{Team: teamID, Member: in.Member, Cwd: cwd, Mode: mode, Prompt: in.Prompt, Args: in.Args}, Force: in.Force, Fresh: in.Fresh}
	if err := req.Spec.Validate(); err != nil {
		return mcpserver.MemberSpawnOut{}, err
	}
	reg, err := spawn.Open(ctx, m.conn.JS)
	if err != nil {
		return mcpserver.MemberSpawnOut{}, err
	}
	on := in.On
	if on == "" {
		if rec, _, err := reg.Record(ctx, teamID, in.Member); err == nil && rec.Host != "" && reg.Alive(ctx, rec.Host) {
			on = rec.Host
		}
	}
	var res *spawn.Result
	if on != "" {
		res, err = spawn.RemoteSpawn(ctx, m.conn.NC, on, req)
	} else {
		sp := &spawn.Spawner{Reg: reg, Svc: m.svc, Launcher: m.launcher, Transcripts: spawn.BusTranscripts{Svc: m.svc}, Log: m.log}
		var st spawn.Started
		res, st, err = sp.Spawn(ctx, req)
		if err == nil {
			if st.Wait != nil {
				go func() { _ = st.Wait() }() // this server lives on: reap the session when it ends
			}
			if res.Reclaim != "" {
				go func() {
					rctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					defer cancel()
					if _, err := sp.Reclaim(rctx, teamID, in.Member, res.Epoch, res.Reclaim); err != nil {
						m.log.Warn("reclaim", "member", in.Member, "task", res.Reclaim, "err", err)
					}
				}()
			}
		}
	}
	if err != nil {
		return mcpserver.MemberSpawnOut{}, err
	}
	return mcpserver.MemberSpawnOut{Member: res.Member, Host: res.Host, Machine: res.Machine, Mode: string(res.Mode), PID: res.PID,
		From: res.From, Session: res.Session, Note: res.Note, Reclaim: res.Reclaim}, nil
}
