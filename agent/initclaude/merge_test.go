package initclaude

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/")

const testBin = "/usr/local/bin/teambus"

var (
	teammate = Options{Bin: testBin, Team: "alpha", Member: "tm1"}
	envOnly  = Options{Bin: "teambus"}
	lead     = Options{Bin: testBin, Team: "alpha", Member: "lead", Lead: true}
)

// golden compares got with testdata/name, or writes it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n%s", name, Diff(name, want, got))
	}
}

// topMembers returns the top-level members of a JSON object file except
// hooks, for checking that their bytes survive.
func topMembers(t *testing.T, data []byte) []member {
	t.Helper()
	ms, err := parseDocument(data)
	if err != nil {
		t.Fatal(err)
	}
	var out []member
	for _, m := range ms {
		if m.key != "hooks" {
			out = append(out, m)
		}
	}
	return out
}

func TestMerge_Golden(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, golden string
		o          Options
	}{
		{"nofile", "nofile.teammate", teammate},
		{"empty", "empty.env", envOnly},
		{"user-hooks", "user-hooks.teammate", teammate},
		{"odd", "odd.teammate", teammate},
		{"old-teambus", "old-teambus.env", envOnly},
		{"null-events", "null-events.teammate", teammate},
		{"empty", "empty.lead", lead},
		{"empty", "empty.nowake", Options{Bin: testBin, Team: "alpha", Member: "tm1", Wake: WakeOff}},
		{"empty", "empty.shell", Options{Bin: testBin, Team: "alpha", Member: "tm1", ShellForm: true}},
		{"empty", "empty.autonomous-directed", Options{Bin: testBin, Autonomous: true, Wake: WakeDirected}},
		{"empty", "empty.posttooluse", Options{Bin: "teambus", PostToolUse: true}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			t.Parallel()
			in, err := os.ReadFile(filepath.Join("testdata", "merge", tt.in+".in.json"))
			if err != nil {
				t.Fatal(err)
			}
			out, err := Merge(in, Handlers(tt.o))
			if err != nil {
				t.Fatalf("Merge: %v", err)
			}
			golden(t, filepath.Join("merge", tt.golden+".json"), out)
			if !json.Valid(out) {
				t.Fatal("output is not valid JSON")
			}
			// Running twice is byte-identical.
			again, err := Merge(out, Handlers(tt.o))
			if err != nil || !bytes.Equal(again, out) {
				t.Errorf("second Merge differs (err %v):\n%s", err, Diff("second", out, again))
			}
			// Every other top-level value keeps its bytes and its order.
			before, after := topMembers(t, in), topMembers(t, out)
			if len(before) != len(after) {
				t.Fatalf("top-level members: %d before, %d after", len(before), len(after))
			}
			for i := range before {
				if !bytes.Equal(before[i].rawKey, after[i].rawKey) || !bytes.Equal(before[i].value, after[i].value) {
					t.Errorf("member %d: %s: %s became %s: %s", i, before[i].rawKey, before[i].value, after[i].rawKey, after[i].value)
				}
			}
			// Every handler written is teambus's, with the identity where asked.
			inst, err := FindInstalled(out)
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			for _, g := range Handlers(tt.o) {
				want += len(g.Group.Hooks)
			}
			if len(inst) != want {
				t.Errorf("%d teambus handlers, want %d", len(inst), want)
			}
			if got := Infer(inst); got != normal(tt.o) {
				t.Errorf("Infer = %+v, want %+v", got, normal(tt.o))
			}
			// Removing gives back the input's meaning, minus null events.
			rm, err := RemoveHooks(out, false)
			if err != nil {
				t.Fatal(err)
			}
			if left, _ := FindInstalled(rm); len(left) != 0 {
				t.Errorf("RemoveHooks left %d teambus handlers", len(left))
			}
			golden(t, filepath.Join("merge", tt.golden+".removed.json"), rm)
		})
	}
}

// normal is o as Infer returns it.
func normal(o Options) Options {
	if o.Wake == WakeAll {
		o.Wake = ""
	}
	if o.Lead {
		o.Autonomous = false
	}
	return o
}

// TestRemoveHooks_UserHooksByteIdentical: install and remove on a file
// Claude Code wrote gives back its exact bytes.
func TestRemoveHooks_UserHooksByteIdentical(t *testing.T) {
	t.Parallel()
	in, err := os.ReadFile("testdata/merge/user-hooks.in.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []Options{teammate, envOnly, lead, {Bin: testBin, ShellForm: true, Wake: WakeOff}} {
		out, err := Merge(in, Handlers(o))
		if err != nil {
			t.Fatal(err)
		}
		rm, err := RemoveHooks(out, true)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(rm, in) {
			t.Errorf("%+v: install+remove differs:\n%s", o, Diff("user-hooks", in, rm))
		}
	}
}

// TestMerge_UserGroupUntouched: a user's group in an event teambus manages
// keeps its bytes, teambus's group is appended after it.
func TestMerge_UserGroupUntouched(t *testing.T) {
	t.Parallel()
	in := []byte(`{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"say  done"}]}]}}`)
	out, err := Merge(in, Handlers(teammate))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(`{"hooks":[{"type":"command","command":"say  done"}]}`)) {
		t.Errorf("user group rewritten:\n%s", out)
	}
	ms, _ := parseDocument(out)
	hooks, _ := parseObject(ms[0].value)
	if hooks[0].key != "Stop" {
		t.Errorf("first event %q, want Stop (kept in place)", hooks[0].key)
	}
	groups, _ := parseArray(hooks[0].value)
	if len(groups) != 2 || IsOwned(groups[0]) {
		t.Errorf("Stop groups: %s", hooks[0].value)
	}
}

