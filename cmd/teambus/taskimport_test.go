package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/teambus/teambus/node/nodetest"
)

func TestTaskAddFrom(t *testing.T) {
	n := nodetest.NewServer(t)
	dir := []string{"--dir", n.Dir()}
	if r := runCLI(t, append([]string{"team", "create", "alpha", "--member", "tm1"}, dir...)...); r.code != 0 {
		t.Fatalf("team create: %d %s", r.code, r.stderr)
	}
	file := filepath.Join(t.TempDir(), "tasks.jsonl")
	write := func(lines ...string) {
		if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"id":"a","desc":"first"}`, `{"id":"b","desc":"second","deps":["a"]}`, `{"id":"c","deps":["zz"]}`)
	runCLI(t, append([]string{"task", "add", "--team", "alpha", "--from", file}, dir...)...).wantError(t, 2, "line 3", "zz")
	runCLI(t, append([]string{"task", "add", "x", "--team", "alpha", "--from", file}, dir...)...).wantError(t, 2, "no ID argument")
	runCLI(t, append([]string{"task", "add", "--team", "alpha", "--from", file, "--desc", "d"}, dir...)...).wantError(t, 2, "--desc with --from")
	runCLI(t, append([]string{"task", "add", "--team", "alpha", "--from", file + ".missing"}, dir...)...).wantError(t, 2, "no such file")
	if r := runCLI(t, append([]string{"task", "list", "--team", "alpha", "--json"}, dir...)...); r.code != 0 || strings.Contains(r.stdout, `"a"`) {
		t.Fatalf("tasks after refused imports: %d %q", r.code, r.stdout)
	}

	write(`{"id":"a","desc":"first"}`, `{"id":"b","desc":"second","deps":["a"]}`)
	r := runCLI(t, append([]string{"task", "add", "--team", "alpha", "--from", file}, dir...)...)
	if r.code != 0 || r.stdout != "imported 2 task(s) into team alpha (0 already there)\n" {
		t.Fatalf("import: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runTestStdin(t, strings.Join([]string{`{"id":"a","desc":"first"}`, `{"id":"c","deps":["b"]}`}, "\n"),
		append([]string{"task", "add", "--team", "alpha", "--from", "-", "--json"}, dir...)...)
	if r.code != 0 || !strings.Contains(r.stdout, `"added": 1`) || !strings.Contains(r.stdout, `"existing": 1`) {
		t.Fatalf("import from stdin: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}
