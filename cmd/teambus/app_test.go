package main

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/urfave/cli/v2"
)

// result is what one in-process run of the app produced.
type result struct {
	code           int
	stdout, stderr string
}

// runTest runs the app in-process with args (without the program name),
// with extra commands added to the tree, and captures its output.
func runTest(t *testing.T, extra []*cli.Command, args ...string) result {
	t.Helper()
	return runTestInput(t, "", extra, args...)
}

// runTestStdin is runCLI with stdin.
func runTestStdin(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return runTestInput(t, stdin, nil, args...)
}

func runTestInput(t *testing.T, stdin string, extra []*cli.Command, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	app := newApp(&stdout, &stderr)
	if len(extra) > 0 {
		app.Commands = append(app.Commands, extra...)
		prepare(app)
	}
	app.Reader = strings.NewReader(stdin)
	ctx := t.Context()
	code := exit(ctx, runApp(ctx, app, append([]string{"teambus"}, args...)), &stderr)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// run is runTest without extra commands.
func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	return runTest(t, nil, args...)
}

// wantUsage checks a usage error: exit 2, nothing on stdout, one line on
// stderr starting with "teambus: " and containing every part.
func (r result) wantError(t *testing.T, code int, parts ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit code %d, want %d (stderr %q)", r.code, code, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout %q, want nothing", r.stdout)
	}
	if !strings.HasPrefix(r.stderr, "teambus: ") || strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") {
		t.Errorf("stderr %q, want one line starting with \"teambus: \"", r.stderr)
	}
	for _, p := range parts {
		if !strings.Contains(r.stderr, p) {
			t.Errorf("stderr %q does not contain %q", r.stderr, p)
		}
	}
}

func TestRun_UsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		args  []string
		parts []string
	}{
		{"unknown root flag", []string{"--bogus"}, []string{"flag provided but not defined: --bogus", "teambus --help"}},
		{"unknown flag", []string{"bus", "status", "--bogus"}, []string{"bus status: flag provided but not defined: --bogus", "`teambus bus status --help`"}},
		{"unknown flag after positional", []string{"bus", "status", "x", "--bogus"}, []string{"--bogus"}},
		{"unknown short flag", []string{"version", "-z"}, []string{"not defined: -z"}},
		{"bad duration", []string{"bus", "status", "--timeout=abc"}, []string{`invalid value "abc" for flag --timeout`}},
		{"bad bool", []string{"version", "--json=maybe"}, []string{`invalid boolean value "maybe" for --json`}},
		{"missing flag value", []string{"bus", "status", "--dir"}, []string{"flag needs an argument: --dir"}},
		{"missing flag value after positional", []string{"bus", "stop", "x", "--dir"}, []string{"flag needs an argument: --dir"}},
		{"zero timeout", []string{"bus", "status", "--timeout", "0s"}, []string{"invalid --timeout 0s"}},
		{"unknown command", []string{"bogus"}, []string{`unknown command "bogus"`, "bus", "version"}},
		{"unknown subcommand", []string{"bus", "bogus"}, []string{`unknown subcommand of bus "bogus"`, "start, status, stop"}},
		{"unknown subcommand with flags", []string{"bus", "bogus", "--json"}, []string{"--json"}},
		{"unexpected argument", []string{"bus", "start", "extra"}, []string{`bus start: unexpected argument "extra"`}},
		{"help for unknown command", []string{"help", "bogus"}, []string{`unknown command "bogus"`}},
		{"help for unknown subcommand", []string{"bus", "bogus", "--help"}, []string{`unknown subcommand of bus "bogus"`}},
		{"bad size", []string{"bus", "start", "--dir", "d", "--max-store", "10XB"}, []string{`invalid --max-store "10XB"`}},
		{"bad log level", []string{"bus", "start", "--dir", "d", "--log-level", "loud"}, []string{`invalid --log-level "loud"`}},
		{"bad sync mode", []string{"bus", "start", "--dir", "d", "--sync", "sometimes"}, []string{`invalid sync mode "sometimes"`}},
		{"remote listen refused", []string{"bus", "start", "--dir", "d", "--listen", "0.0.0.0:4222"}, []string{"loopback"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			runCLI(t, tt.args...).wantError(t, 2, tt.parts...)
		})
	}
}

