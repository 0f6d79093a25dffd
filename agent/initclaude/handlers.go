package initclaude

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// Wake says whether and for what the `hook wait` handler wakes an idle
// session (§12.5).
type Wake string

// The wake modes.
const (
	WakeAll      Wake = "all"      // every message wakes the session
	WakeDirected Wake = "directed" // only messages addressed to the member
	WakeOff      Wake = "off"      // no waiter (--no-wake)
)

// Options chooses the handlers written.
type Options struct {
	// Bin is the command: an absolute path to the teambus binary, or the
	// bare "teambus" (looked up on PATH by Claude Code). Its base name must
	// be teambus, or the ownership rule would not recognise the handlers.
	Bin string
	// Team and Member are baked into every handler when Team is set; empty,
	// the hooks take the identity from TEAMBUS_TEAM/TEAMBUS_MEMBER.
	Team, Member string
	// Bus is the bus location baked with the identity (--bus): a state
	// directory or a NATS URL, never a secret. The hooks use it when the
	// terminal that starts claude sets neither TEAMBUS_DIR nor
	// TEAMBUS_SERVER.
	Bus string
	// Creds is the member (or lead) credential file baked with the
	// identity (--creds): an absolute path, never the password. The file
	// names the bus, so Creds and Bus exclude each other. Empty with Team
	// set: the hooks reach the bus with the node token (token handlers).
	Creds string
	// Lead installs the lead-only events (TeammateIdle, TaskCreated,
	// TaskCompleted).
	Lead bool
	// Wake is the waiter mode; "" is WakeAll.
	Wake Wake
	// Autonomous adds --autonomous to the Stop handler.
	Autonomous bool
	// ShellForm writes `"command": "exec '<bin>' hook …"` without args
	// (Claude Code < 2.1.139).
	ShellForm bool
	// PostToolUse installs PostToolUse with matcher "*" instead of
	// PostToolBatch (Claude Code versions without PostToolBatch).
	PostToolUse bool
}

// Validate checks o.
func (o Options) Validate() error {
	if o.Bin == "" {
		return fmt.Errorf("no teambus binary given")
	}
	if b := filepath.Base(o.Bin); b != "teambus" && b != ClientBinary {
		return fmt.Errorf("binary %q: its name must be teambus (or %s, its client build), or teambus would not recognise its own handlers", o.Bin, ClientBinary)
	}
	if o.Bin != "teambus" && !filepath.IsAbs(o.Bin) {
		return fmt.Errorf("binary %q: give an absolute path or the bare teambus", o.Bin)
	}
	if o.ShellForm && strings.ContainsAny(o.Bin, " '\"\\$`") {
		return fmt.Errorf("binary %q: a shell-form command can not hold spaces or quotes; use the exec form", o.Bin)
	}
	if (o.Team == "") != (o.Member == "") {
		return fmt.Errorf("team and member go together")
	}
	if o.Bus != "" && o.Team == "" {
		return fmt.Errorf("the bus location is baked only with the identity")
	}
	if o.ShellForm && strings.ContainsAny(o.Bus, " '\"\\$`") {
		return fmt.Errorf("bus location %q: a shell-form command can not hold spaces or quotes; use the exec form", o.Bus)
	}
	if o.Creds != "" {
		switch {
		case o.Team == "":
			return fmt.Errorf("the credential file is baked only with the identity")
		case o.Bus != "":
			return fmt.Errorf("a credential names its bus: bake the credential file or the bus location, not both")
		case !filepath.IsAbs(o.Creds):
			return fmt.Errorf("credential file %q: give an absolute path", o.Creds)
		case o.ShellForm && strings.ContainsAny(o.Creds, " '\"\\$`"):
			return fmt.Errorf("credential file %q: a shell-form command can not hold spaces or quotes; use the exec form", o.Creds)
		}
	}
	switch o.Wake {
	case "", WakeAll, WakeDirected, WakeOff:
	default:
		return fmt.Errorf("wake %q: all, directed or off", o.Wake)
	}
	return nil
}

// Handler is one hook handler as Claude Code reads it. The field order is the
// order written.
type Handler struct {
	Type        string   `json:"type"`
	Command     string   `json:"command"`
	Args        []string `json:"args,omitempty"`
	Timeout     int      `json:"timeout"`
	AsyncRewake bool     `json:"asyncRewake,omitempty"`
}

// Group is one matcher group of an event.
type Group struct {
	Matcher string    `json:"matcher,omitempty"`
	Hooks   []Handler `json:"hooks"`
}

// EventGroup is the group teambus installs for one event.
type EventGroup struct {
	Event string
	Group Group
}

// LeadEvents are the events installed only for the lead.
var LeadEvents = []string{"TeammateIdle", "TaskCreated", "TaskCompleted"}

// row is one line of the table of §12.2.2.
type row struct {
	event, matcher string
	sub            string // the hook subcommand: the event, or "wait"
	timeout        int
	extra          []string
	async          bool
}

