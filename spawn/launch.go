package spawn

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/agent/initclaude"
	"github.com/teambus/teambus/internal/atomicfile"
)

// Launcher starts agent sessions on this machine.
type Launcher struct {
	// Dir is the teambus state directory (TEAMBUS_DIR): the settings
	// files, logs and the bus address live there.
	Dir string
	// Bin is the teambus binary the hooks and sidecars run (absolute).
	Bin string
	// Claude is the Claude Code binary ("claude": looked up on PATH).
	Claude string
	// Tmux is the tmux binary ("tmux": looked up on PATH).
	Tmux string
	// Env is the environment the agents inherit; nil is this process's.
	// Credentials (the bus token, the model's API key) reach agents only
	// this way, never in an argument.
	Env []string
	// SidecarArgs are passed to the sidecars spawn starts for --agent
	// sessions (e.g. connection flags without secrets).
	SidecarArgs []string
	Log         *slog.Logger
}

// Launch is one start.
type Launch struct {
	Spec Spec
	// Prompt is the first prompt given to the session.
	Prompt string
	// Resume is the Claude Code session to resume (its transcript was
	// restored into HOME); empty for a fresh session.
	Resume string
}

// Started says what a start ran.
type Started struct {
	// PID is the agent's process: claude, the agent command, or the tmux
	// pane's process.
	PID int
	// Log is the file that gets a headless session's output.
	Log string
	// Window is the tmux target (teambus-<team>:<member>) of a tmux start.
	Window string
	// Session is the teambus session given to an --agent session.
	Session string
	// Settings is the settings file of a Claude Code session.
	Settings string
	// Wait waits for a headless session's process (nil for tmux); a
	// long-lived starter must call it, or the process stays a zombie.
	Wait func() error
	// Release lets go of a headless session's process: a starter that
	// exits before it does calls this instead of Wait.
	Release func()
}

// TmuxSocket is the tmux socket name (tmux -L) teambus runs its sessions
// on, apart from the user's own tmux sessions.
const TmuxSocket = "teambus"

// TmuxSession is the tmux session of a team's windows.
func TmuxSession(team string) string { return "teambus-" + team }

// LogPath is the log file of a member's headless sessions.
func LogPath(dir, team, member string) string {
	return filepath.Join(dir, "spawn", team, member+".log")
}

// PromptPath is the file an --agent session finds its first prompt in
// (TEAMBUS_PROMPT_FILE): --prompt, or its brief.
func PromptPath(dir, team, member string) string {
	return filepath.Join(dir, "spawn", team, member+".prompt")
}

// SettingsPath is the settings file of a member's Claude Code sessions.
func SettingsPath(dir, team, member string) string {
	return filepath.Join(dir, "spawn", team, member+".settings.json")
}

// WriteSettings writes the Claude Code settings file that binds a session
// to team/member through the teambus hooks, and returns its path. It never
// touches the project's own settings: Claude Code reads it through
// --settings.
func WriteSettings(dir, bin, team, member string, headless bool) (string, error) {
	o := initclaude.Options{Bin: bin, Team: team, Member: member}
	if headless {
		// `claude -p` ends with its turn: no waiter for idle wakes, and a
		// turn that stops with a task in progress is continued.
		o.Wake, o.Autonomous = initclaude.WakeOff, true
	}
	if err := o.Validate(); err != nil {
		return "", teambus.Invalidf("settings for %s: %v", member, err)
	}
	hooks := map[string][]initclaude.Group{}
	for _, g := range initclaude.Handlers(o) {
		hooks[g.Event] = append(hooks[g.Event], g.Group)
	}
	raw, err := json.MarshalIndent(map[string]any{"hooks": hooks}, "", "  ")
	if err != nil {
		return "", err
	}
	path := SettingsPath(dir, team, member)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("settings for %s: %w", member, err)
	}
	if err := atomicfile.Write(path, append(raw, '\n'), 0o600); err != nil {
		return "", fmt.Errorf("settings for %s: %w", member, err)
	}
	return path, nil
}

// droppedEnv are variables of a surrounding agent session that a spawned
// session must not inherit: its identity comes from its own hooks.
var droppedEnv = []string{"TEAMBUS_SESSION", "TEAMBUS_TEAM", "TEAMBUS_MEMBER", "TEAMBUS_DIR", "TEAMBUS_FORCE",
	"CLAUDECODE", "CLAUDE_PID", "CLAUDE_CODE_SESSION_ID", "CLAUDE_CODE_CHILD_SESSION", "CLAUDE_ENV_FILE", "CLAUDE_PROJECT_DIR", "CLAUDE_CODE_ENTRYPOINT", "TMUX", "TMUX_PANE"}

