package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/node/credstore"
)

// credsFile is where init claude keeps member's credential of team for
// the HOME of initRepo.
func credsFile(team, member string) string {
	return filepath.Join(os.Getenv("HOME"), ".config", "teambus", "creds", team, member+".creds")
}

// nodeToken is the node token of the node in dir.
func nodeToken(t *testing.T, dir string) string {
	t.Helper()
	d, err := bus.ReadDiscovery(dir)
	if err != nil || d.Token == "" {
		t.Fatalf("discovery of %s: %v", dir, err)
	}
	return d.Token
}

// accepted asks the node in dir (as the operator) whether it accepts the
// credential file at path.
func accepted(t *testing.T, dir, path string) bool {
	t.Helper()
	cr, ok, err := bus.ReadCreds(path)
	if err != nil || !ok {
		t.Fatalf("read %s: ok %t, %v", path, ok, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, err := bus.Connect(ctx, bus.ConnectConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ok, err = credstore.Accepts(ctx, conn, cr)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// fakeBin is an executable named teambus for --bin (--check wants it to
// exist).
func fakeBin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "teambus")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestInitClaude_IssuesAndReusesCredential: on a real node, an install
// with an identity issues the member's credential into
// ~/.config/teambus/creds/<team>/<member>.creds (0600 in 0700 directories)
// and bakes its path, never the token or the password, into every
// handler; a rerun reuses it byte for byte; a revoked, exposed, damaged or
// moved-bus credential is issued anew with the reason; a team or member
// that is not there, or a bus that does not answer, writes nothing.
func TestInitClaude_IssuesAndReusesCredential(t *testing.T) {
	repo := initRepo(t, true)
	dir := evTeam(t, "alpha")
	settings := filepath.Join(repo, ".claude", "settings.local.json")
	install := func(args ...string) result {
		t.Helper()
		return initOK(t, append(append([]string{"--credential", "--bin", initBin}, dir...), args...)...)
	}
	path := credsFile("alpha", "tm1")

	r := install("--team", "alpha", "--member", "tm1")
	if !strings.Contains(r.stdout, "issued    "+path) || !strings.Contains(r.stdout, "the handlers name it") {
		t.Errorf("install: %q", r.stdout)
	}
	if m := mode(t, path); m != 0o600 {
		t.Errorf("credential file mode %04o, want 0600", m)
	}
	for _, d := range []string{filepath.Dir(path), filepath.Dir(filepath.Dir(path)), filepath.Dir(filepath.Dir(filepath.Dir(path)))} {
		if m := mode(t, d); m != 0o700 {
			t.Errorf("%s: mode %04o, want 0700", d, m)
		}
	}
	if !accepted(t, dir[1], path) {
		t.Fatal("the node does not accept the credential init issued")
	}
	cr, _, _ := bus.ReadCreds(path)
	got := readString(t, settings)
	if n, want := strings.Count(got, `"--creds",`+"\n"), strings.Count(got, `"hook",`); n == 0 || n != want {
		t.Errorf("%d of %d handlers carry --creds:\n%s", n, want, got)
	}
	for _, secret := range []string{nodeToken(t, dir[1]), cr.Password} {
		if strings.Contains(got, secret) {
			t.Fatalf("a secret is in the settings file:\n%s", got)
		}
	}
	if !strings.Contains(got, `"`+path+`"`) || strings.Contains(got, `"--bus"`) {
		t.Errorf("settings do not name the credential file (or bake the bus directory):\n%s", got)
	}
	first, firstCreds := got, readString(t, path)

	// Rerun: the same credential, the same file.
	r = install("--team", "alpha", "--member", "tm1")
	if !strings.Contains(r.stdout, "reused    "+path) || !strings.Contains(r.stdout, "unchanged") {
		t.Errorf("rerun: %q", r.stdout)
	}
	if readString(t, path) != firstCreds || readString(t, settings) != first {
		t.Error("rerun changed the credential or the settings")
	}

	// Not reusable: issued again, saying why, and accepted again.
	reissue := []struct {
		name, why string
		spoil     func()
	}{
		{"revoked", "no longer accepts it", func() {
			if r := runCLI(t, append([]string{"team", "creds", "alpha", "--member", "tm1", "--revoke"}, dir...)...); r.code != 0 {
				t.Fatalf("revoke: %s", r.stderr)
			}
		}},
		{"exposed", "other users may read it", func() { os.Chmod(path, 0o644) }},
		{"damaged", "damaged", func() { os.WriteFile(path, []byte(`{"kind":"teambus-member-credentials","team":"alpha"}`), 0o600) }},
		{"another bus", "it names the bus nats://127.0.0.1:1", func() {
			c, _, _ := bus.ReadCreds(path)
			c.Servers = []string{"nats://127.0.0.1:1"}
			if err := bus.WriteCreds(path, c); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range reissue {
		before := readString(t, path)
		tt.spoil()
		r = install("--team", "alpha", "--member", "tm1")
		if !strings.Contains(r.stdout, "reissued  "+path) || !strings.Contains(r.stdout, tt.why) || !strings.Contains(r.stderr, "issued a new credential") {
			t.Errorf("%s: stdout %q stderr %q", tt.name, r.stdout, r.stderr)
		}
		if readString(t, path) == before || mode(t, path) != 0o600 || !accepted(t, dir[1], path) {
			t.Errorf("%s: the credential was not issued anew", tt.name)
		}
		if readString(t, settings) != first {
			t.Errorf("%s: the handlers changed", tt.name)
		}
	}

	// The lead: its own credential.
	r = install("--lead", "--team", "alpha")
	lead := credsFile("alpha", "lead")
	if !strings.Contains(r.stdout, "issued    "+lead) || !accepted(t, dir[1], lead) || !strings.Contains(readString(t, settings), `"`+lead+`"`) {
		t.Errorf("--lead: %q", r.stdout)
	}

	// Nothing written for a team or member that is not there, nor while
	// the bus does not answer.
	os.Remove(settings)
	for _, tt := range []struct {
		args  []string
		code  int
		parts []string
	}{
		{append([]string{"--team", "nosuch", "--member", "tm1"}, dir...), 2, []string{"team nosuch is not on the bus", "teambus team create nosuch", "nothing was written"}},
		{append([]string{"--team", "alpha", "--member", "ghost"}, dir...), 2, []string{"team alpha has no member ghost", "nothing was written"}},
		{[]string{"--team", "alpha", "--member", "tm2", "--dir", t.TempDir(), "--timeout", "2s"}, 1, []string{"the bus does not answer", "nothing was written"}},
	} {
		r := runCLI(t, append([]string{"init", "claude", "--credential", "--bin", initBin}, tt.args...)...)
		r.wantError(t, tt.code, tt.parts...)
		if _, err := os.Stat(settings); err == nil {
			t.Errorf("%v: settings written", tt.args)
		}
	}
	for _, m := range []string{"ghost", "tm2"} {
		if _, err := os.Stat(credsFile("alpha", m)); err == nil {
			t.Errorf("a credential file for %s was written", m)
		}
	}
	if _, err := os.Stat(filepath.Dir(credsFile("nosuch", "tm1"))); err == nil {
		t.Error("a credentials directory for team nosuch was made")
	}

	// XDG_CONFIG_HOME moves the directory; the dry run issues nothing.
	xdg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", xdg)
	r = install("--team", "alpha", "--member", "tm2", "--dry-run")
	want := filepath.Join(xdg, "teambus", "creds", "alpha", "tm2.creds")
	if !strings.Contains(r.stdout, "would issue "+want) {
		t.Errorf("dry run: %q", r.stdout)
	}
	if _, err := os.Stat(want); err == nil {
		t.Error("--dry-run issued a credential")
	}
	install("--team", "alpha", "--member", "tm2")
	if !accepted(t, dir[1], want) {
		t.Error("XDG_CONFIG_HOME: no credential there")
	}
	// Inside the repository: refused.
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(repo, "cfg"))
	runCLI(t, append([]string{"init", "claude", "--credential", "--bin", initBin, "--team", "alpha", "--member", "tm2"}, dir...)...).wantError(t, 2, "inside the repository")
}

// TestInitClaude_ProjectScopeCredsFromEnv: the shared project settings
// name no credential and no per-user path; the operator's install issues
// the member's file and prints how to start claude with it; --check
// refuses (exit 2, with the fix) while TEAMBUS_CREDS is not set, and
// reports the credential of the environment once it is.
func TestInitClaude_ProjectScopeCredsFromEnv(t *testing.T) {
	repo := initRepo(t, true)
	dir := evTeam(t, "alpha")
	r := initOK(t, append([]string{"--credential", "--scope", "project", "--team", "alpha", "--member", "tm2"}, dir...)...)
	path := credsFile("alpha", "tm2")
	if !strings.Contains(r.stdout, "TEAMBUS_CREDS="+path+" TEAMBUS_TEAM=alpha TEAMBUS_MEMBER=tm2 claude") || !strings.Contains(r.stdout, "sessions take it from TEAMBUS_CREDS") {
		t.Errorf("launch line: %q", r.stdout)
	}
	if !accepted(t, dir[1], path) {
		t.Fatal("no credential issued")
	}
	shared := readString(t, filepath.Join(repo, ".claude", "settings.json"))
	if strings.Contains(shared, "--creds") || strings.Contains(shared, os.Getenv("HOME")) || strings.Contains(shared, "--team") {
		t.Errorf("the shared settings name a credential, a home or an identity:\n%s", shared)
	}
	check := func() (result, map[string]any) {
		t.Helper()
		r := runCLI(t, append([]string{"init", "claude", "--credential", "--check", "--json", "--scope", "project"}, dir...)...)
		var rep map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("--check --json: %v\n%s\n%s", err, r.stdout, r.stderr)
		}
		return r, rep
	}
	r, rep := check()
	if p, _ := rep["problem"].(string); r.code != 2 || !strings.Contains(p, "TEAMBUS_CREDS is not set") || !strings.Contains(p, "node token") || !strings.Contains(p, "teambus init claude --credential --scope project --team <team> --member <member>") {
		t.Errorf("--check without TEAMBUS_CREDS: exit %d, problem %q", r.code, p)
	}
	t.Setenv("TEAMBUS_CREDS", path)
	r, rep = check()
	if r.code != 0 {
		t.Fatalf("--check with TEAMBUS_CREDS: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	u := credentialOf(t, rep, "project")
	if u["source"] != "env" || u["path"] != path || u["team"] != "alpha" || u["member"] != "tm2" {
		t.Errorf("project credential %v", u)
	}
	// The text names it too.
	r = runCLI(t, append([]string{"init", "claude", "--credential", "--check", "--scope", "project"}, dir...)...)
	if !strings.Contains(r.stdout, "uses TEAMBUS_CREDS of the environment: "+path+" (alpha/tm2)") {
		t.Errorf("text check:\n%s", r.stdout)
	}
}

// credentialOf is the credential --check --json reports for scope.
func credentialOf(t *testing.T, rep map[string]any, scope string) map[string]any {
	t.Helper()
	locs, _ := rep["locations"].([]any)
	for _, l := range locs {
		l, _ := l.(map[string]any)
		if l["scope"] == scope {
			u, _ := l["credential"].(map[string]any)
			return u
		}
	}
	t.Fatalf("no location %s in %v", scope, rep["locations"])
	return nil
}

// TestInitClaude_CheckRefusesTheToken: --check reports which credential
// the handlers use, and refuses (exit 2, with the command that mends it)
// token handlers, a token in the settings' "env", a secret on a handler's
// command line, a credential file that is gone and one the node no longer
// accepts.
func TestInitClaude_CheckRefusesTheToken(t *testing.T) {
	repo := initRepo(t, true)
	dir := evTeam(t, "alpha")
	bin := fakeBin(t)
	settings := filepath.Join(repo, ".claude", "settings.local.json")
	path := credsFile("alpha", "tm1")
	check := func() (result, map[string]any) {
		t.Helper()
		r := runCLI(t, append([]string{"init", "claude", "--credential", "--check", "--json", "--bin", bin}, dir...)...)
		var rep map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("--check --json: %v\n%s\n%s", err, r.stdout, r.stderr)
		}
		return r, rep
	}
	refused := func(name string, parts ...string) {
		t.Helper()
		r, rep := check()
		p, _ := rep["problem"].(string)
		if r.code != 2 {
			t.Errorf("%s: exit %d, want 2 (problem %q)", name, r.code, p)
		}
		for _, part := range parts {
			if !strings.Contains(p, part) {
				t.Errorf("%s: problem %q lacks %q", name, p, part)
			}
		}
	}

	initOK(t, append([]string{"--bin", bin, "--team", "alpha", "--member", "tm1"}, dir...)...)
	if strings.Contains(readString(t, settings), "--creds") {
		t.Fatal("an install without --credential baked a credential")
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("an install without --credential issued a credential")
	}
	refused("token handlers", "act as alpha/tm1 with the node token", "fix: `teambus init claude --credential --team alpha --member tm1 --dir "+dir[1]+"`")
	_, rep := check()
	if u := credentialOf(t, rep, "local"); u["source"] != "token" {
		t.Errorf("token handlers reported as %v", u)
	}

	// The fix, then the check passes and names the credential.
	initOK(t, append([]string{"--credential", "--bin", bin, "--team", "alpha", "--member", "tm1"}, dir...)...)
	r, rep := check()
	if r.code != 0 {
		t.Fatalf("credential handlers: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if u := credentialOf(t, rep, "local"); u["source"] != "creds" || u["path"] != path || u["team"] != "alpha" || u["member"] != "tm1" {
		t.Errorf("credential handlers reported as %v", u)
	}
	good := readString(t, settings)

	// The token in the settings' env.
	var doc map[string]any
	json.Unmarshal([]byte(good), &doc)
	doc["env"] = map[string]any{"TEAMBUS_TOKEN": nodeToken(t, dir[1])}
	b, _ := json.MarshalIndent(doc, "", "  ")
	os.WriteFile(settings, b, 0o600)
	refused("env token", `sets TEAMBUS_TOKEN in "env"`, `delete "TEAMBUS_TOKEN" from "env" in `+settings)

	// A token on a handler's command line.
	os.WriteFile(settings, []byte(strings.Replace(good, `"SessionStart",`, `"SessionStart", "--token", "x",`, 1)), 0o600)
	refused("argv token", "secret on its command line (--token)")

	// The credential file gone; then revoked.
	os.WriteFile(settings, []byte(good), 0o600)
	os.Rename(path, path+".away")
	refused("file gone", "can not be read", "teambus init claude --credential --team alpha --member tm1")
	os.Rename(path+".away", path)
	runCLI(t, append([]string{"team", "creds", "alpha", "--member", "tm1", "--revoke"}, dir...)...)
	refused("revoked", "the node does not accept the credential "+path)
	initOK(t, append([]string{"--credential", "--bin", bin, "--team", "alpha", "--member", "tm1"}, dir...)...)
	if r, _ := check(); r.code != 0 {
		t.Errorf("after the fix: exit %d %s", r.code, r.stderr)
	}

	// The token exported in the terminal claude would start from.
	t.Setenv("TEAMBUS_TOKEN", nodeToken(t, dir[1]))
	refused("token in the environment", "TEAMBUS_TOKEN is set in this environment", "unset TEAMBUS_TOKEN")
}

// TestInitClaude_RemoveKeepsOrRevokes: --remove keeps the credential file
// and the node's record; --remove --revoke revokes it on the node and
// deletes the file (--dry-run only says so).
func TestInitClaude_RemoveKeepsOrRevokes(t *testing.T) {
	repo := initRepo(t, true)
	dir := evTeam(t, "alpha")
	settings := filepath.Join(repo, ".claude", "settings.local.json")
	path := credsFile("alpha", "tm1")
	install := append([]string{"--credential", "--bin", initBin, "--team", "alpha", "--member", "tm1"}, dir...)
	initOK(t, install...)
	r := initOK(t, append([]string{"--remove"}, dir...)...)
	if !strings.Contains(r.stdout, "kept      "+path) {
		t.Errorf("remove: %q", r.stdout)
	}
	if _, err := os.Stat(settings); err == nil || !accepted(t, dir[1], path) {
		t.Fatal("--remove left the handlers or took the credential")
	}
	initOK(t, install...)
	before := readString(t, path)
	r = initOK(t, append([]string{"--remove", "--revoke", "--dry-run"}, dir...)...)
	if !strings.Contains(r.stdout, "would revoke "+path) || readString(t, path) != before || !accepted(t, dir[1], path) {
		t.Errorf("dry run: %q", r.stdout)
	}
	r = initOK(t, append([]string{"--remove", "--revoke"}, dir...)...)
	if !strings.Contains(r.stdout, "revoked   "+path) {
		t.Errorf("--revoke: %q", r.stdout)
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("--revoke left the file")
	}
	if _, err := os.Stat(settings); err == nil {
		t.Error("--revoke left the handlers")
	}
	if !strings.Contains(before, `"password"`) {
		t.Fatal("not a credential")
	}
	os.WriteFile(filepath.Join(t.TempDir(), "x"), nil, 0o600)
	tmp := filepath.Join(t.TempDir(), "old.creds")
	os.WriteFile(tmp, []byte(before), 0o600)
	if accepted(t, dir[1], tmp) {
		t.Error("the node still accepts the revoked credential")
	}
	runCLI(t, "init", "claude", "--revoke").wantError(t, 2, "--revoke goes with --remove")
	runCLI(t, append([]string{"init", "claude", "--remove", "--revoke"}, dir...)...).wantError(t, 2, "--revoke needs the member")
}

// TestInitClaude_MemberWithoutTokenReusesHandedOutCredential: on a shared
// bus a member has no node token: the credential the operator issued
// (`team creds --out`), put at its place, is reused after a connection
// with it succeeds; one the node refuses is refused (exit 2); with no file
// the error says where to put it (exit 1); nothing is written either way.
func TestInitClaude_MemberWithoutTokenReusesHandedOutCredential(t *testing.T) {
	repo := initRepo(t, true)
	dir := evTeam(t, "alpha")
	settings := filepath.Join(repo, ".claude", "settings.local.json")
	bin := fakeBin(t)
	noToken := []string{"--bin", bin, "--dir", t.TempDir(), "--timeout", "3s", "--team", "alpha", "--member", "tm1"}
	path := credsFile("alpha", "tm1")

	r := runCLI(t, append([]string{"init", "claude", "--credential"}, noToken...)...)
	r.wantError(t, 1, "the bus does not answer as the operator", "teambus team creds alpha --member tm1 --out FILE", path)
	if _, err := os.Stat(settings); err == nil {
		t.Fatal("settings written without a credential")
	}

	// The operator hands the file out; the member puts it in place.
	os.MkdirAll(filepath.Dir(path), 0o700)
	if r := runCLI(t, append([]string{"team", "creds", "alpha", "--member", "tm1", "--out", path}, dir...)...); r.code != 0 {
		t.Fatal(r.stderr)
	}
	r = initOK(t, append([]string{"--credential"}, noToken...)...)
	if !strings.Contains(r.stdout, "reused    "+path) || !strings.Contains(r.stdout, "checked by connecting with it") {
		t.Errorf("member install: %q", r.stdout)
	}
	if !strings.Contains(readString(t, settings), `"`+path+`"`) {
		t.Error("the handlers do not name the credential")
	}

	// --check without the token: asked with the credential.
	noTokenCheck := []string{"init", "claude", "--credential", "--check", "--json", "--bin", bin, "--dir", noToken[3], "--timeout", "3s"}
	r = runCLI(t, noTokenCheck...)
	if r.code != 0 || !strings.Contains(r.stdout, "checked with the credential "+path) {
		t.Errorf("member --check: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	runCLI(t, append([]string{"team", "creds", "alpha", "--member", "tm1", "--revoke"}, dir...)...)
	r = runCLI(t, noTokenCheck...)
	if !strings.Contains(r.stdout, "the node refuses the credential "+path) || r.code != 2 {
		t.Errorf("member --check, revoked: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	os.Remove(settings)
	runCLI(t, append([]string{"init", "claude", "--credential"}, noToken...)...).wantError(t, 2, "the node refuses the credential "+path, "ask the operator")
	if _, err := os.Stat(settings); err == nil {
		t.Fatal("settings written with a refused credential")
	}
}

// TestInitClaude_CheckRefusesTokenMCP: a teambus MCP server registered
// with an identity but no credential (as init registered it before
// credentials) would run in the session with the node token: --check
// exits 2 with the fix; registered with the credential, it is reported.
func TestInitClaude_CheckRefusesTokenMCP(t *testing.T) {
	initRepo(t, true)
	dir := evTeam(t, "alpha")
	bin := fakeBin(t)
	initOK(t, append([]string{"--credential", "--bin", bin, "--team", "alpha", "--member", "tm1"}, dir...)...)
	state := filepath.Join(os.Getenv("HOME"), ".claude.json")
	register := func(args ...string) {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"teambus": map[string]any{"command": bin, "args": args}}})
		if err := os.WriteFile(state, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	check := func() (result, map[string]any) {
		t.Helper()
		r := runCLI(t, append([]string{"init", "claude", "--credential", "--check", "--json", "--bin", bin}, dir...)...)
		var rep map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("--check --json: %v\n%s\n%s", err, r.stdout, r.stderr)
		}
		return r, rep
	}
	register("mcp", "--team", "alpha", "--member", "tm1", "--bus", dir[1])
	r, rep := check()
	if p, _ := rep["problem"].(string); r.code != 2 || !strings.Contains(p, "MCP server at the user scope acts as alpha/tm1 with the node token") || !strings.Contains(p, "teambus init claude --credential --team alpha --member tm1 --mcp") {
		t.Errorf("token MCP: exit %d, problem %q", r.code, p)
	}
	path := credsFile("alpha", "tm1")
	register("mcp", "--team", "alpha", "--member", "tm1", "--creds", path)
	r, rep = check()
	mcp, _ := rep["mcp"].([]any)
	if r.code != 0 || len(mcp) != 1 || mcp[0].(map[string]any)["creds"] != path {
		t.Errorf("credential MCP: exit %d, mcp %v, %s", r.code, mcp, r.stderr)
	}
}
