package initclaude

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestHandlers_CredsBakedRoundTrip: a credential file is baked with the
// identity as --creds PATH (a path, no secret, no --bus), read back by
// Infer, and refused without an identity, beside a bus location, as a
// relative path, or with quotes in the shell form.
func TestHandlers_CredsBakedRoundTrip(t *testing.T) {
	o := Options{Bin: "/opt/teambus", Team: "alpha", Member: "tm1", Creds: "/home/u/.config/teambus/creds/alpha/tm1.creds"}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	raw := []byte(`{"hooks":{}}`)
	out, err := Merge(raw, Handlers(o))
	if err != nil {
		t.Fatal(err)
	}
	inst, err := FindInstalled(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range inst {
		args := decodeHandler(in.Handler).hookArgs()
		i := slices.Index(args, "--creds")
		if i < 0 || args[i+1] != o.Creds || slices.Contains(args, "--bus") {
			t.Errorf("%s: args %v", in.Event, args)
		}
	}
	if got := Infer(inst); got.Creds != o.Creds || got.Team != "alpha" || got.Bus != "" {
		t.Errorf("Infer = %+v", got)
	}
	if st, _, _ := Compare(out, Handlers(o)); st != StatusCurrent {
		t.Errorf("Compare = %s", st)
	}
	if args := MCPArgs(o); !slices.Equal(args, []string{"mcp", "--team", "alpha", "--member", "tm1", "--creds", o.Creds}) {
		t.Errorf("MCPArgs = %v", args)
	}
	for _, bad := range []struct {
		o    Options
		part string
	}{
		{Options{Bin: "teambus", Creds: "/c"}, "only with the identity"},
		{Options{Bin: "teambus", Team: "a", Member: "b", Creds: "/c", Bus: "/d"}, "not both"},
		{Options{Bin: "teambus", Team: "a", Member: "b", Creds: "c"}, "absolute"},
		{Options{Bin: "teambus", Team: "a", Member: "b", Creds: "/my creds", ShellForm: true}, "shell-form"},
	} {
		if err := bad.o.Validate(); err == nil || !strings.Contains(err.Error(), bad.part) {
			t.Errorf("%+v: %v, want %q", bad.o, err, bad.part)
		}
	}
}

func TestCredsDirAndPath(t *testing.T) {
	for _, tt := range []struct{ xdg, home, want string }{
		{"/x", "/h", "/x/teambus/creds"},
		{"rel", "/h", "/h/.config/teambus/creds"},
		{"", "/h", "/h/.config/teambus/creds"},
		{"", "", ""},
	} {
		if got := CredsDir(tt.xdg, tt.home); got != tt.want {
			t.Errorf("CredsDir(%q, %q) = %q, want %q", tt.xdg, tt.home, got, tt.want)
		}
	}
	if got := CredsPath("/c", "alpha", "lead"); got != filepath.Join("/c", "alpha", "lead.creds") {
		t.Errorf("CredsPath = %q", got)
	}
	for _, tt := range []struct {
		dir, path string
		in        bool
	}{{"/r", "/r/x", true}, {"/r", "/r", true}, {"/r", "/rx/y", false}, {"/r", "/x/r", false}, {"/r/a", "/r/..a/b", false}} {
		if got := within(tt.dir, tt.path); got != tt.in {
			t.Errorf("within(%q, %q) = %t", tt.dir, tt.path, got)
		}
	}
}