// env is the agent's environment: the launcher's, without another
// session's identity, plus the member's.
func (l *Launcher) env(spec Spec, session string) []string {
	base := l.Env
	if base == nil {
		base = os.Environ()
	}
	out := make([]string, 0, len(base)+5)
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, d := range droppedEnv {
			drop = drop || name == d
		}
		if !drop {
			out = append(out, kv)
		}
	}
	out = append(out, "TEAMBUS_DIR="+l.Dir, "TEAMBUS_TEAM="+spec.Team, "TEAMBUS_MEMBER="+spec.Member)
	if session != "" {
		out = append(out, "TEAMBUS_SESSION="+session)
	}
	return out
}

// Home is the HOME of the agents this launcher starts.
func (l *Launcher) Home() string {
	env := l.Env
	if env == nil {
		env = os.Environ()
	}
	home := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = v
		}
	}
	return home
}

// simpleCommand reports whether cmd is plain words (a program and its
// arguments) that the shell can exec: no operators, quotes, expansions or
// assignments.
func simpleCommand(cmd string) bool {
	return strings.TrimSpace(cmd) != "" && !strings.ContainsAny(cmd, ";&|<>()$`\\\"'*?[]#~=%{}!\n\t")
}

// argv is the command line of a start, and the settings file it needs.
func (l *Launcher) argv(ln Launch) ([]string, string, error) {
	spec := ln.Spec
	if !spec.Claude() {
		script := spec.Agent + ` "$@"`
		if simpleCommand(spec.Agent) {
			// The shell becomes the agent: the pid teambus watches and a
			// kill -9 reach the agent itself, never leaving it orphaned.
			script = "exec " + script
		}
		return append([]string{"/bin/sh", "-c", script, "teambus-agent"}, spec.Args...), "", nil
	}
	settings, err := WriteSettings(l.Dir, l.Bin, spec.Team, spec.Member, spec.Mode == Headless)
	if err != nil {
		return nil, "", err
	}
	claude := l.Claude
	if claude == "" {
		claude = "claude"
	}
	// The prompt comes first, right after -p: options that take several
	// values (--allowedTools A B) among the arguments would swallow a
	// prompt placed after them.
	var argv []string
	switch {
	case spec.Mode == Headless:
		argv = []string{claude, "-p", ln.Prompt}
	case ln.Prompt != "":
		argv = []string{claude, ln.Prompt}
	default:
		argv = []string{claude}
	}
	argv = append(argv, "--settings", settings)
	if ln.Resume != "" {
		argv = append(argv, "--resume", ln.Resume)
	}
	return append(argv, spec.Args...), settings, nil
}

// check refuses a spec this machine can not start: invalid, or its
// working directory missing here.
func (l *Launcher) check(spec Spec) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	if fi, err := os.Stat(spec.Cwd); err != nil || !fi.IsDir() {
		return teambus.Invalidf("working directory %s does not exist on this machine", spec.Cwd)
	}
	return nil
}

// Start starts the session of ln. Its process runs detached: its own
// session (setsid), stdin /dev/null, output to the member's log (or in
// its tmux window).
func (l *Launcher) Start(ctx context.Context, ln Launch) (Started, error) {
	if err := l.check(ln.Spec); err != nil {
		return Started{}, err
	}
	if strings.HasPrefix(ln.Prompt, "-") {
		return Started{}, teambus.Invalidf("invalid prompt: it can not start with '-'")
	}
	argv, settings, err := l.argv(ln)
	if err != nil {
		return Started{}, err
	}
	var session string
	if !ln.Spec.Claude() {
		session = "spawn-" + ln.Spec.Member + "-" + randomHex(6)
	}
	env := l.env(ln.Spec, session)
	if !ln.Spec.Claude() {
		// An agent's prompt (--prompt, or its brief) is in a private file
		// named in its environment: never in argv, no size limit.
		path := PromptPath(l.Dir, ln.Spec.Team, ln.Spec.Member)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return Started{}, fmt.Errorf("prompt of %s: %w", ln.Spec.Member, err)
		}
		if err := writePrivate(path, []byte(ln.Prompt)); err != nil {
			return Started{}, fmt.Errorf("prompt of %s: %w", ln.Spec.Member, err)
		}
		env = append(env, "TEAMBUS_PROMPT_FILE="+path)
	}
	var st Started
	if ln.Spec.Mode == Tmux {
		st, err = l.startTmux(ctx, ln.Spec, argv, env)
	} else {
		st, err = l.startDetached(ln.Spec, argv, env)
	}
	if err != nil {
		return Started{}, err
	}
	st.Settings, st.Session = settings, session
	if !ln.Spec.Claude() && !ln.Spec.NoSidecar {
		if err := l.startSidecar(ln.Spec, session, st.PID); err != nil {
			return st, err
		}
	}
	return st, nil
}

