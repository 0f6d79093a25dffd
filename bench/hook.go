package bench

import (
	"bufio"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/agent/binding"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/node/credstore"
	"github.com/teambus/teambus/team"
)

// Row keys of the hook section.
const (
	keyHookPeer  = "peer.jsonl.once.hook"
	keyHookStart = "ref.start.hook"
	keyHookEmpty = "hook.posttoolbatch.empty"
	// keyHookCreds is the same hook of a session that holds only its
	// member credential: through the team service.
	keyHookCreds  = "hook.posttoolbatch.empty.creds"
	keyHookSStart = "hook.sessionstart"
)

// payloads are hook payloads captured from Claude Code 2.1.330 (the same
// as agent/hook/testdata/payloads).
//
//go:embed payloads/*.json
var payloads embed.FS

// hookPayload is the captured payload of an event with the session id and
// working directory of a stand-in session.
func hookPayload(event, session, cwd string) ([]byte, error) {
	raw, err := payloads.ReadFile("payloads/" + event + ".real-2.1.330.json")
	if err != nil {
		return nil, err
	}
	var p map[string]any
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("payload of %s: %w", event, err)
	}
	p["session_id"], p["cwd"] = session, cwd
	return json.Marshal(p)
}

// claudeSession returns a Claude session id (a UUID) for stand-in n.
func claudeSession(n int) string {
	return fmt.Sprintf("7e1b2c3d-0000-4000-8000-%012x", n)
}

// hookSession is a stand-in Claude session: a process (sleep) whose pid the
// hooks bind to, as they bind to the claude process that runs them.
type hookSession struct {
	agent   *child
	member  string
	session string // Claude's session id, in the payloads
	env     []string
}

// newHookSession starts the stand-in process of member n and returns it
// with the environment a hook of that session gets: the identity
// (TEAMBUS_TEAM, TEAMBUS_MEMBER, TEAMBUS_SESSION), the state directory and
// CLAUDE_PID.
func (r *run) newHookSession(teamID, member, stateDir string, n int, extra ...string) (*hookSession, error) {
	agent, err := start(r.logs, fmt.Sprintf("claude-%s-%d", member, n), "sleep", "3600")
	if err != nil {
		return nil, err
	}
	return &hookSession{agent: agent, member: member, session: claudeSession(n), env: append([]string{
		"TEAMBUS_DIR=" + stateDir, "TEAMBUS_TEAM=" + teamID, "TEAMBUS_MEMBER=" + member,
		fmt.Sprintf("TEAMBUS_SESSION=cc-bench-%s-%d", member, n), fmt.Sprintf("CLAUDE_PID=%d", agent.pid()),
	}, extra...)}, nil
}

