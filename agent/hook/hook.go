package hook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/agent/binding"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// Defaults of the hook contract (§12.3.1–2).
const (
	DefaultBudget  = 2 * time.Second
	ConnectTimeout = 300 * time.Millisecond
	BusDownMemo    = 30 * time.Second
	MaxPayload     = 1 << 20
	ReadTimeout    = 500 * time.Millisecond
	// AckMargin is how far inside its budget a hook must be to ack.
	AckMargin = 500 * time.Millisecond
	// TouchEvery is how often a process records the member's activity.
	TouchEvery = 10 * time.Second
	// DefaultMaxWait is how long `hook wait` waits: its handler timeout
	// (3600 s) less 30 s.
	DefaultMaxWait = 3570 * time.Second
)

// Config is one hook invocation.
type Config struct {
	// Event is the hook event (SessionStart, Stop, ...) or "wait".
	Event string
	// StateDir is the teambus state directory ($TEAMBUS_DIR).
	StateDir string
	// Team and Member are who the session acts for: the environment,
	// else the handler's flags. Empty: the hook is a silent no-op.
	Team, Member string
	// Budget bounds the whole hook.
	Budget time.Duration
	// MaxContext caps the mail text of one hook.
	MaxContext int
	// Connect reaches the bus; its Timeout is set to ConnectTimeout.
	Connect bus.ConnectConfig
	// Exe is the teambus binary a SessionStart spawns the sidecar from.
	// SidecarEnv are the connection settings passed on to it, as
	// TEAMBUS_* variables added to the hook's environment: never as
	// arguments, where every local user would read a token or password
	// in the process list.
	Exe        string
	SidecarEnv []string
	// Autonomous continues a turn that stops with an in-progress task.
	Autonomous bool
	// Force binds even when another live session holds the member.
	Force bool
	// DryRun prints what would be injected and acks nothing.
	DryRun bool
	// MaxWait bounds `hook wait`.
	MaxWait time.Duration
	// ClaudeVersion selects the Stop envelope (decision:block below
	// 2.1.163); empty is a current Claude.
	ClaudeVersion string
	// Getenv reads the hook's environment; nil is os.Getenv.
	Getenv func(string) string
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Payload is the part of a hook's stdin JSON teambus reads; unknown fields
// are ignored.
type Payload struct {
	SessionID      string `json:"session_id"`
	TranscriptPath string `json:"transcript_path"`
	Cwd            string `json:"cwd"`
	HookEventName  string `json:"hook_event_name"`
	PromptID       string `json:"prompt_id"`
	Source         string `json:"source"`
	Reason         string `json:"reason"`
	Trigger        string `json:"trigger"`
	CompactSummary string `json:"compact_summary"`
	StopHookActive bool   `json:"stop_hook_active"`
	// Notification.
	NotificationType string `json:"notification_type"`
	Message          string `json:"message"`
	// StopFailure.
	Error string `json:"error"`
	// Agent-team events (lead).
	TeammateName string `json:"teammate_name"`
	TaskID       string `json:"task_id"`
	TaskSubject  string `json:"task_subject"`
}

// record is the hooks.log line of one invocation.
type record struct {
	TS        time.Time `json:"ts"`
	Event     string    `json:"event"`
	ClaudePID int       `json:"claude_pid,omitempty"`
	SessionID string    `json:"session_id,omitempty"`
	Team      string    `json:"team,omitempty"`
	Member    string    `json:"member,omitempty"`
	Outcome   string    `json:"outcome"`
	MS        float64   `json:"ms"`
	Delivered []uint64  `json:"delivered"`
	Acked     []uint64  `json:"acked"`
	Error     string    `json:"error,omitempty"`
	// Transcript is the transcript sync after the event (transcript.go).
	Transcript *transcriptRecord `json:"transcript,omitempty"`
}

// hook is one running invocation.
type hook struct {
	cfg   Config
	start time.Time
	t0    time.Time // start of the budget
	rec   record
	in    io.Reader
	out   io.WriteCloser
	errw  io.WriteCloser
	pid   int
	b     *binding.Binding
	p     Payload
	conn  *bus.Conn
	// api is the member API the hook acts through (apiOf), once
	// connected.
	api teamapi.API
	// touched: the hook asked for its activity stamp (owed).
	touched bool
	locked  *binding.Lock // <pid>.lock, held for a drain
	// dialing is the connection started at the hook's start, taken by
	// connect; nil once taken or when none was started.
	dialing <-chan dialed
	// pending are binding changes written once, by flush.
	pending []func(*binding.Binding) bool
}

// Run runs one hook and returns its exit code: 0, or 2 where the event
// uses it (wait, TeammateIdle, TaskCompleted). It never fails: internal
// errors are logged to hooks.log and the hook exits 0 with empty stdout.
func Run(ctx context.Context, cfg Config, in io.Reader, out, errw io.WriteCloser) int {
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Budget <= 0 {
		cfg.Budget = DefaultBudget
	}
	if cfg.MaxContext <= 0 {
		cfg.MaxContext = DefaultMaxContext
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	now := time.Now()
	h := &hook{cfg: cfg, start: now, t0: now, in: in, out: out, errw: errw,
		rec: record{TS: cfg.Now().UTC(), Event: cfg.Event, Team: cfg.Team, Member: cfg.Member, Delivered: []uint64{}, Acked: []uint64{}}}
	// No identity: nothing at all, not even a log line (§12.1.1).
	if cfg.Team == "" || cfg.Member == "" {
		return 0
	}
	code := 0
	func() {
		defer func() {
			if r := recover(); r != nil {
				h.fail(fmt.Errorf("panic: %v", r))
				code = 0
			}
		}()
		code = h.run(ctx)
		h.syncTranscript(ctx)
	}()
	if h.locked != nil {
		h.locked.Unlock()
	}
	if h.conn != nil {
		h.conn.Close()
	}
	h.dropDial()
	h.log()
	return code
}

func (h *hook) run(ctx context.Context) int {
	if err := teambus.ValidateID("team", h.cfg.Team); err != nil {
		return h.fail(err)
	}
	if err := teambus.ValidateID("member", h.cfg.Member); err != nil {
		return h.fail(err)
	}
	pid, err := binding.ClaudePID(h.cfg.Getenv)
	if err != nil {
		return h.fail(err)
	}
	h.pid, h.rec.ClaudePID = pid, pid
	if h.cfg.Event != "wait" {
		// Connecting takes as long as reading the payload and the binding:
		// both at once.
		h.dial(ctx)
	}
	if h.cfg.Event == "wait" && binding.PrintMode(h.cfg.Getenv, binding.Argv(pid)) {
		// In print mode an asyncRewake Stop hook runs synchronously
		// (verified on 2.1.330): waiting would hold every headless run.
		h.rec.Outcome = "print-mode"
		return 0
	}
	p, err := decodePayload(h.in)
	if err != nil {
		return h.fail(err)
	}
	h.p, h.rec.SessionID = p, Clean(clipChars(p.SessionID, 80))
	if h.cfg.Event == "wait" {
		return h.wait(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Budget)
	defer cancel()
	if h.cfg.Event == "SessionStart" {
		return h.sessionStart(ctx)
	}
	if !h.bound() {
		return 0
	}
	switch h.cfg.Event {
	case "UserPromptSubmit":
		return h.userPromptSubmit(ctx)
	case "PostToolBatch", "PostToolUse":
		return h.deliverEvent(ctx, h.cfg.Event, true)
	case "Stop":
		return h.stop(ctx)
	case "PreCompact":
		return h.preCompact(ctx)
	case "PostCompact":
		return h.postCompact(ctx)
	case "Notification", "StopFailure":
		return h.condition(ctx)
	case "SessionEnd":
		return h.sessionEnd(ctx)
	case "TeammateIdle", "TaskCreated", "TaskCompleted":
		return h.agentTeam(ctx)
	default:
		h.rec.Outcome = "unknown-event"
		return 0
	}
}

// bound loads the binding and applies the session gate; it reports
// whether the hook may act.
func (h *hook) bound() bool {
	b, err := binding.Load(h.cfg.StateDir, h.pid)
	if errors.Is(err, binding.ErrNoBinding) {
		h.rec.Outcome = "not-bound"
		return false
	}
	if err != nil {
		h.fail(err)
		return false
	}
	switch {
	case !b.Alive():
		h.rec.Outcome = "stale-binding"
	case b.Team != h.cfg.Team || b.Member != h.cfg.Member:
		h.rec.Outcome = "other-identity"
	case !b.HasSession(h.p.SessionID):
		// An in-process agent-team teammate of the same Claude process,
		// or a hook that ran before SessionStart bound the session.
		h.rec.Outcome = "gated"
	case b.Fenced:
		h.rec.Outcome = "fenced"
	default:
		h.b = b
		return true
	}
	return false
}

// fail records err and returns the fail-open exit code.
func (h *hook) fail(err error) int {
	h.rec.Outcome = "error"
	h.rec.Error = Clean(clipChars(err.Error(), 500))
	return 0
}

// log appends the invocation's line to hooks.log.
func (h *hook) log() {
	if h.rec.Outcome == "" {
		h.rec.Outcome = "ok"
	}
	h.rec.MS = float64(time.Since(h.start).Microseconds()) / 1000
	dir := filepath.Join(h.cfg.StateDir, "logs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return
	}
	line, err := json.Marshal(h.rec)
	if err != nil {
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, "hooks.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	_, _ = f.Write(append(line, '\n')) // the hook's own debug log: never fail a hook for it
	f.Close()
}

// decodePayload reads one JSON object of at most MaxPayload bytes, giving
// up after ReadTimeout: some runtimes pipe stdin without ever closing it,
// so the object is decoded as soon as it is complete, not at EOF.
func decodePayload(r io.Reader) (Payload, error) {
	type res struct {
		p   Payload
		err error
	}
	ch := make(chan res, 1)
	go func() {
		lr := &io.LimitedReader{R: r, N: MaxPayload + 1}
		var raw json.RawMessage
		dec := json.NewDecoder(lr)
		err := dec.Decode(&raw)
		if lr.N <= 0 {
			ch <- res{err: teambus.Invalidf("payload over %d bytes", MaxPayload)}
			return
		}
		if err != nil {
			ch <- res{err: teambus.Invalidf("payload is not one JSON object: %w", err)}
			return
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || raw[0] != '{' {
			ch <- res{err: teambus.Invalidf("payload is not a JSON object")}
			return
		}
		var p Payload
		if err := json.Unmarshal(raw, &p); err != nil {
			ch <- res{err: teambus.Invalidf("payload: %w", err)}
			return
		}
		ch <- res{p: p}
	}()
	t := time.NewTimer(ReadTimeout)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.p, r.err
	case <-t.C:
		return Payload{}, teambus.Unavailablef("no payload on stdin within %s", ReadTimeout)
	}
}

// elapsed is how long the hook has run.
func (h *hook) elapsed() time.Duration { return time.Since(h.t0) }

// remaining is what is left of the budget.
func (h *hook) remaining() time.Duration { return h.cfg.Budget - h.elapsed() }

// dialed is the outcome of a connection attempt.
type dialed struct {
	conn *bus.Conn
	err  error
}

// connectConfig is how a hook reaches the bus: within ConnectTimeout and
// without the JetStream readiness round trip (the hook's first request
// finds out, and a hook fails open either way).
func (h *hook) connectConfig() bus.ConnectConfig {
	cfg := h.cfg.Connect
	cfg.Timeout = ConnectTimeout
	cfg.Name = "teambus hook " + h.cfg.Event
	cfg.NoReadyCheck = true
	return cfg
}

// dial starts connecting in a goroutine; connect takes the result. A hook
// that does not connect after all (not bound, bus remembered down) never
// waits for it: dropDial closes it in the background.
func (h *hook) dial(ctx context.Context) {
	ch := make(chan dialed, 1)
	cfg := h.connectConfig()
	go func() {
		cctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
		defer cancel()
		conn, err := bus.Connect(cctx, cfg)
		ch <- dialed{conn: conn, err: err}
	}()
	h.dialing = ch
}

// dropDial closes a connection started by dial and not taken, once it is
// made.
func (h *hook) dropDial() {
	if h.dialing == nil {
		return
	}
	ch := h.dialing
	h.dialing = nil
	go func() {
		if d := <-ch; d.err == nil {
			d.conn.Close()
		}
	}()
}

// connect opens the bus connection within ConnectTimeout (or takes the one
// dial started), unless a failed connection was remembered less than
// BusDownMemo ago.
func (h *hook) connect(ctx context.Context) error {
	if h.api != nil {
		return nil
	}
	now := h.cfg.Now()
	if h.b != nil && h.b.BusDownUntil != nil && now.Before(*h.b.BusDownUntil) {
		return teambus.Unavailablef("bus unreachable (remembered until %s)", h.b.BusDownUntil.UTC().Format(time.RFC3339))
	}
	var conn *bus.Conn
	var err error
	if h.dialing != nil {
		select {
		case d := <-h.dialing:
			conn, err = d.conn, d.err
		case <-ctx.Done():
			err = teambus.Unavailablef("connect to the bus: %v", ctx.Err())
			h.dropDial()
		}
		h.dialing = nil
	} else {
		cctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
		conn, err = bus.Connect(cctx, h.connectConfig())
		cancel()
	}
	if err != nil {
		if h.b != nil {
			until := now.Add(BusDownMemo)
			h.updateBinding(ctx, func(b *binding.Binding) bool { b.BusDownUntil = &until; return true })
		}
		return err
	}
	api, err := apiOf(conn, h.cfg.Team, h.cfg.Member)
	if err != nil {
		conn.Close()
		return err
	}
	h.conn, h.api = conn, api
	if h.b != nil && h.b.BusDownUntil != nil {
		h.updateBinding(ctx, func(b *binding.Binding) bool { b.BusDownUntil = nil; return true })
	}
	return nil
}

// updateBinding applies fn to the binding under its lock (or under the
// drain lock the hook holds) and keeps the result.
func (h *hook) updateBinding(ctx context.Context, fn func(*binding.Binding) bool) {
	b, err := binding.Update(ctx, h.cfg.StateDir, h.pid, h.locked != nil, 100*time.Millisecond, fn)
	if err == nil {
		h.b = b
	}
}

// actor is the bound member acting through the service.
func (h *hook) actor() team.Actor {
	return team.Actor{Team: h.b.Team, Member: h.b.Member, Session: h.b.Session}
}

// emit writes the envelope of event carrying text in one write and closes
// stdout. An empty text writes nothing.
func (h *hook) emit(event, text string) error {
	if text == "" {
		return nil
	}
	env := envelope(event, text, h.cfg.ClaudeVersion)
	h.faultPoint("before-write")
	_, err := h.out.Write(env)
	cerr := h.out.Close()
	if err == nil {
		err = cerr
	}
	return err
}

// envelope is the JSON object Claude Code reads (§12.3.5): the event name
// is always present, or Claude drops the context.
func envelope(event, text, claudeVersion string) []byte {
	var v any
	if event == "Stop" && claudeVersion != "" && !bus.VersionAtLeast(claudeVersion, "2.1.163") {
		v = map[string]any{"decision": "block", "reason": text}
	} else {
		v = map[string]any{"hookSpecificOutput": map[string]any{"hookEventName": event, "additionalContext": text}}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // into a buffer: cannot fail for these types
	return buf.Bytes()
}

// joinText joins non-empty parts with blank lines.
func joinText(parts ...string) string {
	var keep []string
	for _, p := range parts {
		if p = strings.TrimRight(p, "\n"); p != "" {
			keep = append(keep, p)
		}
	}
	if len(keep) == 0 {
		return ""
	}
	return strings.Join(keep, "\n\n") + "\n"
}
