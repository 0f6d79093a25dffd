package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/transcript"
)

// Row keys of the transcript section.
const (
	keyTrHookOff = "hook.posttoolbatch.notranscript"
	keyTrHookOn  = "hook.posttoolbatch.transcript"
	keyTrSync    = "tb.transcript.sync"
	keyTrBytes   = "tb.transcript.bytes"
)

// Sizes of the transcript section: a 10 MB transcript, growing by 20 KB
// before every timed hook, as a long session's does per tool batch.
const (
	trStart = 10 << 20
	trTurn  = 20 << 10
)

// UnitTimes is the unit of a size given as a multiple of another.
const UnitTimes = "× its size"

// transcripts times the transcript sync of `teambus hook PostToolBatch`
// processes of a bound member whose 10 MB transcript grows by 20 KB
// before each: the sync's own time as the hook logs it (read the newest
// commit, hash the new bytes, store them with the new manifest, on the
// connection the hook already has), and the whole hook with and without
// the sync, interleaved. Then the bytes the team's
// transcript stream holds against the transcript's size, and a restore
// checked byte for byte.
func (r *run) transcripts(ctx context.Context) error {
	const teamID = "trn"
	node, stop, err := r.hookTeam(ctx, "node-transcript", teamID, []team.MemberSpec{{ID: "tm1"}})
	if err != nil {
		return err
	}
	defer stop()
	state, exe, cwd := node.Dir(), r.cfg.Exe, r.dir
	tm1, err := r.boundSession(ctx, teamID, "tm1", state, exe, cwd)
	if err != nil {
		return err
	}
	defer tm1.agent.kill()
	dir := filepath.Join(r.dir, "transcript")
	if err := mkdir(dir); err != nil {
		return err
	}
	path := filepath.Join(dir, tm1.session+".jsonl")
	tf := &trFile{path: path}
	if err := tf.grow(trStart); err != nil {
		return err
	}
	// The first sync of the 10 MB is not timed: a session syncs from its
	// first tool batch on.
	conn, err := connect(ctx, node)
	if err != nil {
		return err
	}
	defer conn.Close()
	st, err := transcript.Open(ctx, conn.JS, teamID)
	if err != nil {
		return err
	}
	if _, err := st.Sync(ctx, "tm1", tm1.session, path, transcript.WithCwd(cwd)); err != nil {
		return err
	}
	ptb, err := hookPayload("PostToolBatch", tm1.session, cwd)
	if err != nil {
		return err
	}
	if ptb, err = withField(ptb, "transcript_path", path); err != nil {
		return err
	}
	kinds := []procKind{
		{key: keyTrHookOff, group: "hook", name: "`teambus hook PostToolBatch`, bound member, nothing to deliver, transcript sync off (TEAMBUS_NO_TRANSCRIPT=1)", exe: exe,
			args: []string{"hook", "PostToolBatch"}, env: append(tm1.env, "TEAMBUS_NO_TRANSCRIPT=1"), stdin: ptb},
		{key: keyTrHookOn, group: "hook", name: "`teambus hook PostToolBatch`, bound member, nothing to deliver, 10 MB transcript grown by 20 KB synced", exe: exe,
			args: []string{"hook", "PostToolBatch"}, env: tm1.env, stdin: ptb,
			setup: func(context.Context) ([]string, []byte, error) { return tm1.env, ptb, tf.grow(trTurn) }},
	}
	if err := r.timeKinds(ctx, r.cfg.HookRuns, kinds); err != nil {
		return err
	}
	r.res.compare(keyTrHookOn, keyTrHookOff)
	syncs, err := transcriptSyncs(state)
	if err != nil {
		return err
	}
	// The warm-up run's sync is not counted.
	if len(syncs) != r.cfg.HookRuns+1 {
		return fmt.Errorf("hooks.log has %d transcript syncs of PostToolBatch, want %d", len(syncs), r.cfg.HookRuns+1)
	}
	var s sample
	for _, l := range syncs[1:] {
		if l.Transcript.Error != "" || l.Transcript.Sent < trTurn || l.Transcript.Sent > 2*trTurn {
			return fmt.Errorf("a hook's transcript sync sent %d bytes (error %q), want the %d appended", l.Transcript.Sent, l.Transcript.Error, trTurn)
		}
		s.lat = append(s.lat, time.Duration(l.Transcript.MS*float64(time.Millisecond)))
	}
	s.n = len(s.lat)
	p50, p99 := perOp(s)
	r.res.add(Row{Group: "teambus", Key: keyTrSync, Name: "transcript sync added to a PostToolBatch hook, 10 MB transcript growing by 20 KB", Short: "transcript sync",
		Value: p50, Unit: UnitMs, P50: p50, P99: p99, N: s.n,
		Note: "the sync's own time inside each `teambus hook PostToolBatch` process, as it logs it in hooks.log: read the session's newest commit, hash the 20 KB, store them with the new manifest in one message (one fsync, sync always), on the connection the hook already has"})
	r.cfg.Progress("  transcript sync in the hook: p50 %.2f ms, p99 %.2f ms", p50, p99)

	stored, err := st.StoredBytes(ctx)
	if err != nil {
		return err
	}
	home := filepath.Join(r.dir, "restore-home")
	_, out, err := st.Restore(ctx, "tm1", home, "")
	if err != nil {
		return fmt.Errorf("restore the transcript: %w", err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		return err
	}
	want, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("the restored transcript (%d bytes) is not the %d-byte file", len(got), len(want))
	}
	ratio := float64(stored) / float64(len(want))
	r.res.add(Row{Group: "teambus", Key: keyTrBytes, Name: "bytes stored per transcript", Value: ratio, Unit: UnitTimes, N: 1,
		Note: fmt.Sprintf("the team's transcript stream holds %d bytes (messages with subjects and headers) for a %d-byte transcript after %d syncs; restored byte-identical", stored, len(want), r.cfg.HookRuns+2)})
	r.cfg.Progress("  bytes stored per transcript: %.4f× its size", ratio)
	return nil
}

// trFile is a JSONL transcript the bench grows.
type trFile struct {
	path string
	n    int
}

// grow appends complete lines of about 1 KiB until the file grew by at
// least n bytes.
func (tf *trFile) grow(n int) error {
	var b bytes.Buffer
	for b.Len() < n {
		tf.n++
		fmt.Fprintf(&b, `{"type":"assistant","uuid":"u-%08d","message":{"content":"%s"}}`+"\n", tf.n, bytes.Repeat([]byte{byte('a' + tf.n%26)}, 950))
	}
	f, err := os.OpenFile(tf.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b.Bytes()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// withField sets one field of a JSON payload.
func withField(payload []byte, k string, v any) ([]byte, error) {
	var p map[string]any
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, err
	}
	p[k] = v
	return json.Marshal(p)
}

// trLine is a hooks.log line with its transcript sync.
type trLine struct {
	Event      string `json:"event"`
	Transcript *struct {
		Sent  int64   `json:"sent"`
		MS    float64 `json:"ms"`
		Error string  `json:"error"`
	} `json:"transcript"`
}

// transcriptSyncs returns the PostToolBatch lines of hooks.log that
// synced a transcript, in order.
func transcriptSyncs(stateDir string) ([]trLine, error) {
	f, err := os.Open(filepath.Join(stateDir, "logs", "hooks.log"))
	if err != nil {
		return nil, fmt.Errorf("hooks.log: %w", err)
	}
	defer f.Close()
	var out []trLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l trLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Event == "PostToolBatch" && l.Transcript != nil {
			out = append(out, l)
		}
	}
	return out, sc.Err()
}
