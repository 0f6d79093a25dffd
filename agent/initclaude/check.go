package initclaude

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Status is how an installation compares with what init would write
// (§12.2.6; exit codes 0, 1, 2).
type Status string

// The statuses.
const (
	StatusCurrent  Status = "current"
	StatusOutdated Status = "outdated"
	StatusMissing  Status = "missing"
)

// Infer returns the options the installed handlers were written with: the
// binary, the baked identity, lead, wake, autonomous, the form and the
// PostToolUse fallback.
func Infer(inst []Installed) Options {
	var o Options
	o.Wake = WakeOff
	for _, in := range inst {
		h := decodeHandler(in.Handler)
		if o.Bin == "" {
			o.Bin = h.bin()
		}
		if len(h.Args) == 0 {
			o.ShellForm = true
		}
		args := h.hookArgs()
		for i, a := range args {
			switch {
			case a == "--team" && i+1 < len(args):
				o.Team = args[i+1]
			case a == "--member" && i+1 < len(args):
				o.Member = args[i+1]
			case a == "--bus" && i+1 < len(args):
				o.Bus = args[i+1]
			case a == "--creds" && i+1 < len(args):
				o.Creds = args[i+1]
			case a == "--autonomous":
				o.Autonomous = true
			case a == "--wake=directed":
				o.Wake = WakeDirected
			}
		}
		if len(args) > 0 && args[0] == "wait" && o.Wake == WakeOff {
			o.Wake = WakeAll
		}
		if slices.Contains(LeadEvents, in.Event) {
			o.Lead = true
		}
		if in.Event == "PostToolUse" {
			o.PostToolUse = true
		}
	}
	if o.Member == "lead" {
		o.Lead = true
	}
	if o.Wake == WakeAll {
		// "all" is the default: written as "" so it compares equal.
		o.Wake = ""
	}
	return o
}

// Compare returns how the teambus handlers of a settings file compare with
// groups, and what differs first.
func Compare(data []byte, groups []EventGroup) (Status, string, error) {
	have, err := FindInstalled(data)
	if err != nil {
		return "", "", err
	}
	if len(have) == 0 {
		return StatusMissing, "no teambus handlers", nil
	}
	merged, err := Merge(data, groups)
	if err != nil {
		return "", "", err
	}
	want, err := FindInstalled(merged)
	if err != nil {
		return "", "", err
	}
	for i := 0; i < max(len(have), len(want)); i++ {
		switch {
		case i >= len(have):
			return StatusOutdated, fmt.Sprintf("%s: handler %s missing", want[i].Event, describe(want[i])), nil
		case i >= len(want):
			return StatusOutdated, fmt.Sprintf("%s: handler %s is not written any more", have[i].Event, describe(have[i])), nil
		case have[i].Event != want[i].Event || have[i].Matcher != want[i].Matcher || !sameJSON(have[i].Handler, want[i].Handler):
			return StatusOutdated, fmt.Sprintf("%s: have %s, init writes %s", want[i].Event, describe(have[i]), describe(want[i])), nil
		}
	}
	return StatusCurrent, fmt.Sprintf("%d handlers", len(have)), nil
}

// describe is a handler in one line: its command and arguments, timeout.
func describe(in Installed) string {
	h := decodeHandler(in.Handler)
	var t struct {
		Timeout any `json:"timeout"`
	}
	_ = json.Unmarshal(in.Handler, &t) // an unreadable handler is reported by the checks below
	cmd := h.Command
	if len(h.Args) > 0 {
		cmd += " " + strings.Join(h.Args, " ")
	}
	if in.Matcher != "" {
		cmd = "[" + in.Matcher + "] " + cmd
	}
	return fmt.Sprintf("%q (timeout %v)", cmd, t.Timeout)
}

// Signature is the set of a file's teambus handlers, for finding handlers
// that would fire twice: one string per handler.
func Signature(inst []Installed) []string {
	var out []string
	for _, in := range inst {
		var v any
		_ = json.Unmarshal(in.Handler, &v) // as above
		b, _ := json.Marshal(v)
		out = append(out, in.Event+"\x00"+in.Matcher+"\x00"+string(b))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// FindPlugins returns the directories under root (at most six levels deep)
// holding a plugin named teambus: Claude Code keeps installed plugins under
// ~/.claude/plugins.
func FindPlugins(root string) []string {
	var out []string
	base := strings.Count(filepath.Clean(root), string(filepath.Separator))
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error { // unreadable directories are skipped: the check reports what it finds
		if err != nil {
			return nil
		}
		if d.IsDir() && strings.Count(p, string(filepath.Separator))-base > 6 {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "plugin.json" || filepath.Base(filepath.Dir(p)) != ".claude-plugin" {
			return nil
		}
		var m struct {
			Name string `json:"name"`
		}
		if b, err := os.ReadFile(p); err == nil && json.Unmarshal(b, &m) == nil && m.Name == "teambus" {
			out = append(out, filepath.Dir(filepath.Dir(p)))
		}
		return nil
	})
	return out
}
