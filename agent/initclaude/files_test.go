package initclaude

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// apply plans and applies one settings install and fails the test on error.
func install(t *testing.T, path string, o Options) Change {
	t.Helper()
	c, err := PlanSettings(path, Handlers(o))
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(c); err != nil {
		t.Fatal(err)
	}
	return c
}

func remove(t *testing.T, path string) Change {
	t.Helper()
	c, err := PlanSettingsRemove(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(c); err != nil {
		t.Fatal(err)
	}
	return c
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func TestSettings_CreatedByTeambusRemovedWhole(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), ".claude", "settings.local.json")
	if c := install(t, path, teammate); c.Action() != Create {
		t.Errorf("first install: %s, want create", c.Action())
	}
	first := read(t, path)
	if c := install(t, path, teammate); c.Action() != Unchanged {
		t.Errorf("second install: %s, want unchanged", c.Action())
	}
	if !bytes.Equal(read(t, path), first) {
		t.Error("second install changed the bytes")
	}
	if exists(path + BackupSuffix) {
		t.Error("a backup of a file that did not exist")
	}
	if c := remove(t, path); c.Action() != Delete {
		t.Errorf("remove: %s, want delete", c.Action())
	}
	if exists(path) {
		t.Error("file teambus created is still there")
	}
}

func TestSettings_EditedFileRoundTrip(t *testing.T) {
	t.Parallel()
	orig := read(t, "testdata/merge/odd.in.json") // minified, odd spacing, unicode
	path := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(path, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	install(t, path, teammate)
	if got := read(t, path+BackupSuffix); !bytes.Equal(got, orig) {
		t.Errorf("backup %q, want the original bytes", got)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want the original 0600", fi.Mode().Perm())
	}
	install(t, path, envOnly) // a second write keeps the first backup
	if got := read(t, path+BackupSuffix); !bytes.Equal(got, orig) {
		t.Error("the backup was overwritten")
	}
	if c := remove(t, path); c.Action() != Restore {
		t.Errorf("remove: %s, want restore", c.Action())
	}
	if got := read(t, path); !bytes.Equal(got, orig) {
		t.Errorf("after remove:\n%s\nwant the original:\n%s", got, orig)
	}
	if exists(path + BackupSuffix) {
		t.Error("backup left after an exact restore")
	}
}

// TestSettings_EditedAfterInstall: the user changes the file after init;
// remove keeps every non-teambus value byte for byte.
func TestSettings_EditedAfterInstall(t *testing.T) {
	t.Parallel()
	orig := read(t, "testdata/merge/user-hooks.in.json")
	path := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(path, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	install(t, path, teammate)
	edited := bytes.Replace(read(t, path), []byte(`"model"`), []byte(`"model"`), 1)
	edited = bytes.Replace(edited, []byte("  \"env\": {"), []byte("  \"theme\": \"dark ✓\",\n  \"env\": {"), 1)
	if err := os.WriteFile(path, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	if c := remove(t, path); c.Action() != Update {
		t.Fatalf("remove: %s, want update", c.Action())
	}
	got := read(t, path)
	want := bytes.Replace(orig, []byte("  \"env\": {"), []byte("  \"theme\": \"dark ✓\",\n  \"env\": {"), 1)
	if !bytes.Equal(got, want) {
		t.Errorf("after remove:\n%s", Diff("settings.json", want, got))
	}
	if !exists(path + BackupSuffix) {
		t.Error("backup dropped although the result differs from it")
	}
}

func TestSettings_RefusedFileUntouched(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "settings.json")
	orig := []byte("{\n  // my settings\n  \"model\": \"opus\",\n}\n")
	if err := os.WriteFile(path, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := PlanSettings(path, Handlers(teammate)); err == nil {
		t.Fatal("no error for a file with comments")
	}
	if _, err := PlanSettingsRemove(path); err == nil {
		t.Error("no error removing from a file with comments")
	}
	if !bytes.Equal(read(t, path), orig) || exists(path+BackupSuffix) {
		t.Error("file or backup written")
	}
}

func TestSettings_SymlinkWrittenThrough(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	real := filepath.Join(dir, "dotfiles", "settings.json")
	if err := os.MkdirAll(filepath.Dir(real), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(real, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "settings.json")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	install(t, link, teammate)
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("link replaced by a file (%v)", err)
	}
	if inst, _ := FindInstalled(read(t, real)); len(inst) == 0 {
		t.Error("the link's target has no teambus handlers")
	}
	remove(t, link)
	if got := read(t, real); string(got) != "{}\n" {
		t.Errorf("target after remove %q", got)
	}
}

func TestWriteAtomic_NoTempLeft(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "settings.json")
	for range 3 {
		install(t, path, teammate)
		remove(t, path)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		t.Errorf("left in the directory: %s", e.Name())
	}
}

// gitRun runs git in dir.
func gitRun(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// TestResolve_Worktrees: with one worktree the local scope may bake the
// identity; after `git worktree add` it may not, and a worktree's local
// settings are the repository root's.
func TestResolve_Worktrees(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	ctx := context.Background()
	base := t.TempDir()
	repo := filepath.Join(base, "repo")
	gitRun(t, base, "init", "-q", "repo")
	gitRun(t, repo, "commit", "-q", "--allow-empty", "-m", "init")
	env := Env{Cwd: repo, Home: base, ClaudeDir: filepath.Join(base, ".claude")}
	tg, err := Resolve(ctx, env, ScopeLocal, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if tg.Worktrees != 1 || !tg.MayBake || tg.Settings != filepath.Join(repo, ".claude", "settings.local.json") {
		t.Errorf("one worktree: %+v", tg)
	}
	wt := filepath.Join(base, "wt2")
	gitRun(t, repo, "worktree", "add", "-q", wt)
	for _, cwd := range []string{repo, wt, filepath.Join(wt, ".")} {
		env.Cwd = cwd
		tg, err := Resolve(ctx, env, ScopeLocal, "", "")
		if err != nil {
			t.Fatal(err)
		}
		if tg.Worktrees != 2 || tg.MayBake || tg.Settings != filepath.Join(repo, ".claude", "settings.local.json") {
			t.Errorf("from %s: %+v", cwd, tg)
		}
	}
	env.Cwd = wt
	tg, _ = Resolve(ctx, env, ScopeProject, "", "")
	if tg.Settings != filepath.Join(wt, ".claude", "settings.json") || tg.MayBake {
		t.Errorf("project from the worktree: %+v", tg)
	}
	tg, _ = Resolve(ctx, env, ScopeSettings, "team/tm1.json", "")
	if tg.Settings != filepath.Join(wt, "team", "tm1.json") || !tg.MayBake {
		t.Errorf("--settings: %+v", tg)
	}
	tg, _ = Resolve(ctx, env, ScopeUser, "", "")
	if tg.Settings != filepath.Join(base, ".claude", "settings.json") || tg.MayBake {
		t.Errorf("user: %+v", tg)
	}
	env.Cwd = t.TempDir() // not a repository
	tg, _ = Resolve(ctx, env, ScopeLocal, "", "")
	if tg.Worktrees != 0 || !tg.MayBake || tg.Settings != filepath.Join(env.Cwd, ".claude", "settings.local.json") {
		t.Errorf("outside a repository: %+v", tg)
	}
}

func TestPlugin_LayoutAndRemove(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "teambus-plugin")
	plan, err := PlanInstall(Config{Target: Target{Scope: ScopePlugin, Dir: dir}, Options: Options{Bin: testBin, Team: "alpha", Member: "tm1"}, Version: "v1.4.0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.Apply(); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{PluginManifest, PluginHooks, PluginMCP, PluginSkill, PluginReadme} {
		if !exists(filepath.Join(dir, rel)) {
			t.Errorf("%s missing", rel)
		}
	}
	golden(t, "plugin/plugin.json", read(t, filepath.Join(dir, PluginManifest)))
	golden(t, "plugin/hooks.json", read(t, filepath.Join(dir, PluginHooks)))
	golden(t, "plugin/mcp.json", read(t, filepath.Join(dir, PluginMCP)))
	hooks := string(read(t, filepath.Join(dir, PluginHooks)))
	if strings.Contains(hooks, "--team") || strings.Contains(hooks, testBin) {
		t.Error("plugin hooks carry an identity or an absolute binary")
	}
	again, _ := PlanInstall(Config{Target: Target{Scope: ScopePlugin, Dir: dir}, Options: Options{Bin: "teambus"}, Version: "v1.4.0"})
	for _, c := range again.Changes {
		if c.Action() != Unchanged {
			t.Errorf("second plugin write: %s %s", c.Action(), c.Path)
		}
	}
	rm, err := PlanRemove(Target{Scope: ScopePlugin, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := rm.Apply(); err != nil {
		t.Fatal(err)
	}
	if exists(dir) {
		ents, _ := os.ReadDir(dir)
		t.Errorf("plugin directory left with %d entries", len(ents))
	}
}

func TestPluginVersion(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"v1.2.3": "1.2.3", "1.2.3-rc.1": "1.2.3-rc.1", "dev": "0.0.0-dev", "(devel)": "0.0.0-dev", "v0.0.0-20261124-abcdef": "0.0.0-20261124-abcdef"} {
		if got := PluginVersion(in); got != want {
			t.Errorf("PluginVersion(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestClaudeMD_BlockRoundTrip(t *testing.T) {
	t.Parallel()
	if n := strings.Count(ClaudeMDBlock, "\n"); n > 12 {
		t.Errorf("block has %d lines, at most 12", n)
	}
	for _, orig := range []string{"", "# Project\n\nRules.\n", "no newline at end"} {
		path := filepath.Join(t.TempDir(), "CLAUDE.md")
		if orig != "" {
			os.WriteFile(path, []byte(orig), 0o644)
		}
		c, w, err := PlanClaudeMD(path, false)
		if err != nil || w != "" {
			t.Fatal(err, w)
		}
		Apply(c)
		if c, _, _ := PlanClaudeMD(path, false); c.Action() != Unchanged {
			t.Errorf("%q: second add %s", orig, c.Action())
		}
		c, w, err = PlanClaudeMDRemove(path)
		if err != nil || w != "" {
			t.Fatal(err, w)
		}
		Apply(c)
		got, err := os.ReadFile(path)
		switch {
		case orig == "" && err == nil:
			t.Errorf("CLAUDE.md teambus created left: %q", got)
		case orig != "" && string(got) != orig:
			t.Errorf("after remove %q, want %q", got, orig)
		}
	}
}

func TestOwnedFiles_EditedKept(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	md := filepath.Join(dir, "CLAUDE.md")
	skill := filepath.Join(dir, ".claude", "skills", "teambus", "SKILL.md")
	plan, err := PlanInstall(Config{Target: Target{Scope: ScopeProject, ProjectRoot: dir, Settings: filepath.Join(dir, ".claude", "settings.json"), ClaudeMD: md, Skill: skill},
		Options: envOnly, ClaudeMD: true, Skill: true, MCP: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.Apply(); err != nil {
		t.Fatal(err)
	}
	if !HasMCP(read(t, filepath.Join(dir, ".mcp.json"))) {
		t.Error("no MCP entry")
	}
	os.WriteFile(md, bytes.Replace(read(t, md), []byte("harmless"), []byte("harmless!!"), 1), 0o644)
	os.WriteFile(skill, append(read(t, skill), "my note\n"...), 0o644)
	rm, err := PlanRemove(Target{Scope: ScopeProject, ProjectRoot: dir, Settings: filepath.Join(dir, ".claude", "settings.json"), ClaudeMD: md, Skill: skill})
	if err != nil {
		t.Fatal(err)
	}
	if len(rm.Warnings) != 2 {
		t.Errorf("warnings %q, want two (edited block, edited skill)", rm.Warnings)
	}
	if err := rm.Apply(); err != nil {
		t.Fatal(err)
	}
	if !exists(md) || !exists(skill) {
		t.Error("an edited file was removed")
	}
	for _, p := range []string{filepath.Join(dir, ".mcp.json"), filepath.Join(dir, ".claude", "settings.json")} {
		if exists(p) {
			t.Errorf("%s left", p)
		}
	}
}

func TestMCP_ForeignEntryRefused(t *testing.T) {
	t.Parallel()
	in := []byte(`{"mcpServers":{"teambus":{"command":"node","args":["other.js"]}}}`)
	if _, err := MergeMCP(in, "teambus"); err == nil {
		t.Error("a foreign teambus entry was replaced")
	}
	out, err := RemoveMCP(in, false)
	if err != nil || !bytes.Equal(out, in) {
		t.Errorf("remove touched a foreign entry: %s %v", out, err)
	}
}

func TestCompare(t *testing.T) {
	t.Parallel()
	cur, _ := Merge(nil, Handlers(teammate))
	tests := []struct {
		name string
		data []byte
		want Status
	}{
		{"current", cur, StatusCurrent},
		{"missing", []byte(`{"hooks":{}}`), StatusMissing},
		{"other identity", mustMerge(t, Options{Bin: testBin, Team: "alpha", Member: "tm2"}), StatusOutdated},
		{"old binary", mustMerge(t, Options{Bin: "/old/teambus", Team: "alpha", Member: "tm1"}), StatusOutdated},
		{"no wake", mustMerge(t, Options{Bin: testBin, Team: "alpha", Member: "tm1", Wake: WakeOff}), StatusOutdated},
		{"one handler gone", bytes.Replace(cur, []byte(`"timeout": 15`), []byte(`"timeout": 60`), 1), StatusOutdated},
	}
	for _, tt := range tests {
		got, detail, err := Compare(tt.data, Handlers(teammate))
		if err != nil || got != tt.want {
			t.Errorf("%s: %s (%s), %v; want %s", tt.name, got, detail, err, tt.want)
		}
	}
}

func mustMerge(t *testing.T, o Options) []byte {
	t.Helper()
	b, err := Merge(nil, Handlers(o))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseVersion(t *testing.T) {
	t.Parallel()
	v, ok := ParseVersion("2.1.330 (Claude Code)\n")
	if !ok || v != (Version{2, 1, 330}) {
		t.Fatalf("ParseVersion = %v %t", v, ok)
	}
	if !(Version{2, 1, 100}).Less(MinClaude) || MinClaude.Less(Version{2, 1, 100}) || (Version{2, 1, 214}).Less(PidClaude) {
		t.Error("Less")
	}
	if _, ok := ParseVersion("claude"); ok {
		t.Error("no version parsed as one")
	}
}

func TestDiff(t *testing.T) {
	t.Parallel()
	a := []byte("a\nb\nc\nd\ne\nf\ng\nh\n")
	b := []byte("a\nb\nc\nX\ne\nf\ng\nh\ni\n")
	want := "--- f\n+++ f (after)\n@@ -1,8 +1,9 @@\n a\n b\n c\n-d\n+X\n e\n f\n g\n h\n+i\n"
	if got := Diff("f", a, b); got != want {
		t.Errorf("Diff:\n%s\nwant:\n%s", got, want)
	}
}

// TestApply_FailedWriteLeavesFile: a write that can not complete (the
// directory is read-only) leaves the file as it was and no temporary file.
func TestApply_FailedWriteLeavesFile(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		t.Skip("root writes into read-only directories")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "settings.json")
	orig := []byte("{\"model\": \"opus\"}\n")
	if err := os.WriteFile(path, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := PlanSettings(path, Handlers(teammate))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	if err := Apply(c); err == nil {
		t.Fatal("no error writing into a read-only directory")
	}
	if got := read(t, path); !bytes.Equal(got, orig) {
		t.Errorf("file changed to %q", got)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("%d entries in the directory, want only the file", len(ents))
	}
}

// TestGitIgnored_BeforeTheDirectoryExists: a settings file listed in
// .gitignore is ignored also before its .claude/ directory is created (a
// first install), and one not listed is not.
func TestGitIgnored_BeforeTheDirectoryExists(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	ctx := context.Background()
	base := t.TempDir()
	repo := filepath.Join(base, "repo")
	gitRun(t, base, "init", "-q", "repo")
	if err := os.WriteFile(filepath.Join(repo, ".gitignore"), []byte(".claude/settings.local.json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(repo, ".claude", "settings.local.json")
	if !GitIgnored(ctx, local) {
		t.Errorf("%s is in .gitignore, .claude/ not created yet: reported not ignored", local)
	}
	if GitIgnored(ctx, filepath.Join(repo, ".claude", "settings.json")) {
		t.Errorf("settings.json is not in .gitignore: reported ignored")
	}
	if GitIgnored(ctx, filepath.Join(t.TempDir(), "x", ".claude", "settings.local.json")) {
		t.Errorf("outside a repository: reported ignored")
	}
}
