package main

import (
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// reorderApp is a command tree shaped like the real one: a root-only flag,
// member commands with value and bool flags, a group, a SkipFlagParsing
// command.
func reorderApp() *cli.App {
	leaf := func(name string, extra ...cli.Flag) *cli.Command {
		return &cli.Command{Name: name, Flags: flags(connFlags(), memberFlags(), []cli.Flag{jsonFlag()}, extra), Action: func(*cli.Context) error { return nil }}
	}
	app := &cli.App{
		Name:      "teambus",
		Writer:    io.Discard,
		ErrWriter: io.Discard,
		Flags:     []cli.Flag{&cli.BoolFlag{Name: "root-only", EnvVars: []string{"TEAMBUS_ROOT_ONLY"}}},
		Commands: []*cli.Command{
			leaf("ack"),
			leaf("send", &cli.StringFlag{Name: "to", EnvVars: []string{"TEAMBUS_TO"}}),
			{Name: "team", Subcommands: []*cli.Command{
				leaf("create", &cli.StringSliceFlag{Name: "member-spec", Aliases: []string{"m"}, EnvVars: []string{"TEAMBUS_X"}}),
				leaf("list"),
			}},
			{Name: "task", Subcommands: []*cli.Command{
				leaf("add", &cli.IntFlag{Name: "priority", EnvVars: []string{"TEAMBUS_PRIORITY"}}, &cli.StringFlag{Name: "desc", EnvVars: []string{"TEAMBUS_DESC"}}),
			}},
			{Name: "exec", SkipFlagParsing: true, Action: func(*cli.Context) error { return nil }},
		},
	}
	prepare(app)
	return app
}

func TestParseInvocation_Args(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"flags after positionals", "teambus ack 12 13 --member tm2", "teambus ack --member tm2 -- 12 13"},
		{"subcommand then positional then flag", "teambus team create alpha --member tm1", "teambus team create --member tm1 -- alpha"},
		{"already in order", "teambus ack --member tm2 12", "teambus ack --member tm2 -- 12"},
		{"no positionals unchanged", "teambus team list --json --team a", "teambus team list --json --team a"},
		{"flags interleaved", "teambus ack 1 --team a 2 --json 3 --member m", "teambus ack --team a --json --member m -- 1 2 3"},
		{"inline value", "teambus ack 12 --member=tm2", "teambus ack --member=tm2 -- 12"},
		{"single dash long flag", "teambus ack 12 -member tm2", "teambus ack -member tm2 -- 12"},
		{"negative number value", "teambus task add t1 --priority -1 --desc x", "teambus task add --priority -1 --desc x -- t1"},
		{"negative number inline value", "teambus task add t1 --priority=-1", "teambus task add --priority=-1 -- t1"},
		{"negative number positional", "teambus ack -1 --json", "teambus ack --json -- -1"},
		{"negative decimal positional", "teambus ack -0.5", "teambus ack -- -0.5"},
		{"dash alone positional", "teambus send - --to lead", "teambus send --to lead -- -"},
		{"value that looks like a flag", "teambus send --to --json hi", "teambus send --to --json -- hi"},
		{"value that is -h is not help", "teambus send --to -h hi", "teambus send --to -h -- hi"},
		{"bool takes no value", "teambus ack --json 12", "teambus ack --json -- 12"},
		{"bool inline value", "teambus ack 12 --json=false", "teambus ack --json=false -- 12"},
		{"terminator keeps flags positional", "teambus send --to lead -- --not-a-flag -x", "teambus send --to lead -- --not-a-flag -x"},
		{"terminator after positional", "teambus send hello --to lead -- --json", "teambus send --to lead -- hello --json"},
		{"terminator alone", "teambus ack --json --", "teambus ack --json"},
		{"repeated slice flag keeps order", "teambus team create alpha --member-spec a -m b:dev --member-spec=c", "teambus team create --member-spec a -m b:dev --member-spec=c -- alpha"},
		{"flag before command name moves to leaf", "teambus --dir /x team list", "teambus team list --dir /x"},
		{"flag between group and subcommand", "teambus team --team a create alpha", "teambus team create --team a -- alpha"},
		{"root-only flag stays at root", "teambus ack 1 --root-only", "teambus --root-only ack -- 1"},
		{"unknown flag goes to leaf", "teambus ack 12 --bogus", "teambus ack --bogus -- 12"},
		{"unknown flag value stays positional", "teambus ack --bogus x", "teambus ack --bogus -- x"},
		{"command name after positional is positional", "teambus team create list", "teambus team create -- list"},
		{"unknown subcommand is positional", "teambus team alpha create", "teambus team -- alpha create"},
		{"unknown command", "teambus bogus --json", "teambus --json -- bogus"},
		{"dangling value flag goes last", "teambus ack 12 --member", "teambus ack --member"},
		{"dangling after other flags", "teambus ack 12 --json --team", "teambus ack --json --team"},
		{"skip flag parsing untouched", "teambus exec --x a -- --y", "teambus exec --x a -- --y"},
		{"program only", "teambus", "teambus"},
		{"help flag anywhere", "teambus team create alpha --help", "teambus team create --help -- alpha"},
	}
	app := reorderApp()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseInvocation(app, strings.Fields(tt.in)).Args()
			if want := strings.Fields(tt.want); !reflect.DeepEqual(got, want) {
				t.Errorf("args(%q)\n got %q\nwant %q", tt.in, got, want)
			}
		})
	}
}

