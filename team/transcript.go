package team

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/transcript"
)

// Export names of the transcripts.
const (
	// TranscriptsDir holds <member>/<session>.jsonl, each byte for byte the
	// stored transcript of that Claude session.
	TranscriptsDir = "transcripts"
	// TranscriptsFile lists them.
	TranscriptsFile = "transcripts.json"
)

// TranscriptEntry is one line of transcripts.json.
type TranscriptEntry struct {
	Member   string    `json:"member"`
	Session  string    `json:"session"`
	Cwd      string    `json:"cwd,omitempty"`
	Size     int64     `json:"size"`
	SHA256   string    `json:"sha256,omitempty"`
	Gen      int64     `json:"gen"`
	SyncedAt time.Time `json:"synced_at,omitzero"`
	// File is the path of the copy, relative to the export directory;
	// empty when Error says why there is none.
	File  string `json:"file,omitempty"`
	Error string `json:"error,omitempty"`
}

// exportTranscripts writes the team's transcripts into dir (see
// TranscriptsDir) and the list of them, transcripts.json, sorted by member
// and session; nothing for a team without transcripts. A transcript that
// fails its checks is listed with its error and not copied; the rest of
// the export goes on.
func (s *Service) exportTranscripts(ctx context.Context, team, dir string, out *Export) error {
	st, err := transcript.New(s.js, team)
	if err != nil {
		return err
	}
	list, err := st.List(ctx)
	if err != nil || len(list) == 0 {
		return err // a team without transcripts exports as before
	}
	entries := []TranscriptEntry{}
	for _, info := range list {
		e := TranscriptEntry{Member: info.Member, Session: info.SessionID, Cwd: info.Cwd, Size: info.Size, SHA256: info.SHA256, Gen: info.Gen, SyncedAt: info.SyncedAt}
		rel := filepath.Join(TranscriptsDir, info.Member, info.SessionID+".jsonl")
		if err := os.MkdirAll(filepath.Join(dir, TranscriptsDir, info.Member), 0o755); err != nil {
			return teambus.Invalidf("export to %s: %w", dir, err)
		}
		err := writeExport(dir, rel, func(w io.Writer) error {
			_, err := st.WriteTo(ctx, info.Member, info.SessionID, w)
			return err
		})
		switch {
		case err == nil:
			e.File = rel
			out.Transcripts++
			out.Files = append(out.Files, filepath.Join(dir, rel))
		case transcript.Reason(err) == "corrupt":
			e.Error = transcript.Reason(err) + ": " + err.Error()
		default:
			return err
		}
		entries = append(entries, e)
	}
	err = writeExport(dir, TranscriptsFile, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(entries)
	})
	if err != nil {
		return err
	}
	out.Files = append(out.Files, filepath.Join(dir, TranscriptsFile))
	return nil
}

// RestoreTranscript writes the newest transcript of member under home,
// where `claude --resume <session>` run in cwd finds it (an empty cwd is
// the one it was synced from), and logs transcript.restored in the team's
// event log: ok with the path, or why not ("none", "corrupt",
// "unavailable", "invalid") and the fallback, a fresh session with the
// brief. The error is Restore's (transcript.ErrNone, transcript.ErrCorrupt).
func (s *Service) RestoreTranscript(ctx context.Context, team, member, home, cwd string) (transcript.Info, string, error) {
	st, err := transcript.New(s.js, team)
	if err != nil {
		return transcript.Info{}, "", err
	}
	info, path, err := st.Restore(ctx, member, home, cwd)
	s.LogEvent(ctx, team, eventlog.EvTranscriptRestored, member, transcript.RestoredData(member, info, path, err))
	return info, path, err
}