// startDetached starts argv in its own session with output to the log.
func (l *Launcher) startDetached(spec Spec, argv, env []string) (Started, error) {
	path := LogPath(l.Dir, spec.Team, spec.Member)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return Started{}, fmt.Errorf("log of %s: %w", spec.Member, err)
	}
	logf, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return Started{}, fmt.Errorf("log of %s: %w", spec.Member, err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "\n=== teambus spawn %s of team %s at %s: %s\n", spec.Member, spec.Team, time.Now().UTC().Format(time.RFC3339), strings.Join(redactPrompt(argv), " "))
	null, err := os.Open(os.DevNull)
	if err != nil {
		return Started{}, err
	}
	defer null.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, logf, logf
	cmd.Dir, cmd.Env = spec.Cwd, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return Started{}, teambus.Invalidf("start %s: %v", argv[0], err)
	}
	l.logger().Info("spawned", "team", spec.Team, "member", spec.Member, "pid", cmd.Process.Pid, "log", path)
	return Started{PID: cmd.Process.Pid, Log: path, Wait: cmd.Wait, Release: func() { _ = cmd.Process.Release() }}, nil
}

// writePrivate replaces path with b, mode 0600, atomically.
func writePrivate(path string, b []byte) error {
	tmp := path + ".tmp-" + randomHex(4)
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// redactPrompt shortens the prompt in a logged command line.
func redactPrompt(argv []string) []string {
	out := append([]string(nil), argv...)
	for i, a := range out {
		if len(a) > 80 || strings.Contains(a, "\n") {
			out[i] = strconv.Quote(strings.Join(strings.Fields(a[:min(len(a), 60)]), " ") + "…")
		}
	}
	return out
}

// startTmux opens a window teambus-<team>:<member> running argv.
func (l *Launcher) startTmux(ctx context.Context, spec Spec, argv, env []string) (Started, error) {
	tmux := l.Tmux
	if tmux == "" {
		tmux = "tmux"
	}
	sess := TmuxSession(spec.Team)
	// The window's identity goes in argv (-e); secrets never do: a window
	// gets them from the tmux server's environment, which a server started
	// here inherits from env.
	var extra []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "TEAMBUS_") && !secretName(name) && name != "TEAMBUS_SESSION" {
			extra = append(extra, "-e", kv)
		}
	}
	extra = append(extra, "-e", "TEAMBUS_SESSION="+envValue(env, "TEAMBUS_SESSION"))
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, tmux, append([]string{"-L", TmuxSocket}, args...)...)
		cmd.Env = env // a new tmux server inherits it: the credentials stay out of argv
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("tmux %s: %v: %s", args[0], err, strings.TrimSpace(errb.String()))
		}
		return strings.TrimSpace(out.String()), nil
	}
	common := append([]string{"-d", "-n", spec.Member, "-P", "-F", "#{pane_pid}", "-c", spec.Cwd}, extra...)
	out, err := run("has-session", "-t", "="+sess)
	if err == nil {
		out, err = run(append(append([]string{"new-window", "-t", sess + ":"}, common...), append([]string{"--"}, argv...)...)...)
	} else {
		out, err = run(append(append([]string{"new-session", "-s", sess, "-x", "200", "-y", "50"}, common...), append([]string{"--"}, argv...)...)...)
		if err != nil {
			// Another start made the session in between.
			out, err = run(append(append([]string{"new-window", "-t", sess + ":"}, common...), append([]string{"--"}, argv...)...)...)
		}
	}
	if err != nil {
		return Started{}, teambus.Unavailablef("open a tmux window for %s: %w (is tmux installed?)", spec.Member, err)
	}
	pid, err := strconv.Atoi(out)
	if err != nil {
		return Started{}, fmt.Errorf("tmux pane pid %q: %w", out, err)
	}
	win := sess + ":" + spec.Member
	l.logger().Info("spawned in tmux", "team", spec.Team, "member", spec.Member, "pid", pid, "window", win)
	return Started{PID: pid, Window: win}, nil
}

// secretName reports whether an environment variable may hold a secret
// (a token, a password, a key's seed) rather than a name or a path.
func secretName(name string) bool {
	for _, w := range []string{"TOKEN", "PASSWORD", "SECRET", "SEED", "NKEY", "API_KEY"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

func envValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if s, ok := strings.CutPrefix(kv, name+"="); ok {
			v = s
		}
	}
	return v
}

// startSidecar starts `teambus teammate` beside an --agent session: it
// registers the member with session, watches pid, and records a crash
// when the agent dies holding a task.
func (l *Launcher) startSidecar(spec Spec, session string, pid int) error {
	args := append([]string{"teammate", "--team", spec.Team, "--member", spec.Member, "--session", session,
		"--pid", strconv.Itoa(pid), "--workdir", spec.Cwd, "--dir", l.Dir}, l.SidecarArgs...)
	dir := filepath.Join(l.Dir, "logs", spec.Team)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(dir, spec.Member+"-"+session+".log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer null.Close()
	cmd := exec.Command(l.Bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, logf, logf
	cmd.Dir = "/"
	cmd.Env = l.env(spec, session)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the sidecar of %s: %w", spec.Member, err)
	}
	go func() { _ = cmd.Wait() }() // reaped here while this process lives; init's after
	return nil
}

func (l *Launcher) logger() *slog.Logger {
	if l.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l.Log
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
