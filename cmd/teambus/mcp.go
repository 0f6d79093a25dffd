//go:build !teambus_client

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/agent/binding"
	"github.com/teambus/teambus/agent/initclaude"
	"github.com/teambus/teambus/agent/mcpserver"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/proc"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// mcpCommand is `teambus mcp`: a stdio MCP server that makes
// any MCP-capable agent a team member. stdout carries only JSON-RPC; logs
// go to stderr.
func mcpCommand() *cli.Command {
	return &cli.Command{
		Name:  "mcp",
		Usage: "serve the team to an MCP-capable agent over stdio (send, inbox, ack, tasks, checkpoints)",
		Description: "Identity comes from --team/--member/--session (TEAMBUS_TEAM, TEAMBUS_MEMBER, TEAMBUS_SESSION), else from\n" +
			"the hook binding of the Claude process that started the server (`teambus init claude`), and is\n" +
			"resolved at every tool call. For an agent without hooks, --join registers a new incarnation\n" +
			"(session mcp-<host>-p<parent pid>) and --sidecar starts `teambus teammate` watching the parent\n" +
			"process. With --creds of a member (`teambus team creds`) the credential is the identity and\n" +
			"every tool goes through the team service. Setup: `claude mcp add teambus -- teambus mcp`.",
		Flags: flags(connFlags(), logFlags(), memberFlags(), []cli.Flag{
			&cli.BoolFlag{Name: "join", Usage: "register a new incarnation of the member at startup (agents without hooks)", EnvVars: []string{"TEAMBUS_MCP_JOIN"}},
			&cli.BoolFlag{Name: "sidecar", Usage: "start the teammate sidecar for the parent process (crash detection without hooks)", EnvVars: []string{"TEAMBUS_MCP_SIDECAR"}},
			&cli.BoolFlag{Name: "channel", Usage: "emit notifications/claude/channel nudges when mail arrives (never acks)"},
			&cli.StringFlag{Name: "tools", Usage: "all, member (no lead tools) or readonly", Value: string(mcpserver.ToolsAll), EnvVars: []string{"TEAMBUS_MCP_TOOLS"}},
			busFlag(),
		}),
		Action: runMCP,
	}
}