func TestParseInvocation_Help(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		help bool
		path string
	}{
		{"teambus --help", true, ""},
		{"teambus -h team create", true, "team create"},
		{"teambus team create alpha --help", true, "team create"},
		{"teambus team create alpha -h=true", true, "team create"},
		{"teambus send --to -h hi", false, "send"},
		{"teambus send -- --help", false, "send"},
		{"teambus help team", false, "help"},
	}
	app := reorderApp()
	app.Commands = append(app.Commands, helpCommand())
	for _, tt := range tests {
		inv := parseInvocation(app, strings.Fields(tt.in))
		if inv.Help != tt.help || strings.Join(inv.Path, " ") != tt.path {
			t.Errorf("parseInvocation(%q): help %t path %q, want %t %q", tt.in, inv.Help, strings.Join(inv.Path, " "), tt.help, tt.path)
		}
	}
}

func TestIsFlagToken(t *testing.T) {
	t.Parallel()
	for tok, want := range map[string]bool{
		"-x": true, "--x": true, "--x=1": true, "-x=-1": true, "---x": true,
		"-": false, "": false, "x": false, "-1": false, "-0.5": false, "-.5": false, "-5m": false, "12": false,
	} {
		if got := isFlagToken(tok); got != want {
			t.Errorf("isFlagToken(%q) = %t, want %t", tok, got, want)
		}
	}
}

// TestParseInvocation_Parses checks the rebuilt line with urfave itself:
// the leaf sees the flags and the positionals as typed.
func TestParseInvocation_Parses(t *testing.T) {
	t.Parallel()
	var gotArgs []string
	var gotPriority int
	var gotDesc string
	app := reorderApp()
	add := app.Commands[3].Subcommands[0]
	add.Action = func(c *cli.Context) error {
		gotArgs, gotPriority, gotDesc = c.Args().Slice(), c.Int("priority"), c.String("desc")
		return nil
	}
	in := []string{"teambus", "task", "add", "t1", "--priority", "-1", "-5", "--desc", "a -- b", "--", "--json"}
	if err := runApp(t.Context(), app, in); err != nil {
		t.Fatalf("runApp: %v", err)
	}
	if want := []string{"t1", "-5", "--json"}; !reflect.DeepEqual(gotArgs, want) {
		t.Errorf("args %q, want %q", gotArgs, want)
	}
	if gotPriority != -1 || gotDesc != "a -- b" {
		t.Errorf("priority %d desc %q, want -1 %q", gotPriority, gotDesc, "a -- b")
	}
}

// TestHelp_EveryCommandHasAnExample checks that every command of the tree
// has examples in its help, and that each example names an existing
// command path and only flags that command (or the root) defines.
func TestHelp_EveryCommandHasAnExample(t *testing.T) {
	app := newApp(io.Discard, io.Discard)
	seen := map[string]bool{}
	walkCommands(app.Commands, nil, func(parents []string, c *cli.Command) {
		if len(c.Subcommands) > 0 {
			return
		}
		path := strings.Join(append(append([]string{}, parents...), c.Name), " ")
		seen[path] = true
		if len(examples[path]) == 0 || !strings.Contains(c.Description, examplesHeader) {
			t.Errorf("%s: no example in its help", path)
		}
		for _, ex := range examples[path] {
			words := exampleWords(ex)
			if len(words) == 0 {
				continue // an example of another program (claude mcp add …)
			}
			inv := parseInvocation(app, words)
			if got := strings.Join(inv.Path, " "); got != path && !(path == "version" && len(inv.Path) == 0) {
				t.Errorf("example %q runs %q, not %q", ex, got, path)
				continue
			}
			for _, f := range inv.Flags {
				if !hasFlagName(c.Flags, f.Name) && !hasFlagName(app.Flags, f.Name) {
					t.Errorf("example %q: %s has no flag --%s", ex, path, f.Name)
				}
			}
		}
	})
	for path := range examples {
		if !seen[path] {
			t.Errorf("examples of %q: no such command", path)
		}
	}
}