func TestRun_BadEnvironment(t *testing.T) {
	t.Setenv("TEAMBUS_TIMEOUT", "abc")
	runCLI(t, "bus", "status").wantError(t, 2, "TEAMBUS_TIMEOUT")
}

func TestRun_Help(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args  []string
		parts []string
	}{
		{nil, []string{"COMMANDS:", "bus", "version"}},
		{[]string{"--help"}, []string{"COMMANDS:"}},
		{[]string{"-h"}, []string{"COMMANDS:"}},
		{[]string{"help"}, []string{"COMMANDS:"}},
		{[]string{"bus"}, []string{"teambus bus -", "start", "status", "stop"}},
		{[]string{"bus", "--help"}, []string{"teambus bus -", "start"}},
		{[]string{"help", "bus"}, []string{"teambus bus -", "start"}},
		{[]string{"bus", "start", "--help"}, []string{"teambus bus start -", "--listen", "[$TEAMBUS_LISTEN]", "[$TEAMBUS_DIR]"}},
		{[]string{"help", "bus", "start"}, []string{"teambus bus start -", "[$TEAMBUS_SYNC]"}},
		{[]string{"--help", "bus", "status"}, []string{"teambus bus status -", "[$TEAMBUS_SERVER]", "[$TEAMBUS_TIMEOUT]"}},
		{[]string{"bus", "status", "extra", "-h"}, []string{"teambus bus status -"}},
		{[]string{"bus", "status", "--timeout=abc", "--help"}, []string{"teambus bus status -"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, tt.args...)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("exit %d, stderr %q, want 0 and nothing", r.code, r.stderr)
			}
			for _, p := range tt.parts {
				if !strings.Contains(r.stdout, p) {
					t.Errorf("help does not contain %q:\n%s", p, r.stdout)
				}
			}
		})
	}
}

