package proc

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/teambus/teambus"
)

// GitChanged lists the files `git status --porcelain` reports changed in
// the agent's working tree dir, each name stripped of control characters
// (a file name is member-controlled text); nil when dir is empty, is not a
// git tree, or git does not answer within limit. Checkpoints record it.
func GitChanged(ctx context.Context, dir string, limit time.Duration) []string {
	if dir == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "-C", dir, "status", "--porcelain").Output()
	if err != nil {
		return nil
	}
	var files []string
	for _, line := range strings.Split(string(out), "\n") {
		if len(line) > 3 {
			files = append(files, teambus.StripLine(strings.TrimSpace(line[3:])))
		}
	}
	return files
}

// CleanEnv is this process's environment without TEAMBUS_ variables, for
// the teambus processes a demo or a bench starts: they get what they need
// as flags, and a TEAMBUS_SERVER of the user's must not send them
// elsewhere.
func CleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TEAMBUS_") {
			out = append(out, kv)
		}
	}
	return out
}

// IsExecutable reports whether path is a regular file someone may execute.
func IsExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
