package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/teambus/teambus/agent/initclaude"
)

// The tests of `init claude` change the working directory and the
// environment (HOME, the Claude Code version), so they do not run in
// parallel.

const initBin = "/opt/teambus/bin/teambus"

// initRepo makes a fresh HOME and a fresh directory (a git repository with
// one commit when git is true), enters it, and pins the Claude Code version.
func initRepo(t *testing.T, git bool) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("CLAUDE_CONFIG_DIR", "")
	t.Setenv("TEAMBUS_CLAUDE_VERSION", "2.1.330")
	t.Setenv("TEAMBUS_CLAUDE_BIN", filepath.Join(home, "no-claude-here"))
	t.Setenv("TEAMBUS_TEAM", "")
	t.Setenv("TEAMBUS_MEMBER", "")
	// The credentials go below HOME (~/.config/teambus/creds); the
	// sessions' TEAMBUS_CREDS is judged by --check.
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("TEAMBUS_CREDS", "")
	t.Setenv("TEAMBUS_TOKEN", "")
	repo := filepath.Join(t.TempDir(), "repo")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	if git {
		if _, err := exec.LookPath("git"); err != nil {
			t.Skip("git not installed")
		}
		gitCmd(t, repo, "init", "-q")
		gitCmd(t, repo, "commit", "-q", "--allow-empty", "-m", "init")
	}
	t.Chdir(repo)
	return repo
}