// exampleWords splits an example shell line into the words of its teambus
// invocation: environment assignments, a pipe before it, a redirection and
// a comment after it are dropped; double quotes group words. It returns
// nil when the line does not run teambus.
func exampleWords(line string) []string {
	if i := strings.Index(line, "#"); i >= 0 {
		line = line[:i]
	}
	if i := strings.LastIndex(line, "|"); i >= 0 {
		line = line[i+1:]
	}
	if i := strings.Index(line, "<"); i >= 0 {
		line = line[:i]
	}
	var words []string
	var cur strings.Builder
	inQuote, inWord := false, false
	for _, r := range line {
		switch {
		case r == '"':
			inQuote, inWord = !inQuote, true
		case r == ' ' && !inQuote:
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	for len(words) > 0 && strings.Contains(words[0], "=") {
		words = words[1:]
	}
	if len(words) == 0 || words[0] != "teambus" {
		return nil
	}
	return words
}

// TestRun_VersionFlag checks `teambus --version`.
func TestRun_VersionFlag(t *testing.T) {
	r := runCLI(t, "--version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "teambus ") || !strings.Contains(r.stdout, "nats-server") {
		t.Fatalf("teambus --version: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestHelp_NoPlaceholderGlitches checks flag usages: urfave/cli v2 renders
// the first `quoted` text of a usage as the flag's value placeholder, so a
// quoted command there prints as `--creds teambus team creds`. Only a
// placeholder word in capitals may be quoted.
func TestHelp_NoPlaceholderGlitches(t *testing.T) {
	app := newApp(io.Discard, io.Discard)
	check := func(where string, fs []cli.Flag) {
		for _, f := range fs {
			d, ok := f.(cli.DocGenerationFlag)
			if !ok {
				continue
			}
			u := d.GetUsage()
			if strings.Count(u, "`") == 0 {
				continue
			}
			parts := strings.Split(u, "`")
			if len(parts) != 3 || strings.ToUpper(parts[1]) != parts[1] || strings.ContainsAny(parts[1], " -") {
				t.Errorf("%s --%s: usage %q quotes more than a placeholder", where, f.Names()[0], u)
			}
		}
	}
	check("teambus", app.Flags)
	walkCommands(app.Commands, nil, func(parents []string, c *cli.Command) {
		check(strings.Join(append(append([]string{}, parents...), c.Name), " "), c.Flags)
	})
}

// TestRun_OneCommandAppAnswersAlike runs command lines through run, which
// builds only the command a line names, and through the whole tree: the
// exit code and output are the same.
func TestRun_OneCommandAppAnswersAlike(t *testing.T) {
	lines := [][]string{
		{"version"}, {"version", "--json"}, {"send", "--bogus"}, {"team", "bogus"}, {"team", "create"},
		{"task", "add", "--team", "a", "--from", "/nonexistent/x.jsonl", "--dir", t.TempDir()},
		{"ack", "--member", "tm1"}, {"bus", "status", "--timeout", "0s"}, {"bogus"}, {"--version"},
		{"hook", "Nope"}, {"events", "analyze", "--file", "/nonexistent"},
	}
	for _, l := range lines {
		var out, errb strings.Builder
		code := run(t.Context(), append([]string{"teambus"}, l...), strings.NewReader(""), &out, &errb)
		want := runCLI(t, l...)
		if code != want.code || out.String() != want.stdout || errb.String() != want.stderr {
			t.Errorf("%v: run gave %d %q %q; the whole tree %d %q %q", l, code, out.String(), errb.String(), want.code, want.stdout, want.stderr)
		}
	}
	if len(topLevel) != len(newApp(io.Discard, io.Discard).Commands) {
		t.Fatal("topLevel and the app disagree")
	}
}
