//go:build !teambus_client

package main

import (
	"context"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/teambus/teambus/agent/binding"
	"github.com/teambus/teambus/agent/mcpserver"
)

// TestMCP_IdentityFromTheHookBinding: `teambus mcp` started by a Claude
// process without TEAMBUS_* in its environment takes the identity of the
// process's hook binding at each tool call — also a binding written after
// the server started — and a binding of another member than the flags
// name is not used.
func TestMCP_IdentityFromTheHookBinding(t *testing.T) {
	t.Parallel()
	claude := exec.Command("sleep", "600")
	if err := claude.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = claude.Process.Kill(); _ = claude.Wait() })
	pid := claude.Process.Pid
	dir := t.TempDir()
	env := map[string]string{"CLAUDE_PID": strconv.Itoa(pid)}
	getenv := func(k string) string { return env[k] }
	ctx := context.Background()

	resolve := bindingIdentity(dir, mcpserver.Identity{Team: "alpha", Member: "tm1"}, getenv)
	other := bindingIdentity(dir, mcpserver.Identity{Team: "alpha", Member: "tm2"}, getenv)
	none := bindingIdentity(dir, mcpserver.Identity{}, getenv)
	if id, err := resolve(ctx); err != nil || id != (mcpserver.Identity{Team: "alpha", Member: "tm1"}) {
		t.Fatalf("before the binding: %+v %v", id, err)
	}
	start, err := binding.StartTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	b := &binding.Binding{Team: "alpha", Member: "tm1", Role: binding.RoleTeammate, Session: "cc-s1-p" + strconv.Itoa(pid), Epoch: 1,
		ClaudePID: pid, ClaudeStart: start, BoundAt: time.Now(), Notices: map[string]string{}, Recent: []uint64{}}
	if err := binding.Save(dir, b); err != nil {
		t.Fatal(err)
	}
	want := mcpserver.Identity{Team: "alpha", Member: "tm1", Session: b.Session}
	if id, err := resolve(ctx); err != nil || id != want {
		t.Fatalf("baked alpha/tm1, bound: %+v %v, want %+v", id, err, want)
	}
	if id, err := none(ctx); err != nil || id != want {
		t.Fatalf("nothing baked, bound: %+v %v, want %+v", id, err, want)
	}
	if id, err := other(ctx); err != nil || id != (mcpserver.Identity{Team: "alpha", Member: "tm2"}) {
		t.Fatalf("baked tm2, bound as tm1: %+v %v", id, err)
	}
}