// TestApp_EveryHelpShowsEnvVars runs --help on every command of the tree
// and checks that each flag is listed with its environment variables.
func TestApp_EveryHelpShowsEnvVars(t *testing.T) {
	t.Parallel()
	app := newApp(nil, nil)
	walkCommands(app.Commands, nil, func(parents []string, c *cli.Command) {
		path := append(append([]string{}, parents...), c.Name)
		t.Run(strings.Join(path, " "), func(t *testing.T) {
			r := runCLI(t, append(path, "--help")...)
			if r.code != 0 {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			for _, f := range c.Flags {
				d, ok := f.(cli.DocGenerationFlag)
				if !ok || f.Names()[0] == "help" {
					continue
				}
				if !strings.Contains(r.stdout, "--"+f.Names()[0]) {
					t.Errorf("help does not show --%s", f.Names()[0])
				}
				for _, env := range d.GetEnvVars() {
					if !strings.Contains(r.stdout, "$"+env) {
						t.Errorf("help does not show $%s for --%s", env, f.Names()[0])
					}
				}
			}
		})
	})
}

// TestApp_Flags checks the rules of the command tree: environment
// variables are TEAMBUS_ ones, a flag name has one kind everywhere
// (parseInvocation relies on it), every leaf has an action, and every
// command a usage.
func TestApp_Flags(t *testing.T) {
	t.Parallel()
	app := newApp(nil, nil)
	kinds := map[string]bool{}
	where := map[string]string{}
	walkCommands(app.Commands, nil, func(parents []string, c *cli.Command) {
		path := strings.Join(append(append([]string{}, parents...), c.Name), " ")
		if c.Usage == "" {
			t.Errorf("%s: no Usage", path)
		}
		if len(c.Subcommands) == 0 && c.Action == nil {
			t.Errorf("%s: leaf without Action", path)
		}
		for _, f := range c.Flags {
			name := f.Names()[0]
			d, ok := f.(cli.DocGenerationFlag)
			if !ok {
				t.Errorf("%s --%s: not a documented flag", path, name)
				continue
			}
			for _, e := range d.GetEnvVars() {
				if !strings.HasPrefix(e, "TEAMBUS_") {
					t.Errorf("%s --%s: env var %s does not start with TEAMBUS_", path, name, e)
				}
			}
			for _, n := range f.Names() {
				k := flagTakesValue(f)
				if prev, seen := kinds[n]; seen && prev != k {
					t.Errorf("%s --%s takes a value: %t, but in %s: %t", path, n, k, where[n], prev)
				}
				kinds[n], where[n] = k, path
			}
		}
	})
}

// TestFlagHelpers_EnvVars checks that every shared flag has its
// environment variable.
func TestFlagHelpers_EnvVars(t *testing.T) {
	t.Parallel()
	for _, f := range flags(connFlags(), memberFlags(), logFlags(), policyFlags(), []cli.Flag{jsonFlag()}) {
		d := f.(cli.DocGenerationFlag)
		if envs := d.GetEnvVars(); len(envs) == 0 || !strings.HasPrefix(envs[0], "TEAMBUS_") {
			t.Errorf("--%s: env vars %q, want a TEAMBUS_ one", f.Names()[0], envs)
		}
	}
}

// TestRun_RequiredFlag checks that a flag marked Required is refused in one
// line with exit 2, not with urfave's help dump.
func TestRun_RequiredFlag(t *testing.T) {
	t.Parallel()
	cmd := func() *cli.Command {
		return &cli.Command{
			Name:      "req-test",
			Usage:     "needs --to",
			ArgsUsage: "ID",
			Flags:     []cli.Flag{&cli.StringFlag{Name: "to", Required: true, EnvVars: []string{"TEAMBUS_REQ_TO"}}},
			Action: func(c *cli.Context) error {
				_, err := fmt.Fprintf(c.App.Writer, "to=%s id=%s\n", c.String("to"), c.Args().First())
				return err
			},
		}
	}
	runTest(t, []*cli.Command{cmd()}, "req-test", "t1").wantError(t, 2, "req-test: missing --to (or TEAMBUS_REQ_TO)")
	if r := runTest(t, []*cli.Command{cmd()}, "req-test", "t1", "--to", "m1"); r.code != 0 || r.stdout != "to=m1 id=t1\n" {
		t.Errorf("req-test t1 --to m1: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestRun_Concurrent runs apps in parallel: under -race it finds state
// shared between apps (urfave's package variables).
func TestRun_Concurrent(t *testing.T) {
	t.Parallel()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			var out, errb bytes.Buffer
			args := [][]string{{"teambus", "bus", "start", "--help"}, {"teambus", "bus", "bogus"}, {"teambus", "version"}, {"teambus", "--bogus"}}[i%4]
			run(t.Context(), args, strings.NewReader(""), &out, &errb)
		})
	}
	wg.Wait()
}

func TestFlagErrorText(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"flag provided but not defined: -bogus":            "flag provided but not defined: --bogus",
		"flag provided but not defined: -z":                "flag provided but not defined: -z",
		"flag needs an argument: -dir":                     "flag needs an argument: --dir",
		`invalid value "x" for flag -timeout: parse error`: `invalid value "x" for flag --timeout: parse error`,
		`invalid boolean value "x" for -json: parse error`: `invalid boolean value "x" for --json: parse error`,
		"bad flag syntax: ---x":                            "bad flag syntax: ---x",
	}
	for in, want := range tests {
		if got := flagErrorText(in); got != want {
			t.Errorf("flagErrorText(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestExitCode_Cli(t *testing.T) {
	t.Parallel()
	for code := range 5 {
		want := code
		if code > 3 {
			want = 1
		}
		if got := exitCode(cli.Exit(fmt.Sprintf("code %d", code), code)); got != want {
			t.Errorf("exitCode(cli.Exit(%d)) = %d, want %d", code, got, want)
		}
	}
}