// hooks times `teambus hook` processes as Claude Code runs them: the
// teambus binary with a captured payload on stdin and the session's
// identity in its environment, against a node of this process with sync
// always. PostToolBatch of a bound member with an empty inbox runs
// interleaved with the standalone JSONL peer and a bare start-up of the
// binary; SessionStart (binding, registration, sidecar spawn, brief) runs
// after them, one new session each, its sidecar killed after each run.
func (r *run) hooks(ctx context.Context) error {
	const teamID = "hook"
	// One member per SessionStart run (and its warm-up), so every run
	// registers a member that has no session yet, as a new session does.
	specs := []team.MemberSpec{{ID: "tm1"}, {ID: "tm2"}}
	for i := 0; i <= r.cfg.SessionStartRuns; i++ {
		specs = append(specs, team.MemberSpec{ID: fmt.Sprintf("s%d", i)})
	}
	node, stop, err := r.hookTeam(ctx, "node-hook", teamID, specs)
	if err != nil {
		return err
	}
	defer stop()
	state, exe, cwd := node.Dir(), r.cfg.Exe, r.dir

	// tm1 is bound once (untimed), without a sidecar: nothing but the
	// hooks under test talks to the node.
	tm1, err := r.boundSession(ctx, teamID, "tm1", state, exe, cwd)
	if err != nil {
		return err
	}
	defer tm1.agent.kill()
	ptb, err := hookPayload("PostToolBatch", tm1.session, cwd)
	if err != nil {
		return err
	}
	// tm2 holds only its member credential, and its state directory is
	// not the node's: its hooks reach the bus through the team service.
	credsState := filepath.Join(r.dir, "state-creds")
	if err := mkdir(credsState); err != nil {
		return err
	}
	creds, err := r.memberCreds(ctx, node, teamID, "tm2")
	if err != nil {
		return err
	}
	tm2, err := r.boundSession(ctx, teamID, "tm2", credsState, exe, cwd, "TEAMBUS_CREDS="+creds)
	if err != nil {
		return err
	}
	defer tm2.agent.kill()
	ptb2, err := hookPayload("PostToolBatch", tm2.session, cwd)
	if err != nil {
		return err
	}
	kinds := []procKind{
		{key: keyHookStart, group: "ref", name: "one-shot process start-up only (teambus version), beside the hooks", exe: exe, args: []string{"version"}},
		{key: keyHookEmpty, group: "hook", name: "`teambus hook PostToolBatch`, bound member, nothing to deliver (process, connect, notices, lease)", exe: exe,
			args: []string{"hook", "PostToolBatch"}, env: tm1.env, stdin: ptb,
			note: "the teambus binary as Claude Code runs it: payload on stdin, identity in the environment, bus over loopback TCP; wall time from fork to exit; the member was bound without a sidecar, so nothing else talks to the node"},
		{key: keyHookCreds, group: "hook", name: "`teambus hook PostToolBatch` as above, on the member's credential alone (through the team service)", exe: exe,
			args: []string{"hook", "PostToolBatch"}, env: tm2.env, stdin: ptb2,
			note: "TEAMBUS_CREDS names the member's credential; the state directory is not the node's, so no token is at hand; status and the inbox lease are team service requests"},
	}
	if peer, err := r.peerKind(ctx, keyHookPeer, "hook.jsonl"); err != nil {
		r.skippedRow("peer", keyHookPeer, peerName+", beside the hooks", err)
	} else {
		peer.name += ", beside the hooks"
		kinds = append(kinds, peer)
	}
	if err := r.timeKinds(ctx, r.cfg.HookRuns, kinds); err != nil {
		return err
	}
	if err := hookOutcomes(state, "PostToolBatch", "ok"); err != nil {
		return err
	}
	if err := hookOutcomes(credsState, "PostToolBatch", "ok"); err != nil {
		return fmt.Errorf("on the member credential: %w", err)
	}

	// SessionStart: a new stand-in session per run, set up untimed.
	var cur *hookSession
	n := 0
	defer func() {
		if cur != nil {
			cur.agent.kill()
		}
	}()
	ss := procKind{key: keyHookSStart, group: "hook", name: "`teambus hook SessionStart` of a new session (bind, register the member, spawn its sidecar, brief, mail)", exe: exe,
		args: []string{"hook", "SessionStart"},
		note: "each run a new session of a new member: binding written, member joined, `teambus teammate --adopt` spawned; the sidecar is killed after the run",
		setup: func(ctx context.Context) ([]string, []byte, error) {
			n++
			s, err := r.newHookSession(teamID, fmt.Sprintf("s%d", n-1), state, n)
			if err != nil {
				return nil, nil, err
			}
			cur = s
			in, err := hookPayload("SessionStart", s.session, cwd)
			return s.env, in, err
		},
		after: func(ctx context.Context) error {
			s := cur
			cur = nil
			defer s.agent.kill()
			b, err := binding.Load(state, s.agent.pid())
			if err != nil {
				return fmt.Errorf("SessionStart did not bind %s: %w (hooks.log: %s)", s.member, err, lastHookLog(state))
			}
			if b.SidecarPID <= 0 {
				return fmt.Errorf("SessionStart of %s spawned no sidecar (hooks.log: %s)", s.member, lastHookLog(state))
			}
			if st, err := binding.StartTime(b.SidecarPID); err == nil && st == b.SidecarStart {
				_ = syscall.Kill(b.SidecarPID, syscall.SIGKILL)
			}
			binding.Remove(state, s.agent.pid())
			return nil
		}}
	if err := r.timeKinds(ctx, r.cfg.SessionStartRuns, []procKind{ss}); err != nil {
		return err
	}
	return hookOutcomes(state, "SessionStart", "bound")
}

