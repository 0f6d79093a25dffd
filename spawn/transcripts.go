package spawn

import (
	"context"
	"errors"
	"fmt"

	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/transcript"
)

// Restored describes a transcript written onto this machine.
type Restored struct {
	Session string
	Path    string
	Size    int64
	SHA256  string
	Gen     int64
}

// RestoreError says why a transcript could not be restored: Reason is
// "none" (no transcript was synced), "corrupt" (it failed its checks),
// "invalid" or "unavailable" (transcript.Reason).
type RestoreError struct {
	Reason string
	Err    error
}

func (e *RestoreError) Error() string {
	switch e.Reason {
	case "none":
		return "no transcript was synced"
	case "corrupt":
		return fmt.Sprintf("the stored transcript failed its checks (%v)", e.Err)
	}
	return fmt.Sprintf("the transcript could not be restored (%v)", e.Err)
}

func (e *RestoreError) Unwrap() error { return e.Err }

// BusTranscripts restores the transcripts the hooks carried into the bus,
// through the team service, which logs transcript.restored (ok, or the
// reason and the fallback to the brief).
type BusTranscripts struct{ Svc *team.Service }

// Restore writes member's newest transcript under home for cwd.
func (b BusTranscripts) Restore(ctx context.Context, teamID, member, home, cwd string) (Restored, error) {
	info, path, err := b.Svc.RestoreTranscript(ctx, teamID, member, home, cwd)
	if err != nil {
		return Restored{}, &RestoreError{Reason: transcript.Reason(err), Err: err}
	}
	if info.SessionID == "" {
		return Restored{}, &RestoreError{Reason: "corrupt", Err: errors.New("the stored transcript names no session")}
	}
	return Restored{Session: info.SessionID, Path: path, Size: info.Size, SHA256: info.SHA256, Gen: info.Gen}, nil
}
