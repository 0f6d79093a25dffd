package initclaude

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Scope is where the hooks are installed (§12.2.1).
type Scope string

// The scopes. ScopeSettings is --settings FILE.
const (
	ScopeLocal    Scope = "local"
	ScopeProject  Scope = "project"
	ScopeUser     Scope = "user"
	ScopePlugin   Scope = "plugin"
	ScopeSettings Scope = "settings"
)

// Target is where one scope's files are.
type Target struct {
	Scope Scope
	// Settings is the settings file (plugin: DIR/hooks/hooks.json).
	Settings string
	// Dir is the plugin directory (plugin scope only).
	Dir string
	// ProjectRoot is the root of the project (the current worktree), for
	// .mcp.json; empty for the user scope.
	ProjectRoot string
	// ClaudeMD and Skill are where --claude-md and --skill write.
	ClaudeMD, Skill string
	// Worktrees is the number of worktrees of the repository (0: not in
	// a git repository).
	Worktrees int
	// MayBake says whether the identity may be baked into the handlers:
	// --settings FILE, and local with a single worktree.
	MayBake bool
}

// Env is what target resolution reads from the environment.
type Env struct {
	Cwd  string // the working directory
	Home string // the home directory
	// ClaudeDir is Claude Code's user directory: $CLAUDE_CONFIG_DIR, else
	// ~/.claude.
	ClaudeDir string
}

// Resolve returns the target of scope. file is --settings FILE, out is
// --out DIR (plugin).
func Resolve(ctx context.Context, env Env, scope Scope, file, out string) (Target, error) {
	t := Target{Scope: scope}
	main, top, n := gitRoots(ctx, env.Cwd)
	t.Worktrees = n
	if top == "" {
		top = env.Cwd
	}
	if main == "" {
		main = top
	}
	t.ProjectRoot = top
	t.ClaudeMD = filepath.Join(top, "CLAUDE.md")
	t.Skill = filepath.Join(top, ".claude", "skills", "teambus", "SKILL.md")
	switch scope {
	case ScopeLocal:
		// Since Claude Code 2.1.211 settings.local.json is read at the
		// repository root, also from a worktree.
		t.Settings = filepath.Join(main, ".claude", "settings.local.json")
		t.MayBake = n <= 1
	case ScopeProject:
		t.Settings = filepath.Join(top, ".claude", "settings.json")
	case ScopeUser:
		t.Settings = filepath.Join(env.ClaudeDir, "settings.json")
		t.ProjectRoot = ""
		t.ClaudeMD = filepath.Join(env.ClaudeDir, "CLAUDE.md")
		t.Skill = filepath.Join(env.ClaudeDir, "skills", "teambus", "SKILL.md")
	case ScopeSettings:
		p, err := abs(env.Cwd, file)
		if err != nil {
			return Target{}, err
		}
		t.Settings = p
		t.MayBake = true
	case ScopePlugin:
		if out == "" {
			return Target{}, fmt.Errorf("the plugin scope needs --out DIR")
		}
		d, err := abs(env.Cwd, out)
		if err != nil {
			return Target{}, err
		}
		t.Dir = d
		t.Settings = filepath.Join(d, PluginHooks)
		t.ClaudeMD = ""
		t.Skill = filepath.Join(d, PluginSkill)
	default:
		return Target{}, fmt.Errorf("unknown scope %q: local, project, user or plugin", scope)
	}
	return t, nil
}

func abs(cwd, p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("empty path")
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p), nil
	}
	return filepath.Join(cwd, p), nil
}

// gitRoots returns the main worktree of the repository at dir, the root of
// the current worktree and the number of worktrees (`git worktree list`).
// Outside a repository (or without git) all are zero.
func gitRoots(ctx context.Context, dir string) (main, top string, n int) {
	out, err := git(ctx, dir, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", "", 0
	}
	top = strings.TrimSpace(out)
	out, err = git(ctx, dir, "worktree", "list", "--porcelain")
	if err != nil {
		return top, top, 1
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	bare := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "worktree "):
			n++
			if n == 1 {
				main = strings.TrimPrefix(line, "worktree ")
			}
		case line == "bare" && n == 1:
			bare = true
		}
	}
	if bare {
		n-- // a bare repository's entry is not a worktree Claude Code runs in
		main = top
	}
	return main, top, n
}

// git runs git -C dir args and returns its stdout.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// GitIgnored reports whether path is ignored by git in its repository (false
// outside a repository). path need not exist yet, nor its directory: git
// runs from the nearest directory above it that does (before a first
// install .claude/ is not there, and `git -C` of a missing directory fails).
func GitIgnored(ctx context.Context, path string) bool {
	dir := filepath.Dir(path)
	for {
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			break
		}
		up := filepath.Dir(dir)
		if up == dir {
			return false
		}
		dir = up
	}
	cmd := exec.CommandContext(ctx, "git", "-C", dir, "check-ignore", "-q", path)
	return cmd.Run() == nil
}
