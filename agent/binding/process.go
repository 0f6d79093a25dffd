package binding

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// StartTime returns the start time of pid in clock ticks since boot
// (field 22 of /proc/<pid>/stat).
func StartTime(pid int) (uint64, error) {
	_, start, _, err := stat(pid)
	return start, err
}

// stat returns the command name, start time and parent pid of pid.
func stat(pid int) (comm string, start uint64, ppid int, err error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, 0, fmt.Errorf("process %d: %w", pid, err)
	}
	// The command name is in parentheses and may itself contain spaces or
	// parentheses: the fields after it follow the last ')'.
	open := bytes.IndexByte(raw, '(')
	end := bytes.LastIndexByte(raw, ')')
	if open < 0 || end < open {
		return "", 0, 0, fmt.Errorf("process %d: unreadable stat", pid)
	}
	comm = string(raw[open+1 : end])
	f := strings.Fields(string(raw[end+1:]))
	// f[0] is field 3 (state): field n is f[n-3].
	if len(f) < 20 {
		return "", 0, 0, fmt.Errorf("process %d: short stat", pid)
	}
	ppid, _ = strconv.Atoi(f[1])
	start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return "", 0, 0, fmt.Errorf("process %d: start time: %w", pid, err)
	}
	return comm, start, ppid, nil
}

// Argv returns the command line of pid.
func Argv(pid int) []string {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(raw) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
}

// shells are skipped when walking up to the agent process.
var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true}

// ClaudePID finds the agent process: $CLAUDE_PID when set and alive, else
// the first ancestor of this process (from its parent up) that is not a
// shell. getenv is os.Getenv in production.
func ClaudePID(getenv func(string) string) (int, error) {
	if s := getenv("CLAUDE_PID"); s != "" {
		pid, err := strconv.Atoi(s)
		if err != nil || pid <= 1 {
			return 0, fmt.Errorf("invalid CLAUDE_PID %q", s)
		}
		return pid, nil
	}
	pid := os.Getppid()
	for i := 0; i < 16 && pid > 1; i++ {
		comm, _, ppid, err := stat(pid)
		if err != nil {
			return 0, err
		}
		if !shells[comm] {
			return pid, nil
		}
		pid = ppid
	}
	return 0, fmt.Errorf("no agent process above pid %d", os.Getpid())
}

// PaneTeammate reports whether argv is a pane teammate of Claude's own
// agent teams (§12.1.6b): it must not take the member's identity.
func PaneTeammate(argv []string) bool {
	for _, a := range argv {
		for _, flag := range []string{"--parent-session-id", "--agent-id"} {
			if a == flag || strings.HasPrefix(a, flag+"=") {
				return true
			}
		}
	}
	return false
}

// PrintMode reports whether the Claude process runs headless (`claude -p`,
// SDK runs): from the hook's environment, or -p/--print in its argv.
func PrintMode(getenv func(string) string, argv []string) bool {
	if getenv("CLAUDE_CODE_ENTRYPOINT") == "sdk-cli" || getenv("CLAUDE_CODE_SESSION_ATTENDED") == "0" {
		return true
	}
	for _, a := range argv {
		if a == "-p" || a == "--print" || strings.HasPrefix(a, "--print=") {
			return true
		}
	}
	return false
}