func runMCP(c *cli.Context) error {
	if err := exactArgs(c, 0); err != nil {
		return err
	}
	if c.Bool("channel") {
		return usageError(c, "--channel is not available yet: use the inbox tool or the hooks (`teambus init claude`)")
	}
	if err := applyBus(c); err != nil {
		return usageError(c, "invalid --bus %q: %v", c.String("bus"), err)
	}
	id, err := mcpIdentity(c)
	if err != nil {
		return err
	}
	d, err := timeout(c)
	if err != nil {
		return err
	}
	log, conn, svc, err := sidecarConn(c)
	if err != nil {
		return err
	}
	defer conn.Close()
	if id, err = mcpCredsIdentity(c, conn, id); err != nil {
		return err
	}
	// The tools use the team service whenever it answers; the team state
	// stays beside it for what the service does not offer (task_add,
	// team_resume, team_probe, the whole mailbox's replay, record reads).
	// A member credential has no JetStream, so no team state.
	api, err := connectAPI(c.Context, conn, svc, team.Actor{}, d, log)
	if err != nil {
		return err
	}
	direct := svc
	if _, _, ok := conn.MemberOf(); ok {
		direct = nil
	}
	if c.Bool("join") || c.Bool("sidecar") {
		if id, err = mcpJoin(c, api, direct, id, d, log); err != nil {
			return err
		}
	}
	resolve := mcpserver.StaticIdentity(id)
	if !c.Bool("join") && !c.Bool("sidecar") {
		dir, err := stateDir(c)
		if err != nil {
			return err
		}
		resolve = bindingIdentity(dir, id, os.Getenv)
	}
	srv, err := mcpserver.New(mcpserver.Config{
		API:         api,
		Direct:      direct,
		Resolve:     resolve,
		Version:     buildVersion(),
		Tools:       mcpserver.ToolSet(c.String("tools")),
		Logger:      log,
		CallTimeout: d,
		Spawner:     newMCPSpawner(c, conn, svc, log),
	})
	if err != nil {
		return err
	}
	via := "team service"
	if _, local := api.(team.API); local {
		via = "team state"
	}
	log.Info("mcp serving", "team", id.Team, "member", id.Member, "session", id.Session, "tools", c.String("tools"), "via", via)
	t := &mcp.IOTransport{Reader: io.NopCloser(c.App.Reader), Writer: nopWriteCloser{c.App.Writer}}
	if err := srv.Run(c.Context, t); err != nil && !errors.Is(err, io.EOF) {
		return teambus.Unavailablef("mcp server: %w", err)
	}
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// bindingIdentity resolves the identity at every tool call: the flags and
// environment (id) when they name team, member and session; else the
// hook binding of the agent process this server runs under (its parent,
// the Claude process whose SessionStart hook bound it), which may be
// written after the server started. A binding for another team or
// member than the flags name is not used; the flags' identity then
// stands (the tools say what is missing).
func bindingIdentity(dir string, id mcpserver.Identity, getenv func(string) string) func(context.Context) (mcpserver.Identity, error) {
	if id.Team != "" && id.Member != "" && id.Session != "" {
		return mcpserver.StaticIdentity(id)
	}
	return func(context.Context) (mcpserver.Identity, error) {
		b, ok, err := binding.Resolve(dir, getenv)
		if err != nil {
			if errors.Is(err, teambus.ErrFenced) {
				return id, err
			}
			return id, nil
		}
		if !ok || (id.Team != "" && id.Team != b.Team) || (id.Member != "" && id.Member != b.Member) {
			return id, nil
		}
		out := mcpserver.Identity{Team: b.Team, Member: b.Member, Session: id.Session}
		if out.Session == "" {
			out.Session = b.Session
		}
		return out, nil
	}
}

// mcpIdentity is the identity of the flags and environment; any part may
// be missing: the hook binding of the parent process fills it at each
// tool call (bindingIdentity), or the tools say how to bind.
func mcpIdentity(c *cli.Context) (mcpserver.Identity, error) {
	var id mcpserver.Identity
	var err error
	if id.Team, err = credsID(c, "team", c.String("team")); err != nil {
		return id, err
	}
	if id.Member, err = credsID(c, "member", c.String("member")); err != nil {
		return id, err
	}
	id.Session = c.String("session")
	if id.Team != "" {
		if err := teambus.ValidateID("team", id.Team); err != nil {
			return id, err
		}
	}
	if id.Member != "" && id.Member != teambus.Lead {
		if err := teambus.ValidateMemberID(id.Member); err != nil {
			return id, err
		}
	}
	if id.Session != "" {
		if err := teambus.ValidateSession(id.Session); err != nil {
			return id, err
		}
	}
	return id, nil
}

// mcpCredsIdentity fills the identity from a member credential's
// connection (a user and password given without a credentials file): the
// credential fixes team and member, and the service acts only as them.
func mcpCredsIdentity(c *cli.Context, conn *bus.Conn, id mcpserver.Identity) (mcpserver.Identity, error) {
	ct, cm, ok := conn.MemberOf()
	if !ok {
		return id, nil
	}
	if id.Team == "" {
		id.Team = ct
	}
	if id.Member == "" {
		id.Member = cm
	}
	if id.Team != ct || id.Member != cm {
		return id, usageError(c, "--team %s --member %s: the credential is for member %s of team %s only", id.Team, id.Member, cm, ct)
	}
	return id, nil
}

// mcpJoin registers a new incarnation for the parent process (--join)
// and starts its sidecar (--sidecar). It returns the identity with the
// incarnation's session.
func mcpJoin(c *cli.Context, api teamapi.API, direct *team.Service, id mcpserver.Identity, d time.Duration, log *slog.Logger) (mcpserver.Identity, error) {
	if !id.Bound() {
		return id, usageError(c, "--join and --sidecar need the member: set --team and --member (or TEAMBUS_TEAM, TEAMBUS_MEMBER)")
	}
	if id.Member == teambus.Lead {
		return id, usageError(c, "--join and --sidecar are for teammates: the lead attaches with `teambus lead` or the team_resume tool")
	}
	ppid := os.Getppid()
	if id.Session == "" {
		if !c.Bool("join") {
			return id, usageError(c, "--sidecar without --join needs --session (or TEAMBUS_SESSION): the incarnation to watch")
		}
		host, err := os.Hostname()
		if err != nil {
			return id, fmt.Errorf("hostname: %w", err)
		}
		id.Session = fmt.Sprintf("mcp-%s-p%d", host, ppid)
	}
	ctx, cancel := context.WithTimeout(c.Context, d)
	defer cancel()
	// Until the teammate sidecar can attach to a registered incarnation
	// (--adopt), it registers the incarnation itself: then mcp does not.
	adopt := hasFlagName(teammateCommand().Flags, "adopt")
	var epoch int64
	if c.Bool("join") && (adopt || !c.Bool("sidecar")) {
		m, err := api.Join(ctx, teamapi.JoinRequest{Actor: id.Actor()})
		if err != nil {
			return id, fmt.Errorf("join %s of team %s: %w", id.Member, id.Team, err)
		}
		epoch = m.Epoch
		log.Info("mcp joined", "team", id.Team, "member", id.Member, "session", id.Session, "epoch", epoch)
	} else {
		m, err := mcpserver.MemberOf(ctx, api, direct, id)
		if err != nil {
			return id, err
		}
		epoch = m.Epoch
		if m.Session != id.Session {
			epoch++ // the sidecar registers the next one
		}
	}
	if !c.Bool("sidecar") {
		return id, nil
	}
	pid, err := startTeammate(c, id, ppid, epoch, adopt)
	if err != nil {
		return id, err
	}
	log.Info("mcp sidecar started", "pid", pid, "watch", ppid, "adopt", adopt)
	if !adopt {
		// Serve once the sidecar's registration is in.
		for {
			m, err := mcpserver.MemberOf(ctx, api, direct, id)
			if err == nil && m.Session == id.Session {
				break
			}
			select {
			case <-ctx.Done():
				return id, teambus.Unavailablef("teammate sidecar (pid %d) did not register session %s of %s within %s: see its log", pid, id.Session, id.Member, d)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return id, nil
}

// startTeammate starts `teambus teammate` for the incarnation, detached:
// its own session, stdin /dev/null, stdout and stderr to
// $TEAMBUS_DIR/logs/<team>/<member>-e<epoch>.log, no other descriptor
// (never the MCP stdout). It watches the parent pid itself, so it is not
// stopped with this process.
func startTeammate(c *cli.Context, id mcpserver.Identity, ppid int, epoch int64, adopt bool) (int, error) {
	dir, err := stateDir(c)
	if err != nil {
		return 0, err
	}
	exe, err := os.Executable()
	if err != nil {
		return 0, fmt.Errorf("find the teambus binary: %w", err)
	}
	// The client build beside makes the smaller sidecar (the MCP server
	// itself runs from the full build).
	if c := filepath.Join(filepath.Dir(exe), initclaude.ClientBinary); proc.IsExecutable(c) {
		exe = c
	}
	logDir := filepath.Join(dir, "logs", id.Team)
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return 0, fmt.Errorf("sidecar log directory: %w", err)
	}
	logPath := filepath.Join(logDir, fmt.Sprintf("%s-e%d.log", id.Member, epoch))
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, fmt.Errorf("sidecar log: %w", err)
	}
	defer lf.Close()
	args := []string{"teammate", "--team", id.Team, "--member", id.Member, "--session", id.Session, "--pid", strconv.Itoa(ppid)}
	if adopt {
		args = append(args, "--adopt")
	}
	cmd := exec.Command(exe, args...)
	// The connection goes in the environment, never in argv: a token or
	// password there would be in every local user's process list.
	cmd.Env = append(append(os.Environ(), "TEAMBUS_DIR="+dir), connEnv(c)...)
	if v := c.String("log-level"); v != "" {
		cmd.Env = append(cmd.Env, "TEAMBUS_LOG_LEVEL="+v)
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start teammate sidecar: %w", err)
	}
	pid := cmd.Process.Pid
	go func() { _ = cmd.Wait() }() // reap it if it ends while we serve
	return pid, nil
}
