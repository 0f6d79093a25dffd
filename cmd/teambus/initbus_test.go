package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestInitClaude_TypoWarnsAndCheckFails: on a real node, token handlers
// (the default, token handlers) for a team or member that is not there warn and are
// still written (the team may be created next), while an install with a
// credential refuses (it can not issue one: see
// TestInitClaude_IssuesAndReusesCredential); --check exits 2 naming the
// team or member that is missing, 1 while the bus does not answer, and 0
// once the identity is right.
func TestInitClaude_TypoWarnsAndCheckFails(t *testing.T) {
	initRepo(t, true)
	dir := evTeam(t, "alpha")
	bin := filepath.Join(t.TempDir(), "teambus")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	install := func(args ...string) result {
		t.Helper()
		return initOK(t, append(append([]string{"--bin", bin}, dir...), args...)...)
	}
	check := func(dir []string, args ...string) (result, map[string]any) {
		t.Helper()
		r := runCLI(t, append(append([]string{"init", "claude", "--check", "--json", "--bin", bin, "--timeout", "2s"}, dir...), args...)...)
		var rep map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("--check --json: %v\n%s\n%s", err, r.stdout, r.stderr)
		}
		return r, rep
	}

	r := install("--team", "nosuch", "--member", "ghost")
	if !strings.Contains(r.stderr, "team nosuch is not on the bus") {
		t.Errorf("install for a team that does not exist: no warning; stderr %q", r.stderr)
	}
	r = install("--team", "alpha", "--member", "ghost")
	if !strings.Contains(r.stderr, "team alpha has no member ghost") {
		t.Errorf("install for a member that does not exist: no warning; stderr %q", r.stderr)
	}

	r = install("--team", "alpha", "--member", "tm1")
	if strings.Contains(r.stderr, "not on the bus") || strings.Contains(r.stderr, "has no member") {
		t.Errorf("install for an existing member warns of the bus: %q", r.stderr)
	}
	r, rep := check(dir)
	if r.code != 0 || rep["status"] != "current" || rep["problem"] != nil {
		t.Errorf("--check, all there: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	r, rep = check(dir, "--team", "nosuch", "--member", "ghost")
	if p, _ := rep["problem"].(string); r.code != 2 || !strings.Contains(p, "team nosuch is not on the bus") {
		t.Errorf("--check, team missing: exit %d, problem %q", r.code, p)
	}
	r = runCLI(t, append([]string{"init", "claude", "--check", "--bin", bin, "--team", "nosuch", "--member", "ghost"}, dir...)...)
	if r.code != 2 || strings.Contains(r.stdout, "status   current\n") {
		t.Errorf("--check text, team missing: exit %d, stdout %q", r.code, r.stdout)
	}
	if r, rep = check(dir, "--team", "alpha", "--member", "ghost"); r.code != 2 || !strings.Contains(rep["problem"].(string), "no member ghost") {
		t.Errorf("--check, member missing: exit %d, %v", r.code, rep["problem"])
	}
	// No bus at all where the check looks: transient, exit 1.
	if r, rep = check([]string{"--server", "nats://127.0.0.1:1"}); r.code != 1 || !strings.Contains(rep["problem"].(string), "does not answer") {
		t.Errorf("--check, no bus: exit %d, %v", r.code, rep["problem"])
	}
}

// TestInitClaude_BakesBusLocation: a local install of token handlers
// (the default, token handlers) with an identity bakes the state directory it was run
// with into every handler (--bus), never a secret; --check reads it back
// as current but refuses it (the sessions would hold the node token); with
// --server the URL is baked without its user and password.
func TestInitClaude_BakesBusLocation(t *testing.T) {
	repo := initRepo(t, true)
	dir := evTeam(t, "alpha")
	bin := filepath.Join(t.TempDir(), "teambus")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	initOK(t, append([]string{"--bin", bin, "--team", "alpha", "--member", "tm1"}, dir...)...)
	settings := readString(t, filepath.Join(repo, ".claude", "settings.local.json"))
	if n, want := strings.Count(settings, `"--bus",`+"\n"), strings.Count(settings, `"hook",`); n == 0 || n != want {
		t.Errorf("%d of %d handlers carry --bus:\n%s", n, want, settings)
	}
	if !strings.Contains(settings, `"`+dir[1]+`"`) {
		t.Errorf("the state directory %s is not baked:\n%s", dir[1], settings)
	}
	r := runCLI(t, append([]string{"init", "claude", "--check", "--bin", bin}, dir...)...)
	if r.code != 0 || !strings.Contains(r.stdout, "current (10 handlers)") || !strings.Contains(r.stdout, "uses the node token") || !strings.Contains(r.stderr, "with --credential") {
		t.Errorf("--check after install: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// The project scope bakes nothing: --check names the terminals that
	// would miss this bus.
	initOK(t, append([]string{"--scope", "project", "--bin", bin}, dir...)...)
	r = runCLI(t, append([]string{"init", "claude", "--check", "--bin", bin}, dir...)...)
	if !strings.Contains(r.stderr, "carry no bus location: a claude started from a terminal without TEAMBUS_DIR or TEAMBUS_SERVER naming "+dir[1]) ||
		!strings.Contains(r.stdout, "bus of the terminal") || !strings.Contains(r.stdout, "bus "+dir[1]) {
		t.Errorf("--check does not say which terminals miss the bus:\n%s\n%s", r.stdout, r.stderr)
	}
	// A URL: baked without its credentials.
	set := filepath.Join(t.TempDir(), "tm1.json")
	r = runCLI(t, "init", "claude", "--settings", set, "--bin", bin, "--team", "alpha", "--member", "tm1",
		"--server", "nats://op:s3cret@127.0.0.1:1", "--timeout", "1s")
	got := readString(t, set)
	if strings.Contains(got, "s3cret") || !strings.Contains(got, `"nats://127.0.0.1:1"`) {
		t.Errorf("--server baked as:\n%s", got)
	}
}

// TestHook_BakedBusReachesTheBus: a handler with --bus reaches the node in
// that directory from a terminal that sets no TEAMBUS_DIR, and
// TEAMBUS_DIR, when set, wins over it.
func TestHook_BakedBusReachesTheBus(t *testing.T) {
	dir := evTeam(t, "alpha")
	claude := startSleeper(t)
	t.Setenv("CLAUDE_PID", claude)
	t.Setenv("TEAMBUS_NO_SIDECAR", "1")
	t.Setenv("TEAMBUS_TEAM", "")
	t.Setenv("TEAMBUS_MEMBER", "")
	t.Setenv("HOME", t.TempDir())
	payload := filepath.Join(t.TempDir(), "start.json")
	if err := os.WriteFile(payload, []byte(`{"session_id":"5f0c3a52-1e2b-4d0e-9a51-3c1f6f0e8b11","cwd":"/","hook_event_name":"SessionStart","source":"startup"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	hook := []string{"hook", "SessionStart", "--team", "alpha", "--member", "tm1", "--bus", dir[1], "--payload", payload}
	t.Setenv("TEAMBUS_DIR", "")
	os.Unsetenv("TEAMBUS_DIR")
	if r := runCLI(t, hook...); r.code != 0 || !strings.Contains(r.stdout, "this session is member tm1 of team alpha") {
		t.Fatalf("hook with --bus, no TEAMBUS_DIR: exit %d, stdout %q", r.code, r.stdout)
	}
	// TEAMBUS_DIR names another (empty) directory: it wins, no bus there.
	t.Setenv("TEAMBUS_DIR", t.TempDir())
	if r := runCLI(t, hook...); strings.Contains(r.stdout, "this session is member") {
		t.Fatalf("TEAMBUS_DIR did not win over --bus: %q", r.stdout)
	}
}

// startSleeper starts a stand-in agent process and returns its pid.
func startSleeper(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return strconv.Itoa(cmd.Process.Pid)
}
