package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/spawn"
)

// spawnCommand is `teambus spawn`: start a member's agent session, here
// or on a teambus host.
func spawnCommand() *cli.Command {
	return &cli.Command{
		Name:      "spawn",
		Usage:     "start a member's agent session (Claude Code, or --agent CMD), headless or in a tmux window, here or on a host",
		ArgsUsage: "[-- AGENT ARGS…]",
		Description: "Writes a Claude Code settings file under --dir with the teambus hooks bound to the member (the\n" +
			"project's own settings are never touched) and runs `claude --settings FILE …`: with --headless\n" +
			"(the default) `claude -p` with the brief (or --prompt) as its prompt, output in a log that\n" +
			"`teambus logs TEAM MEMBER` shows; with --tmux in a window of the tmux session teambus-TEAM\n" +
			"(`teambus attach TEAM MEMBER`). --agent CMD runs any command instead, with TEAMBUS_TEAM,\n" +
			"TEAMBUS_MEMBER, TEAMBUS_SESSION, TEAMBUS_DIR and TEAMBUS_PROMPT_FILE (a file holding its\n" +
			"first prompt: --prompt, or its brief) in its environment and a teambus sidecar beside it.\n" +
			"A member that crashed is resumed from its transcript when one was carried into the\n" +
			"bus, else started fresh from its brief. Runs on host --on H, else on the member's last host if\n" +
			"it is alive, else here. Credentials reach the session only through the environment.\n" +
			"Exit 3: the member runs, or another start of it is under way (--force replaces it).",
		Flags: flags(connFlags(), []cli.Flag{teamFlag(), memberFlag(),
			&cli.StringFlag{Name: "cwd", Usage: "working `DIR` of the session (default: this directory)"},
			&cli.BoolFlag{Name: "tmux", Usage: "run it in a tmux window (teambus attach)"},
			&cli.BoolFlag{Name: "headless", Usage: "run it detached, output to its log (teambus logs); the default"},
			&cli.StringFlag{Name: "prompt", Usage: "first prompt of a fresh session (default: the member's brief)"},
			&cli.StringFlag{Name: "on", Usage: "run it on the teambus host `NAME`", EnvVars: []string{"TEAMBUS_SPAWN_ON"}},
			&cli.StringFlag{Name: "agent", Usage: "run `CMD` (by /bin/sh, AGENT ARGS appended) instead of Claude Code"},
			&cli.BoolFlag{Name: "no-sidecar", Usage: "with --agent: start no sidecar, the agent binds itself (teambus mcp --join --sidecar)"},
			&cli.BoolFlag{Name: "force", Usage: "start it even though it runs (the running incarnation is fenced) or a start is under way"},
			&cli.BoolFlag{Name: "fresh", Usage: "start a new conversation even when a transcript could be resumed"},
			claudeFlag(), jsonFlag(),
		}),
		Action: runSpawn,
	}
}

// claudeFlag is --claude, the Claude Code binary sessions run.
func claudeFlag() cli.Flag {
	return &cli.StringFlag{Name: "claude", Usage: "Claude Code `BINARY`", EnvVars: []string{"TEAMBUS_CLAUDE_BIN"}, Value: "claude"}
}

func runSpawn(c *cli.Context) error {
	teamID, err := teamID(c)
	if err != nil {
		return err
	}
	member, err := memberID(c)
	if err != nil {
		return err
	}
	if c.Bool("tmux") && c.Bool("headless") {
		return usageError(c, "--tmux and --headless exclude each other")
	}
	mode := spawn.Headless
	if c.Bool("tmux") {
		mode = spawn.Tmux
	}
	cwd := c.String("cwd")
	if cwd == "" {
		if cwd, err = os.Getwd(); err != nil {
			return teambus.Invalidf("no --cwd and no working directory: %v", err)
		}
	}
	if cwd, err = filepath.Abs(cwd); err != nil {
		return usageError(c, "invalid --cwd: %v", err)
	}
	req := spawn.Request{Spec: spawn.Spec{Team: teamID, Member: member, Cwd: cwd, Mode: mode, Prompt: c.String("prompt"),
		Agent: c.String("agent"), Args: c.Args().Slice(), NoSidecar: c.Bool("no-sidecar")},
		Force: c.Bool("force"), Fresh: c.Bool("fresh")}
	if err := req.Spec.Validate(); err != nil {
		return err
	}
	on := c.String("on")
	if on != "" {
		if err := spawn.ValidateHost(on); err != nil {
			return err
		}
	}
	return withSession(c, func(s *session) error {
		reg, err := spawn.Open(s.ctx, s.conn.JS)
		if err != nil {
			return err
		}
		if on == "" {
			if rec, _, err := reg.Record(s.ctx, teamID, member); err == nil && rec.Host != "" && reg.Alive(s.ctx, rec.Host) {
				on = rec.Host // its last host, alive
			}
		}
		var res *spawn.Result
		if on != "" {
			res, err = spawn.RemoteSpawn(s.ctx, s.conn.NC, on, req)
		} else {
			var l *spawn.Launcher
			if l, err = launcher(c); err != nil {
				return err
			}
			sp := &spawn.Spawner{Reg: reg, Svc: s.svc, Launcher: l, Transcripts: spawn.BusTranscripts{Svc: s.svc}}
			var st spawn.Started
			res, st, err = sp.Spawn(s.ctx, req)
			if err == nil && st.Release != nil {
				st.Release()
			}
			if err == nil && res.Reclaim != "" {
				// The crashed incarnation's task goes back to the new one
				// when it registers; this command waits for that.
				fmt.Fprintf(c.App.ErrWriter, "waiting for %s to register to give it back task %s…\n", member, res.Reclaim)
				rctx, cancel := context.WithTimeout(c.Context, time.Minute)
				ok, rerr := sp.Reclaim(rctx, teamID, member, res.Epoch, res.Reclaim)
				cancel()
				switch {
				case rerr != nil:
					fmt.Fprintf(c.App.ErrWriter, "task %s not given back: %v (the session can claim it: teambus task claim %s)\n", res.Reclaim, rerr, res.Reclaim)
				case !ok:
					fmt.Fprintf(c.App.ErrWriter, "task %s was not available any more: not given back\n", res.Reclaim)
				}
			}
		}
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, res)
		}
		printSpawn(c, res)
		return nil
	})
}

