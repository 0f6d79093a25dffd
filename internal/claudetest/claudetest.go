package claudetest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Bin returns the Claude Code binary: TEAMBUS_CLAUDE_BIN when set, else the
// one scripts/install-claude.sh installs (cached; the script is found in
// the working directory or above it, as tests run in their package's
// directory). The test is skipped only where npm is missing.
func Bin(t testing.TB) string {
	t.Helper()
	if b := os.Getenv("TEAMBUS_CLAUDE_BIN"); b != "" {
		return b
	}
	script, err := findScript()
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(script)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 3 {
		t.Skip("npm is not installed: the real Claude Code test needs it (scripts/install-claude.sh)")
	}
	if err != nil {
		t.Fatalf("install Claude Code: %v\n%s", err, errb.String())
	}
	return strings.TrimSpace(out.String())
}

// findScript looks for scripts/install-claude.sh from the working
// directory up.
func findScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "scripts", "install-claude.sh")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("scripts/install-claude.sh not found above the working directory")
		}
		dir = parent
	}
}
