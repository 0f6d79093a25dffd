package spawn

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

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

// Restore failure reasons, as the transcript.restored event names them.
const (
	ReasonNone        = "none"        // no transcript was synced
	ReasonCorrupt     = "corrupt"     // the stored transcript failed its checksum
	ReasonUnavailable = "unavailable" // the bus or the disk failed
)

// RestoreError says why a transcript could not be restored.
type RestoreError struct {
	Reason string // ReasonNone, ReasonCorrupt or ReasonUnavailable
	Err    error
}

func (e *RestoreError) Error() string {
	switch e.Reason {
	case ReasonNone:
		return "no transcript was synced"
	case ReasonCorrupt:
		return fmt.Sprintf("the stored transcript failed its checksum (%v)", e.Err)
	}
	return fmt.Sprintf("the transcript could not be read (%v)", e.Err)
}

func (e *RestoreError) Unwrap() error { return e.Err }

// BusTranscripts restores the transcripts the hooks carried into the bus
// (package transcript).
type BusTranscripts struct{ JS jetstream.JetStream }

// Restore writes member's newest transcript under home for cwd.
func (b BusTranscripts) Restore(ctx context.Context, team, member, home, cwd string) (Restored, error) {
	st, err := transcript.Open(ctx, b.JS, team)
	if err != nil {
		return Restored{}, &RestoreError{Reason: ReasonUnavailable, Err: err}
	}
	info, path, err := st.Restore(ctx, member, home, cwd)
	switch {
	case errors.Is(err, transcript.ErrNone):
		return Restored{}, &RestoreError{Reason: ReasonNone, Err: err}
	case errors.Is(err, transcript.ErrCorrupt):
		return Restored{}, &RestoreError{Reason: ReasonCorrupt, Err: err}
	case err != nil:
		return Restored{}, &RestoreError{Reason: ReasonUnavailable, Err: err}
	}
	if info.SessionID == "" {
		return Restored{}, &RestoreError{Reason: ReasonCorrupt, Err: errors.New("the stored transcript names no session")}
	}
	return Restored{Session: info.SessionID, Path: path, Size: info.Size, SHA256: info.SHA256, Gen: info.Gen}, nil
}