// Handlers returns the groups of §12.2.2 for o, in the order they are
// appended to a settings file.
//
// Facts behind the table that the spec's text does not spell out (notes
// claude-code/README.md): SessionEnd handlers share a 1.5 s budget that a
// settings file's per-handler timeout raises (up to 60 s) but a plugin's
// does not, so SessionEnd gets --budget 1s everywhere, which also fits the
// plugin's 1.5 s. PostToolBatch is in the 2.1.240 hooks reference but in no
// changelog entry, so the version that introduced it is unknown: the
// PostToolUse fallback is chosen below 2.1.240 (BatchClaude), the earliest
// version known to have it, and an older Claude Code that has it anyway
// only pays one hook process per tool call instead of per batch. Matchers
// are exact lists (letters, digits, _ and |), never regular expressions.
func Handlers(o Options) []EventGroup {
	batch := row{event: "PostToolBatch", sub: "PostToolBatch", timeout: 10}
	if o.PostToolUse {
		batch = row{event: "PostToolUse", matcher: "*", sub: "PostToolUse", timeout: 10}
	}
	var stopExtra []string
	if o.Autonomous && !o.Lead {
		stopExtra = []string{"--autonomous"}
	}
	rows := []row{
		{event: "SessionStart", matcher: "startup|resume|clear|compact|fork", sub: "SessionStart", timeout: 15},
		{event: "UserPromptSubmit", sub: "UserPromptSubmit", timeout: 10},
		batch,
		{event: "Stop", sub: "Stop", timeout: 10, extra: stopExtra},
	}
	if o.Wake != WakeOff {
		var extra []string
		if o.Wake == WakeDirected {
			extra = []string{"--wake=directed"}
		}
		rows = append(rows, row{event: "Stop", sub: "wait", timeout: 3600, extra: extra, async: true})
	}
	rows = append(rows,
		row{event: "PreCompact", matcher: "manual|auto", sub: "PreCompact", timeout: 10},
		row{event: "PostCompact", matcher: "manual|auto", sub: "PostCompact", timeout: 5},
		row{event: "Notification", matcher: "permission_prompt|idle_prompt|agent_needs_input", sub: "Notification", timeout: 5},
		row{event: "StopFailure", sub: "StopFailure", timeout: 5},
		row{event: "SessionEnd", sub: "SessionEnd", timeout: 5},
	)
	if o.Lead {
		for _, e := range LeadEvents {
			rows = append(rows, row{event: e, sub: e, timeout: 10})
		}
	}
	var out []EventGroup
	for _, r := range rows {
		h := o.handler(r)
		if n := len(out); n > 0 && out[n-1].Event == r.event {
			out[n-1].Group.Hooks = append(out[n-1].Group.Hooks, h)
			continue
		}
		out = append(out, EventGroup{Event: r.event, Group: Group{Matcher: r.matcher, Hooks: []Handler{h}}})
	}
	return out
}

// handler builds the handler of one row.
func (o Options) handler(r row) Handler {
	args := []string{"hook", r.sub}
	if o.Team != "" {
		args = append(args, "--team", o.Team, "--member", o.Member)
		if o.Bus != "" {
			args = append(args, "--bus", o.Bus)
		}
		if o.Creds != "" {
			// The path only: the hook reads the password from the file
			// (as TEAMBUS_CREDS would), so no secret is in argv.
			args = append(args, "--creds", o.Creds)
		}
	}
	args = append(args, r.extra...)
	if r.timeout < 10 {
		// The hook's default budget is 2 s; keep it at most 1/5 of the
		// timeout (§12.3.2).
		args = append(args, "--budget", "1s")
	}
	h := Handler{Type: "command", Command: o.Bin, Args: args, Timeout: r.timeout, AsyncRewake: r.async}
	if o.ShellForm {
		h.Command = "exec '" + o.Bin + "' " + strings.Join(args, " ")
		h.Args = nil
	}
	return h
}

// ClientBinary is the name of the client build of teambus (-tags
// teambus_client): it runs the handlers as well, and its handlers are
// teambus's.
const ClientBinary = "teambus-client"

// shellRE is the shell-form ownership rule of §12.2.3 (the client build,
// teambus-client, runs the handlers as well). Compiled on first use: a
// package-level regexp costs every one-shot process at start-up.
var shellRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(exec )?'?[^ ]*teambus(-client)?'? hook `) })

// rawHandler is what ownership looks at in a handler of unknown shape.
type rawHandler struct {
	Type    string
	Command string
	Args    []string
	ok      bool // type and command are strings, args (if any) strings
}

// decodeHandler reads the fields of a handler without failing on fields of
// other types.
func decodeHandler(raw []byte) rawHandler {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return rawHandler{}
	}
	var h rawHandler
	if json.Unmarshal(m["type"], &h.Type) != nil || json.Unmarshal(m["command"], &h.Command) != nil {
		return rawHandler{}
	}
	if a, ok := m["args"]; ok && string(a) != "null" {
		if json.Unmarshal(a, &h.Args) != nil {
			return rawHandler{}
		}
	}
	h.ok = true
	return h
}

// owned reports whether h is a teambus handler (§12.2.3).
func (h rawHandler) owned() bool {
	if !h.ok || h.Type != "command" {
		return false
	}
	if len(h.Args) > 0 {
		b := filepath.Base(h.Command)
		return (b == "teambus" || b == ClientBinary) && h.Args[0] == "hook"
	}
	return shellRE().MatchString(h.Command)
}

// hookArgs returns the words after "hook" of a teambus handler: the
// subcommand first.
func (h rawHandler) hookArgs() []string {
	if len(h.Args) > 0 {
		return h.Args[1:]
	}
	f := strings.Fields(h.Command)
	for i, w := range f {
		if w == "hook" {
			return f[i+1:]
		}
	}
	return nil
}

// bin returns the binary a teambus handler runs.
func (h rawHandler) bin() string {
	if len(h.Args) > 0 {
		return h.Command
	}
	f := strings.Fields(strings.TrimPrefix(h.Command, "exec "))
	if len(f) == 0 {
		return ""
	}
	return strings.Trim(f[0], "'")
}

// IsOwned reports whether the JSON handler object raw is a teambus handler.
func IsOwned(raw []byte) bool { return decodeHandler(raw).owned() }
