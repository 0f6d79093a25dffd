package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The fake Claude Code: a harness that plays Claude Code's hook runner as
// documented and as observed on 2.1.330 (notes/claude-code §1.1.3-1.1.4):
// it reads the hooks block of a settings file, runs the matching handlers
// of an event in parallel (exec form, each in its own session, with the
// env Claude sets and the payload on stdin), enforces each handler's
// timeout (kill, output discarded), parses stdout by the first-character
// rule, requires hookSpecificOutput.hookEventName, caps context at 10,000
// characters, runs asyncRewake handlers in the background (exit 2 = a
// wake with stderr) and keeps a transcript of every context it got. The
// "claude" process whose pid the hooks see is a real process the test
// kills with SIGKILL.

type simHandler struct {
	Type        string   `json:"type"`
	Command     string   `json:"command"`
	Args        []string `json:"args"`
	Timeout     int      `json:"timeout"`
	AsyncRewake bool     `json:"asyncRewake"`
}

type simGroup struct {
	Matcher string       `json:"matcher"`
	Hooks   []simHandler `json:"hooks"`
}

type simSettings struct {
	Hooks map[string][]simGroup `json:"hooks"`
}

// simSettingsFile writes the hooks block `teambus init claude --settings
// FILE` writes (spec §12.2.2, identity baked in) and returns its path.
func simSettingsFile(t *testing.T, teamID, member string) string {
	t.Helper()
	id := []string{"--team", teamID, "--member", member}
	h := func(event string, timeout int, extra ...string) simHandler {
		return simHandler{Type: "command", Command: bin, Args: append(append([]string{"hook", event}, extra...), id...), Timeout: timeout}
	}
	wait := h("wait", 3600)
	wait.AsyncRewake = true
	s := simSettings{Hooks: map[string][]simGroup{
		"SessionStart":     {{Matcher: "startup|resume|clear|compact|fork", Hooks: []simHandler{h("SessionStart", 15)}}},
		"UserPromptSubmit": {{Hooks: []simHandler{h("UserPromptSubmit", 10)}}},
		"PostToolBatch":    {{Hooks: []simHandler{h("PostToolBatch", 10)}}},
		"Stop":             {{Hooks: []simHandler{h("Stop", 10), wait}}},
		"PreCompact":       {{Matcher: "manual|auto", Hooks: []simHandler{h("PreCompact", 10)}}},
		"PostCompact":      {{Matcher: "manual|auto", Hooks: []simHandler{h("PostCompact", 5)}}},
		"Notification":     {{Matcher: "permission_prompt|idle_prompt|agent_needs_input", Hooks: []simHandler{h("Notification", 5)}}},
		"StopFailure":      {{Hooks: []simHandler{h("StopFailure", 5)}}},
		"SessionEnd":       {{Hooks: []simHandler{h("SessionEnd", 5)}}},
	}}
	raw, _ := json.MarshalIndent(s, "", "  ")
	path := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// sim is one fake Claude Code session.
type sim struct {
	t        *testing.T
	e        *env
	name     string
	settings simSettings
	claude   *child
	session  string
	project  string
	envFile  string
	prompt   int
	// env is added to every handler's environment (after the defaults).
	env []string

	mu         sync.Mutex
	transcript []string // "Event: context"
	wakes      []string
}

func (e *env) newSim(name, settingsPath string) *sim {
	e.t.Helper()
	raw, err := os.ReadFile(settingsPath)
	if err != nil {
		e.t.Fatal(err)
	}
	s := &sim{t: e.t, e: e, name: name, claude: e.agent(name + "-claude"), session: fmt.Sprintf("%s-%d", name, time.Now().UnixNano()),
		project: e.t.TempDir()}
	if err := json.Unmarshal(raw, &s.settings); err != nil {
		e.t.Fatal(err)
	}
	s.envFile = filepath.Join(s.project, "session-env.sh")
	return s
}

var matcherList = regexp.MustCompile(`^[A-Za-z0-9_|, -]*$`)

func matches(matcher, value string) bool {
	if matcher == "" || matcher == "*" {
		return true
	}
	if matcherList.MatchString(matcher) {
		for _, m := range strings.FieldsFunc(matcher, func(r rune) bool { return r == '|' || r == ',' }) {
			if strings.TrimSpace(m) == value {
				return true
			}
		}
		return false
	}
	ok, _ := regexp.MatchString(matcher, value)
	return ok
}

// fire runs the handlers of event and returns the contexts they gave.
func (s *sim) fire(event, matchValue string, fields map[string]any) []string {
	s.t.Helper()
	p := map[string]any{"session_id": s.session, "transcript_path": filepath.Join(s.project, s.session+".jsonl"), "cwd": s.project, "hook_event_name": event}
	if s.prompt > 0 && event != "SessionStart" {
		p["prompt_id"] = fmt.Sprintf("prompt-%d", s.prompt)
	}
	for k, v := range fields {
		p[k] = v
	}
	payload, _ := json.Marshal(p)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var contexts []string
	for _, g := range s.settings.Hooks[event] {
		if !matches(g.Matcher, matchValue) {
			continue
		}
		for _, h := range g.Hooks {
			h := h
			if h.AsyncRewake {
				go s.runHandler(event, h, payload, true)
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if c := s.runHandler(event, h, payload, false); c != "" {
					mu.Lock()
					contexts = append(contexts, c)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	s.mu.Lock()
	for _, c := range contexts {
		s.transcript = append(s.transcript, event+": "+c)
	}
	s.mu.Unlock()
	return contexts
}

// runHandler runs one handler as Claude does and returns its context.
func (s *sim) runHandler(event string, h simHandler, payload []byte, rewake bool) string {
	cmd := exec.Command(h.Command, h.Args...)
	cmd.Env = append(os.Environ(), "CLAUDE_PID="+fmt.Sprint(s.claude.Pid()), "CLAUDE_CODE_SESSION_ID="+s.session,
		"CLAUDE_PROJECT_DIR="+s.project, "CLAUDECODE=1", "CLAUDE_CODE_CHILD_SESSION=1", "TEAMBUS_DIR="+s.e.node.Dir(),
		"TEAMBUS_TEAM=", "TEAMBUS_MEMBER=", "TEAMBUS_SESSION=", "TEAMBUS_FORCE=")
	cmd.Env = append(cmd.Env, s.env...)
	if event == "SessionStart" {
		cmd.Env = append(cmd.Env, "CLAUDE_ENV_FILE="+s.envFile)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Stdin = bytes.NewReader(payload)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		s.t.Errorf("start handler %s: %v", event, err)
		return ""
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timeout := time.Duration(h.Timeout) * time.Second
	if timeout <= 0 {
		timeout = 600 * time.Second
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(timeout):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return "" // a timed-out hook's output is discarded
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	if rewake {
		if code == 2 {
			s.mu.Lock()
			s.wakes = append(s.wakes, errb.String())
			s.transcript = append(s.transcript, "wake: "+errb.String())
			s.mu.Unlock()
		}
		return ""
	}
	if errb.Len() > 0 && code == 0 {
		s.t.Errorf("%s %s: stderr on success: %q", s.name, event, errb.String())
	}
	text := strings.TrimSpace(out.String())
	if code != 0 || text == "" || text[0] != '{' {
		return ""
	}
	var env struct {
		HSO *struct {
			HookEventName     string `json:"hookEventName"`
			AdditionalContext string `json:"additionalContext"`
		} `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal([]byte(text), &env); err != nil || env.HSO == nil || env.HSO.HookEventName != event {
		s.t.Errorf("%s %s: output Claude would drop: %q", s.name, event, text)
		return ""
	}
	c := env.HSO.AdditionalContext
	if len([]rune(c)) > 10000 {
		s.t.Errorf("%s %s: context over 10,000 characters", s.name, event)
	}
	return c
}

func (s *sim) Start(source string) string {
	return strings.Join(s.fire("SessionStart", source, map[string]any{"source": source}), "\n")
}

func (s *sim) Prompt(text string) string {
	s.prompt++
	return strings.Join(s.fire("UserPromptSubmit", "", map[string]any{"prompt": text, "permission_mode": "default"}), "\n")
}

func (s *sim) Tools() string {
	return strings.Join(s.fire("PostToolBatch", "", map[string]any{"tool_calls": []any{}}), "\n")
}

func (s *sim) Stop() string {
	return strings.Join(s.fire("Stop", "", map[string]any{"stop_hook_active": false, "last_assistant_message": "done"}), "\n")
}

func (s *sim) End(reason string) { s.fire("SessionEnd", reason, map[string]any{"reason": reason}) }

func (s *sim) Kill9() { s.claude.kill(s.t) }

// sawText reports whether the transcript holds s.
func (s *sim) saw(text string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.transcript {
		if strings.Contains(c, text) {
			return true
		}
	}
	return false
}

func (s *sim) dump() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.transcript, "\n---\n")
}

// sessionEnv reads the identity SessionStart exported to CLAUDE_ENV_FILE,
// as the Bash tool would see it.
func (s *sim) sessionEnv() map[string]string {
	s.t.Helper()
	raw, err := os.ReadFile(s.envFile)
	if err != nil {
		s.t.Fatalf("%s: env file: %v", s.name, err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	out := map[string]string{}
	for _, f := range strings.Fields(strings.TrimPrefix(lines[len(lines)-1], "export ")) {
		k, v, _ := strings.Cut(f, "=")
		out[k] = strings.Trim(v, "'")
	}
	return out
}

var _ = context.Background