func gitCmd(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// initOK runs init claude with args and wants exit 0.
func initOK(t *testing.T, args ...string) result {
	t.Helper()
	r := runCLI(t, append([]string{"init", "claude"}, args...)...)
	if r.code != 0 {
		t.Fatalf("init claude %s: exit %d\nstdout %s\nstderr %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

func TestInitClaude_LocalBakesIdentityRerunIdentical(t *testing.T) {
	repo := initRepo(t, true)
	dir := evTeam(t, "alpha")
	settings := filepath.Join(repo, ".claude", "settings.local.json")
	r := initOK(t, append([]string{"--team", "alpha", "--member", "tm1", "--bin", initBin}, dir...)...)
	if !strings.Contains(r.stdout, "create") || !strings.Contains(r.stdout, "identity alpha/tm1 baked in") {
		t.Errorf("stdout %q", r.stdout)
	}
	first := readString(t, settings)
	for _, want := range []string{`"command": "` + initBin + `"`, `"--member",`, `"tm1"`, `"asyncRewake": true`, `"TeammateIdle"`} {
		if strings.Contains(first, want) != (want != `"TeammateIdle"`) {
			t.Errorf("settings: %s present %t", want, strings.Contains(first, want))
		}
	}
	r = initOK(t, append([]string{"--team", "alpha", "--member", "tm1", "--bin", initBin}, dir...)...)
	if !strings.Contains(r.stdout, "unchanged") {
		t.Errorf("second run: %q", r.stdout)
	}
	if readString(t, settings) != first {
		t.Error("second run changed the file")
	}
}

func TestInitClaude_StrictJSONRefused(t *testing.T) {
	repo := initRepo(t, false)
	settings := filepath.Join(repo, ".claude", "settings.local.json")
	os.MkdirAll(filepath.Dir(settings), 0o755)
	orig := "{\n  \"model\": \"opus\", // mine\n}\n"
	os.WriteFile(settings, []byte(orig), 0o644)
	for _, args := range [][]string{{"--team", "alpha", "--member", "tm1"}, {"--remove"}} {
		r := runCLI(t, append([]string{"init", "claude", "--bin", initBin}, args...)...)
		r.wantError(t, 2, "not strict JSON", "nothing was written")
		if readString(t, settings) != orig {
			t.Error("file changed")
		}
		if _, err := os.Stat(settings + initclaude.BackupSuffix); err == nil {
			t.Error("backup written")
		}
	}
}

// TestInitClaude_WorktreeRule: with two worktrees the local scope refuses
// to bake an identity; --force bakes, the project scope takes it from env.
func TestInitClaude_WorktreeRule(t *testing.T) {
	repo := initRepo(t, true)
	dir := evTeam(t, "alpha")
	wt := filepath.Join(filepath.Dir(repo), "wt2")
	gitCmd(t, repo, "worktree", "add", "-q", wt)
	t.Chdir(wt)
	local := filepath.Join(repo, ".claude", "settings.local.json")
	r := runCLI(t, "init", "claude", "--team", "alpha", "--member", "tm1", "--bin", initBin)
	r.wantError(t, 2, "2 worktrees", "--scope project", "TEAMBUS_MEMBER=tm1", "--force")
	if _, err := os.Stat(local); err == nil {
		t.Fatal("settings written despite the refusal")
	}
	r = initOK(t, append([]string{"--team", "alpha", "--member", "tm1", "--bin", initBin, "--force"}, dir...)...)
	if !strings.Contains(readString(t, local), `"alpha"`) {
		t.Error("--force did not bake the identity")
	}
	r = initOK(t, append([]string{"--scope", "project", "--team", "alpha", "--member", "tm2"}, dir...)...)
	project := readString(t, filepath.Join(wt, ".claude", "settings.json"))
	if strings.Contains(project, "--team") || !strings.Contains(project, `"command": "teambus"`) {
		t.Errorf("project settings bake an identity or an absolute binary:\n%s", project)
	}
	if !strings.Contains(r.stdout, "TEAMBUS_TEAM=alpha TEAMBUS_MEMBER=tm2 claude") {
		t.Errorf("launch line missing: %q", r.stdout)
	}
}

func TestInitClaude_Variants(t *testing.T) {
	repo := initRepo(t, true)
	dir := evTeam(t, "alpha")
	settings := filepath.Join(repo, ".claude", "settings.local.json")
	tests := []struct {
		name string
		args []string
		has  []string
		not  []string
	}{
		{"shell form", []string{"--credential", "--team", "alpha", "--member", "tm1", "--shell-form"},
			[]string{`"command": "exec '` + initBin + `' hook SessionStart --team alpha --member tm1 --creds /`}, []string{`"args"`}},
		{"lead", []string{"--lead", "--team", "alpha"},
			[]string{`"TeammateIdle"`, `"TaskCreated"`, `"TaskCompleted"`, `"lead"`, `"wait"`}, []string{`"--autonomous"`}},
		{"lead no-wake", []string{"--lead", "--team", "alpha", "--no-wake"},
			[]string{`"TeammateIdle"`}, []string{`"wait"`, `"asyncRewake"`}},
		{"autonomous directed", []string{"--team", "alpha", "--member", "tm1", "--autonomous", "--wake=directed"},
			[]string{`"--autonomous"`, `"--wake=directed"`}, []string{`"TeammateIdle"`}},
		{"wake alone", []string{"--wake"}, []string{`"wait"`}, []string{`"--wake=directed"`, `"--team"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			initOK(t, append(append(tt.args, "--bin", initBin), dir...)...)
			got := readString(t, settings)
			for _, h := range tt.has {
				if !strings.Contains(got, h) {
					t.Errorf("no %s in\n%s", h, got)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(got, n) {
					t.Errorf("%s in\n%s", n, got)
				}
			}
			// Every variant is one generation: no handler of the previous one left.
			inst, err := initclaude.FindInstalled([]byte(got))
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			o := initclaude.Infer(inst)
			for _, g := range initclaude.Handlers(o) {
				want += len(g.Group.Hooks)
			}
			if len(inst) != want {
				t.Errorf("%d handlers, want %d", len(inst), want)
			}
		})
	}
}

func TestInitClaude_DryRunRemoveRoundTrip(t *testing.T) {
	repo := initRepo(t, true)
	dir := evTeam(t, "alpha")
	settings := filepath.Join(repo, ".claude", "settings.local.json")
	os.MkdirAll(filepath.Dir(settings), 0o755)
	orig := "{\n  \"permissions\": {\n    \"allow\": [\"Bash(make)\"]\n  },\n  \"spinnerTipsEnabled\": false\n}\n"
	os.WriteFile(settings, []byte(orig), 0o600)

	r := initOK(t, append([]string{"--team", "alpha", "--member", "tm1", "--bin", initBin, "--dry-run"}, dir...)...)
	if !strings.Contains(r.stdout, "+    \"SessionStart\": [") || !strings.Contains(r.stdout, "@@") {
		t.Errorf("dry run shows no diff:\n%s", r.stdout)
	}
	if readString(t, settings) != orig {
		t.Fatal("--dry-run wrote the file")
	}
	initOK(t, append([]string{"--team", "alpha", "--member", "tm1", "--bin", initBin}, dir...)...)
	if readString(t, settings+initclaude.BackupSuffix) != orig {
		t.Error("no backup of the original")
	}
	r = initOK(t, "--remove", "--dry-run")
	if !strings.Contains(r.stdout, "restore") {
		t.Errorf("dry-run remove: %q", r.stdout)
	}
	r = initOK(t, "--remove", "--json")
	var rep struct {
		Action string `json:"action"`
		Files  []struct{ Path, Action string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("--json: %v: %s", err, r.stdout)
	}
	if rep.Action != "remove" || len(rep.Files) != 1 || rep.Files[0].Action != "restore" {
		t.Errorf("report %+v", rep)
	}
	if readString(t, settings) != orig {
		t.Error("remove did not give the original back")
	}
	if _, err := os.Stat(settings + initclaude.BackupSuffix); err == nil {
		t.Error("backup left")
	}
}

func TestInitClaude_SettingsFileAndPlugin(t *testing.T) {
	repo := initRepo(t, true)
	dir := evTeam(t, "alpha")
	r := initOK(t, append([]string{"--settings", "team/tm1.json", "--team", "alpha", "--member", "tm1", "--bin", initBin}, dir...)...)
	file := filepath.Join(repo, "team", "tm1.json")
	if !strings.Contains(r.stdout, "claude --settings "+file) {
		t.Errorf("no launch line: %q", r.stdout)
	}
	if !strings.Contains(readString(t, file), `"tm1"`) {
		t.Error("identity not baked into --settings FILE")
	}
	if _, err := os.Stat(filepath.Join(repo, ".claude")); err == nil {
		t.Error("--settings FILE changed .claude/")
	}
	out := filepath.Join(t.TempDir(), "plugin")
	r = initOK(t, append([]string{"--scope", "plugin", "--out", out, "--lead", "--team", "alpha"}, dir...)...)
	for _, rel := range []string{initclaude.PluginManifest, initclaude.PluginHooks, initclaude.PluginMCP, initclaude.PluginSkill, initclaude.PluginReadme} {
		if _, err := os.Stat(filepath.Join(out, rel)); err != nil {
			t.Errorf("plugin file %s: %v", rel, err)
		}
	}
	if h := readString(t, filepath.Join(out, initclaude.PluginHooks)); strings.Contains(h, "--team") || !strings.Contains(h, "TeammateIdle") {
		t.Errorf("plugin hooks:\n%s", h)
	}
	if !strings.Contains(r.stdout, "claude --plugin-dir "+out) {
		t.Errorf("no launch line: %q", r.stdout)
	}
	initOK(t, "--scope", "plugin", "--out", out, "--remove")
	if _, err := os.Stat(out); err == nil {
		t.Error("plugin directory left after --remove")
	}
}

func TestInitClaude_MCPClaudeMDSkill(t *testing.T) {
	repo := initRepo(t, true)
	r := initOK(t, "--scope", "project", "--mcp", "--claude-md", "--skill")
	for _, p := range []string{".mcp.json", "CLAUDE.md", ".claude/skills/teambus/SKILL.md", ".claude/settings.json"} {
		if _, err := os.Stat(filepath.Join(repo, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if !strings.Contains(readString(t, filepath.Join(repo, ".mcp.json")), `"mcp"`) {
		t.Error("no MCP entry")
	}
	initOK(t, "--scope", "project", "--remove")
	ents, _ := os.ReadDir(repo)
	for _, e := range ents {
		if e.Name() != ".git" {
			t.Errorf("left after --remove: %s", e.Name())
		}
	}
	r = initOK(t, "--mcp", "--bin", initBin)
	if !strings.Contains(r.stdout, "run: claude mcp add --scope local teambus -- "+initBin+" mcp") {
		t.Errorf("no claude mcp add line: %q", r.stdout)
	}
}

func TestInitClaude_ClaudeVersions(t *testing.T) {
	repo := initRepo(t, false)
	settings := filepath.Join(repo, ".claude", "settings.local.json")
	t.Setenv("TEAMBUS_CLAUDE_VERSION", "2.1.99")
	runCLI(t, "init", "claude", "--bin", initBin).wantError(t, 2, "2.1.99", "--force")
	if _, err := os.Stat(settings); err == nil {
		t.Fatal("written for a Claude Code that ignores the file")
	}
	t.Setenv("TEAMBUS_CLAUDE_VERSION", "2.1.120")
	r := initOK(t, "--bin", initBin)
	got := readString(t, settings)
	if !strings.Contains(got, `"PostToolUse"`) || strings.Contains(got, `"PostToolBatch"`) || !strings.Contains(got, "exec '") {
		t.Errorf("2.1.120: want the shell form and PostToolUse:\n%s", got)
	}
	if !strings.Contains(r.stderr, "warning: ") {
		t.Errorf("no warning for an old Claude Code: %q", r.stderr)
	}
}

func TestInitClaude_UsageErrors(t *testing.T) {
	initRepo(t, false)
	tests := []struct {
		args  []string
		parts []string
	}{
		{[]string{"--team", "alpha"}, []string{"--team and --member go together"}},
		{[]string{"--member", "tm1"}, []string{"--team and --member go together"}},
		{[]string{"--lead"}, []string{"--lead needs --team"}},
		{[]string{"--lead", "--team", "alpha", "--member", "tm1"}, []string{"--lead is member lead"}},
		{[]string{"--scope", "global"}, []string{`invalid --scope "global"`}},
		{[]string{"--scope", "plugin"}, []string{"--out DIR"}},
		{[]string{"--out", "x"}, []string{"--out is for --scope plugin"}},
		{[]string{"--settings", "f.json", "--scope", "user"}, []string{"--settings FILE is a scope of its own"}},
		{[]string{"--check", "--remove"}, []string{"exclude each other"}},
		{[]string{"--wake=sometimes"}, []string{"--wake"}},
		{[]string{"--wake", "--no-wake"}, []string{"exclude each other"}},
		{[]string{"--team", "al pha", "--member", "tm1"}, []string{"invalid team id"}},
		{[]string{"--bin", "/usr/bin/tb"}, []string{"its name must be teambus"}},
		{[]string{"extra"}, []string{"unexpected argument"}},
	}
	for _, tt := range tests {
		runCLI(t, append([]string{"init", "claude"}, tt.args...)...).wantError(t, 2, tt.parts...)
	}
	if ents, _ := os.ReadDir("."); len(ents) != 0 {
		t.Errorf("a refused run wrote %d entries", len(ents))
	}
}

// TestInitClaude_Check: exit 2 missing, 0 current, 1 outdated, with the bus,
// team and member checked on a real node and duplicates reported.
func TestInitClaude_Check(t *testing.T) {
	repo := initRepo(t, true)
	dir := evTeam(t, "alpha")
	// --check wants the handlers' binary to exist.
	initBin := filepath.Join(t.TempDir(), "teambus")
	if err := os.WriteFile(initBin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	check := func(args ...string) (result, map[string]any) {
		t.Helper()
		r := runCLI(t, append(append([]string{"init", "claude", "--credential", "--check", "--json", "--bin", initBin}, dir...), args...)...)
		var rep map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("--check --json: %v\n%s\n%s", err, r.stdout, r.stderr)
		}
		return r, rep
	}
	r, rep := check()
	if r.code != 2 || rep["status"] != "missing" {
		t.Errorf("nothing installed: exit %d, status %v", r.code, rep["status"])
	}
	initOK(t, append([]string{"--credential", "--team", "alpha", "--member", "tm1", "--bin", initBin}, dir...)...)
	r, rep = check()
	if r.code != 0 || rep["status"] != "current" {
		t.Errorf("installed: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	bus, _ := rep["bus"].(map[string]any)
	if bus["answers"] != true || bus["team_exists"] != true || bus["member_exists"] != true || bus["member"] != "tm1" {
		t.Errorf("bus part %v", bus)
	}
	// A member that does not exist: the hooks would not bind (exit 2).
	if r, rep = check("--team", "alpha", "--member", "tm9"); r.code != 2 || !strings.Contains(r.stdout, "tm9") || !strings.Contains(rep["problem"].(string), "no member tm9") {
		t.Errorf("other member: exit %d, %s", r.code, r.stdout)
	}
	// A handler changed by hand: outdated.
	settings := filepath.Join(repo, ".claude", "settings.local.json")
	data := readString(t, settings)
	os.WriteFile(settings, []byte(strings.Replace(data, `"timeout": 15`, `"timeout": 60`, 1)), 0o644)
	if r, rep = check(); r.code != 1 || rep["status"] != "outdated" || !strings.Contains(r.stderr, "SessionStart") {
		t.Errorf("edited: exit %d, status %v, stderr %q", r.code, rep["status"], r.stderr)
	}
	os.WriteFile(settings, []byte(data), 0o644)
	// The same hooks also in the project settings and a plugin:
	// duplicates. Those take the credential from TEAMBUS_CREDS.
	t.Setenv("TEAMBUS_CREDS", credsFile("alpha", "tm1"))
	initOK(t, "--credential", "--scope", "project")
	out := filepath.Join(t.TempDir(), "plugin")
	initOK(t, "--credential", "--scope", "plugin", "--out", out)
	r, rep = check("--scope", "plugin", "--out", out)
	warns, _ := json.Marshal(rep["warnings"])
	if r.code != 0 || !bytes.Contains(warns, []byte("differ")) || !bytes.Contains(warns, []byte("both fire")) {
		t.Errorf("duplicates: exit %d, warnings %s", r.code, warns)
	}
	// Text output lists every location.
	r = runCLI(t, append([]string{"init", "claude", "--credential", "--check", "--bin", initBin}, dir...)...)
	for _, want := range []string{"user ", "project ", "local ", "current", "bus      answers; team alpha exists; member tm1 exists"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("text check lacks %q:\n%s", want, r.stdout)
		}
	}
	// The binary the hooks run is gone: outdated.
	os.Remove(initBin)
	if r, rep = check("--scope", "local"); r.code != 1 || !strings.Contains(r.stderr, "not an executable file") {
		t.Errorf("binary gone: exit %d, stderr %q", r.code, r.stderr)
	}
}