func TestMerge_StrictJSONRefused(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"line comment":      "{\n  // mine\n  \"a\": 1\n}",
		"block comment":     `{"a": /* x */ 1}`,
		"trailing comma":    `{"a": 1,}`,
		"trailing in array": `{"a": [1, 2,]}`,
		"byte order mark":   "\ufeff{}",
		"top-level array":   `[]`,
		"top-level string":  `"x"`,
		"hooks not object":  `{"hooks": []}`,
		"event not array":   `{"hooks": {"Stop": {"hooks": []}}}`,
		"duplicate hooks":   `{"hooks": {}, "hooks": {}}`,
		"two documents":     `{} {}`,
		"single quotes":     `{'a': 1}`,
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if out, err := Merge([]byte(in), Handlers(teammate)); !errors.Is(err, ErrNotJSON) {
				t.Errorf("Merge(%q) = %q, %v; want ErrNotJSON", in, out, err)
			}
		})
	}
}

func TestHandlers_Table(t *testing.T) {
	t.Parallel()
	events := func(o Options) string {
		var names []string
		for _, g := range Handlers(o) {
			for _, h := range g.Group.Hooks {
				names = append(names, g.Event+":"+h.Args[1])
			}
		}
		return strings.Join(names, " ")
	}
	base := "SessionStart:SessionStart UserPromptSubmit:UserPromptSubmit PostToolBatch:PostToolBatch Stop:Stop Stop:wait PreCompact:PreCompact PostCompact:PostCompact Notification:Notification StopFailure:StopFailure SessionEnd:SessionEnd"
	if got := events(teammate); got != base {
		t.Errorf("teammate: %s", got)
	}
	if got := events(lead); got != base+" TeammateIdle:TeammateIdle TaskCreated:TaskCreated TaskCompleted:TaskCompleted" {
		t.Errorf("lead: %s", got)
	}
	if got := events(Options{Bin: "teambus", Wake: WakeOff}); strings.Contains(got, "wait") {
		t.Errorf("no-wake: %s", got)
	}
	for _, g := range Handlers(Options{Bin: "teambus", Autonomous: true}) {
		for _, h := range g.Group.Hooks {
			budget := strings.Contains(strings.Join(h.Args, " "), "--budget 1s")
			if (h.Timeout < 10) != budget {
				t.Errorf("%s: timeout %d, --budget 1s %t: the budget must stay ≤ timeout/5", g.Event, h.Timeout, budget)
			}
			if h.AsyncRewake != (h.Args[1] == "wait") {
				t.Errorf("%s %s: asyncRewake %t", g.Event, h.Args[1], h.AsyncRewake)
			}
			if auto := strings.Contains(strings.Join(h.Args, " "), "--autonomous"); auto != (h.Args[1] == "Stop") {
				t.Errorf("%s %s: --autonomous %t", g.Event, h.Args[1], auto)
			}
		}
	}
	sh := Handlers(Options{Bin: testBin, Team: "alpha", Member: "tm1", ShellForm: true})
	if got, want := sh[0].Group.Hooks[0].Command, "exec '/usr/local/bin/teambus' hook SessionStart --team alpha --member tm1"; got != want || sh[0].Group.Hooks[0].Args != nil {
		t.Errorf("shell form: %q %q, want %q", got, sh[0].Group.Hooks[0].Args, want)
	}
}

func TestIsOwned(t *testing.T) {
	t.Parallel()
	tests := map[string]bool{
		`{"type":"command","command":"/usr/local/bin/teambus","args":["hook","Stop"]}`:       true,
		`{"type":"command","command":"teambus","args":["hook","Stop"]}`:                      true,
		`{"type":"command","command":"exec '/opt/x/teambus' hook Stop --team a"}`:            true,
		`{"type":"command","command":"teambus hook Stop"}`:                                   true,
		`{"type":"command","command":"/usr/local/bin/teambus","args":["inbox"]}`:             false,
		`{"type":"command","command":"/usr/local/bin/teambusy","args":["hook","Stop"]}`:      false,
		`{"type":"command","command":"echo teambus hook"}`:                                   false,
		`{"type":"prompt","command":"teambus hook Stop"}`:                                    false,
		`{"type":"command","command":"teambus","args":"hook"}`:                               false,
		`{"type":"command","command":42}`:                                                    false,
		`"teambus hook Stop"`:                                                                false,
		`{"type":"command","command":"/usr/local/bin/teambus","args":["hook","Stop"],"x":1}`: true,
	}
	for in, want := range tests {
		if got := IsOwned([]byte(in)); got != want {
			t.Errorf("IsOwned(%s) = %t, want %t", in, got, want)
		}
	}
}

func TestOptions_Validate(t *testing.T) {
	t.Parallel()
	bad := []Options{
		{},
		{Bin: "/usr/bin/tb"},
		{Bin: "bin/teambus"},
		{Bin: "/my dir/teambus", ShellForm: true},
		{Bin: "teambus", Team: "alpha"},
		{Bin: "teambus", Wake: "sometimes"},
	}
	for _, o := range bad {
		if err := o.Validate(); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	if err := (Options{Bin: "/my dir/teambus"}).Validate(); err != nil {
		t.Errorf("exec form with a space: %v", err)
	}
}