// launcher is the Launcher of this machine for c.
func launcher(c *cli.Context) (*spawn.Launcher, error) {
	dir, err := stateDir(c)
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return nil, teambus.Invalidf("find the teambus binary: %v", err)
	}
	claude := c.String("claude")
	if claude == "" { // a command without --claude (teambus mcp)
		claude = os.Getenv("TEAMBUS_CLAUDE_BIN")
	}
	return &spawn.Launcher{Dir: dir, Bin: exe, Claude: claude}, nil
}

func printSpawn(c *cli.Context, r *spawn.Result) {
	w := c.App.Writer
	where := "here"
	if r.Host != "" {
		where = "on host " + r.Host
	}
	from := map[string]string{spawn.FromPrompt: "a fresh session", spawn.FromTranscript: "resuming session " + r.Session + " from its transcript", spawn.FromBrief: "a fresh session from its brief"}[r.From]
	fmt.Fprintf(w, "spawned %s of team %s %s (machine %s): pid %d, %s, %s\n", r.Member, r.Team, where, r.Machine, r.PID, r.Mode, from)
	if r.Note != "" {
		fmt.Fprintf(w, "no transcript resumed: %s\n", r.Note)
	}
	switch {
	case r.Window != "":
		fmt.Fprintf(w, "attach: teambus attach %s %s\n", r.Team, r.Member)
	case r.Log != "":
		fmt.Fprintf(w, "output: teambus logs %s %s --follow   (%s)\n", r.Team, r.Member, r.Log)
	}
	fmt.Fprintf(w, "it registers as a new incarnation when its session starts: teambus team show %s\n", r.Team)
}

// attachCommand is `teambus attach TEAM MEMBER`: the member's tmux window.
func attachCommand() *cli.Command {
	return &cli.Command{
		Name:      "attach",
		Usage:     "attach this terminal to a member's tmux window (teambus spawn --tmux)",
		ArgsUsage: "TEAM MEMBER",
		Flags:     []cli.Flag{dirFlag(), &cli.StringFlag{Name: "tmux-bin", Usage: "tmux `BINARY`", Value: "tmux", EnvVars: []string{"TEAMBUS_TMUX"}}},
		Action: func(c *cli.Context) error {
			teamID, member, err := teamMemberArgs(c)
			if err != nil {
				return err
			}
			tmux, err := exec.LookPath(c.String("tmux-bin"))
			if err != nil {
				return teambus.Invalidf("tmux not found: %v", err)
			}
			target := spawn.TmuxSession(teamID) + ":" + member
			if os.Getenv("TMUX") == "" && !isTTY(os.Stdin) {
				return teambus.Invalidf("attach needs a terminal (stdin is not one): run it in a terminal, or read the window with `tmux -L %s capture-pane -p -t %s`", spawn.TmuxSocket, target)
			}
			if out, err := exec.Command(tmux, "-L", spawn.TmuxSocket, "list-panes", "-t", target).CombinedOutput(); err != nil {
				return teambus.NotFoundf("no tmux window %s on this machine (%s): start one with teambus spawn --tmux", target, firstLine(string(out)))
			}
			cmd := "attach-session"
			if os.Getenv("TMUX") != "" {
				cmd = "switch-client" // inside tmux: no nesting
			}
			argv := []string{tmux, "-L", spawn.TmuxSocket, cmd, "-t", target}
			if err := syscall.Exec(tmux, argv, os.Environ()); err != nil {
				return teambus.Unavailablef("run tmux: %w", err)
			}
			return nil
		},
	}
}

// isTTY reports whether f is a terminal (not merely a character device
// such as /dev/null).
func isTTY(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func firstLine(s string) string {
	for i, r := range s {
		if r == '\n' {
			return s[:i]
		}
	}
	return s
}
