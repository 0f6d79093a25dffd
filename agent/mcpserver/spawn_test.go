package mcpserver_test

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/teambus/teambus/agent/mcpserver"
	"github.com/teambus/teambus/spawn"
)

// stdSpawner runs member_spawn through the real spawn package on this
// machine, with a stand-in agent (sleep) in place of Claude Code.
type stdSpawner struct {
	sp  *spawn.Spawner
	cwd string
	pid []int
}

func (s *stdSpawner) SpawnMember(ctx context.Context, teamID string, in mcpserver.MemberSpawnIn) (mcpserver.MemberSpawnOut, error) {
	req := spawn.Request{Spec: spawn.Spec{Team: teamID, Member: in.Member, Cwd: s.cwd, Mode: spawn.Headless, Agent: "sleep 30", NoSidecar: true}, Force: in.Force}
	res, st, err := s.sp.Spawn(ctx, req)
	if err != nil {
		return mcpserver.MemberSpawnOut{}, err
	}
	s.pid = append(s.pid, st.PID)
	go func() { _ = st.Wait() }()
	return mcpserver.MemberSpawnOut{Member: res.Member, Machine: res.Machine, Mode: string(res.Mode), PID: res.PID, From: res.From}, nil
}

func tools(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(testCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tl := range res.Tools {
		out = append(out, tl.Name)
	}
	return out
}

// member_spawn is the lead's: listed for the lead when a spawner is
// configured, refused while the member runs, run with force.
func TestMemberSpawn_Lead(t *testing.T) {
	f := newFixture(t, 1)
	reg, err := spawn.Open(testCtx(t), f.conn.JS)
	if err != nil {
		t.Fatal(err)
	}
	sp := &stdSpawner{sp: &spawn.Spawner{Reg: reg, Svc: f.svc, Launcher: &spawn.Launcher{Dir: t.TempDir(), Bin: "/bin/true"}}, cwd: t.TempDir()}
	t.Cleanup(func() {
		for _, p := range sp.pid {
			if pr, err := os.FindProcess(p); err == nil {
				_ = pr.Kill()
			}
		}
	})
	lead := mcpserver.Identity{Team: "alpha", Member: "lead", Session: "s-lead"}
	cs := connect(t, f.server(mcpserver.Config{Resolve: mcpserver.StaticIdentity(lead), Spawner: sp}), nil, nil)
	if !slices.Contains(tools(t, cs), "member_spawn") {
		t.Fatalf("lead tools %v lack member_spawn", tools(t, cs))
	}
	fails(t, cs, "member_spawn", map[string]any{"member": "tm1"}, "[conflict]", "tm1 runs")
	var out mcpserver.MemberSpawnOut
	ok(t, cs, "member_spawn", map[string]any{"member": "tm1", "force": true}, &out)
	if out.Member != "tm1" || out.PID == 0 || out.From != spawn.FromPrompt {
		t.Errorf("member_spawn result %+v", out)
	}
	if rec, _, err := reg.Record(testCtx(t), "alpha", "tm1"); err != nil || rec.PID != out.PID {
		t.Errorf("spawn record %+v %v", rec, err)
	}

	// A teammate never sees it; a lead without a spawner neither.
	tm := connect(t, f.server(mcpserver.Config{Resolve: mcpserver.StaticIdentity(member("tm1")), Spawner: sp}), nil, nil)
	if slices.Contains(tools(t, tm), "member_spawn") {
		t.Error("a teammate is offered member_spawn")
	}
	plain := f.client(lead)
	if slices.Contains(tools(t, plain), "member_spawn") {
		t.Error("member_spawn offered without a spawner")
	}
}