// hookLine is the part of a hooks.log line the bench checks.
type hookLine struct {
	Event     string   `json:"event"`
	Outcome   string   `json:"outcome"`
	Error     string   `json:"error"`
	Delivered []uint64 `json:"delivered"`
}

// hookOutcomes checks that every logged hook of event ended with outcome
// and delivered nothing: a hook that failed open or was gated measured
// nothing worth a row.
func hookOutcomes(stateDir, event, outcome string) error {
	f, err := os.Open(filepath.Join(stateDir, "logs", "hooks.log"))
	if err != nil {
		return fmt.Errorf("hooks.log: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	seen := 0
	for sc.Scan() {
		var l hookLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Event != event {
			continue
		}
		seen++
		if l.Outcome != outcome || (event == "PostToolBatch" && len(l.Delivered) > 0) {
			return fmt.Errorf("hook %s ended %q (error %q, delivered %v), want %q", event, l.Outcome, l.Error, l.Delivered, outcome)
		}
	}
	if seen == 0 {
		return fmt.Errorf("no %s hook in hooks.log", event)
	}
	return sc.Err()
}

// hookTeam starts a node of this process with sync always (teamNode) and
// creates the team teamID of specs on it. The caller stops the node.
func (r *run) hookTeam(ctx context.Context, nodeName, teamID string, specs []team.MemberSpec) (*node.Node, func(), error) {
	n, svc, stop, err := r.teamNode(ctx, nodeName, bus.SyncModeAlways, team.Config{})
	if err != nil {
		return nil, nil, err
	}
	if _, err := svc.CreateTeam(ctx, teamID, "", specs, teambus.DefaultPolicy()); err != nil {
		stop()
		return nil, nil, fmt.Errorf("create team %s: %w", teamID, err)
	}
	return n, stop, nil
}

// boundSession is a new hook session of member, bound once (untimed) by
// a SessionStart hook without a sidecar: nothing but the hooks under test
// talks to the node. The caller kills its agent.
func (r *run) boundSession(ctx context.Context, teamID, member, state, exe, cwd string, extra ...string) (*hookSession, error) {
	s, err := r.newHookSession(teamID, member, state, 0, extra...)
	if err != nil {
		return nil, err
	}
	in, err := hookPayload("SessionStart", s.session, cwd)
	if err == nil {
		_, err = timeProc(ctx, exe, append(s.env, "TEAMBUS_NO_SIDECAR=1"), in, "hook", "SessionStart")
	}
	if err == nil {
		if _, err = binding.Load(state, s.agent.pid()); err != nil {
			err = fmt.Errorf("SessionStart did not bind %s: %w (hooks.log: %s)", member, err, lastHookLog(state))
		}
	}
	if err != nil {
		s.agent.kill()
		return nil, err
	}
	return s, nil
}

// lastHookLog returns the last line of hooks.log, for an error.
func lastHookLog(stateDir string) string {
	b, _ := os.ReadFile(filepath.Join(stateDir, "logs", "hooks.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// memberCreds issues member's credential on n and returns its file.
func (r *run) memberCreds(ctx context.Context, n *node.Node, teamID, member string) (string, error) {
	conn, err := connect(ctx, n)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	cr, err := credstore.IssueCreds(ctx, conn, teamID, member, []string{n.URL()})
	if err != nil {
		return "", err
	}
	file := filepath.Join(r.dir, teamID+"-"+member+".creds")
	return file, bus.WriteCreds(file, cr)
}
