package hook

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/transcript"
)

// Transcript sync: after its own work, a bound session's PostToolBatch
// (PostToolUse where that replaces it), Stop, PreCompact and SessionEnd
// hook sends what was appended to the session's transcript since the last
// sync (package transcript), so a respawn elsewhere can resume the
// conversation. It runs within what is left of the hook's budget (at most
// transcriptMax) and fails open like the rest of the hook: an error is a
// note in hooks.log, never an error shown to the session. A sync cut short
// keeps what it stored; the next hook sends the rest.
//
// Only the final syncs (PreCompact, SessionEnd) log transcript.synced in
// the team's event log: one event per tool batch or turn would fill the
// log with bookkeeping.

// transcriptMax bounds one hook's transcript sync.
const transcriptMax = time.Second

// transcriptMargin is the part of the budget a sync leaves to the hook's
// exit.
const transcriptMargin = 100 * time.Millisecond

// transcriptRecord is the hooks.log note of a sync.
type transcriptRecord struct {
	Size  int64   `json:"size"`
	Sent  int64   `json:"sent"`
	Gen   int64   `json:"gen,omitempty"`
	MS    float64 `json:"ms"`
	Error string  `json:"error,omitempty"`
}

// syncEvents are the hook events that sync the transcript; true for the
// final ones that log transcript.synced.
var syncEvents = map[string]bool{"PostToolBatch": false, "PostToolUse": false, "Stop": false, "PreCompact": true, "SessionEnd": true}

// syncTranscript syncs the bound session's transcript after the event's
// handler ran.
func (h *hook) syncTranscript(ctx context.Context) {
	final, ok := syncEvents[h.cfg.Event]
	if !ok || h.b == nil || h.b.Fenced || h.p.TranscriptPath == "" || h.cfg.DryRun || h.cfg.Getenv("TEAMBUS_NO_TRANSCRIPT") == "1" {
		return
	}
	d := min(h.remaining()-transcriptMargin, transcriptMax)
	if d <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	rec := &transcriptRecord{}
	h.rec.Transcript = rec
	start := time.Now()
	res, err := h.transcriptSync(ctx)
	rec.MS = float64(time.Since(start).Microseconds()) / 1000
	rec.Size, rec.Sent, rec.Gen = res.Size, res.Sent, res.Gen
	if err != nil {
		rec.Error = Clean(clipChars(err.Error(), 300))
		return
	}
	if final {
		h.logEvent(ctx, eventlog.EvTranscriptSynced, transcript.SyncedData(h.b.Member, h.cfg.Event, res))
	}
}

func (h *hook) transcriptSync(ctx context.Context) (transcript.SyncResult, error) {
	// Claude Code writes the file asynchronously: none yet is nothing to
	// sync, and no reason to reach the bus.
	if _, err := os.Stat(h.p.TranscriptPath); err != nil {
		return transcript.SyncResult{}, fmt.Errorf("transcript sync: %w", err)
	}
	if err := h.connect(ctx); err != nil {
		return transcript.SyncResult{}, err
	}
	if _, _, member := h.conn.MemberOf(); member {
		// A member credential reaches its team through the team service
		// only, which has no transcript verb: the streams would refuse
		// (after a timeout), so do not try.
		return transcript.SyncResult{}, errors.New("transcript sync: not with a member credential (it needs the node's own connection)")
	}
	// New, not Open: no round trip; the first sync creates the stream.
	st, err := transcript.New(h.conn.JS, h.b.Team)
	if err != nil {
		return transcript.SyncResult{}, err
	}
	opts := []transcript.SyncOption{transcript.WithCwd(h.p.Cwd)}
	if h.cfg.Getenv("TEAMBUS_HOOK_FAULT") == "crash-during-transcript-sync" {
		// Fault injection for the crash tests: die after the sync's first
		// stored message (a data chunk before its commit, or the commit).
		opts = append(opts, transcript.OnStored(func(int64) { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL) }))
	}
	res, err := st.Sync(ctx, h.b.Member, h.p.SessionID, h.p.TranscriptPath, opts...)
	if err != nil {
		return res, fmt.Errorf("transcript sync: %w", err)
	}
	return res, nil
}
