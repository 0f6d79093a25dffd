package spawn

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus/transcript"
)

// BusTranscripts restores the transcripts the hooks carried into the bus
// (package transcript).
type BusTranscripts struct{ JS jetstream.JetStream }

// Restore writes member's newest transcript under home for cwd and
// returns its Claude session id.
func (b BusTranscripts) Restore(ctx context.Context, team, member, home, cwd string) (string, error) {
	st, err := transcript.Open(ctx, b.JS, team)
	if err != nil {
		return "", fmt.Errorf("open the team's transcripts: %w", err)
	}
	info, _, err := st.Restore(ctx, member, home, cwd)
	switch {
	case errors.Is(err, transcript.ErrNone):
		return "", errors.New("no transcript was synced")
	case errors.Is(err, transcript.ErrCorrupt):
		return "", fmt.Errorf("the stored transcript failed its checksum: %w", err)
	case err != nil:
		return "", err
	}
	if info.SessionID == "" {
		return "", errors.New("the stored transcript names no session")
	}
	return info.SessionID, nil
}
