package transcript

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
)

// StreamPrefix prefixes the name of a team's transcript stream.
const StreamPrefix = "TBT_"

// ChunkSize is the most bytes of a transcript in one message: well under
// the server's 1 MiB max_payload.
const ChunkSize = 256 << 10

// Subject kinds: chunks and manifests.
const (
	kindChunk    = "trc"
	kindManifest = "trm"
)

// hdrOffset is the header of a chunk that holds its offset in the file.
const hdrOffset = "Tb-Off"

// ErrNone is returned when a member has no synced transcript. It is an
// ErrNotFound.
var ErrNone = fmt.Errorf("%w: no transcript synced", teambus.ErrNotFound)

// ErrCorrupt is returned when a stored transcript does not match its
// manifest (a chunk missing or altered, or an unreadable manifest).
var ErrCorrupt = errors.New("transcript corrupt")

// Store is one team's Claude Code transcripts in the bus.
type Store struct {
	js     jetstream.JetStream
	team   string
	stream jetstream.Stream
	now    func() time.Time
	// afterChunk, when set (by tests), runs after each chunk is stored.
	afterChunk func(off int64)
}

// Open returns the team's transcript store, creating its stream if
// missing. It is idempotent.
func Open(ctx context.Context, js jetstream.JetStream, team string) (*Store, error) {
	if err := teambus.ValidateID("team", team); err != nil {
		return nil, err
	}
	st, err := js.Stream(ctx, StreamPrefix+team)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		st, err = js.CreateOrUpdateStream(ctx, streamConfig(team, bus.AutoReplicas(js.Conn())))
	}
	if err != nil {
		return nil, teambus.Unavailablef("open transcripts of team %s: %w", team, err)
	}
	return &Store{js: js, team: team, stream: st, now: time.Now}, nil
}

// DeleteTeam removes the team's transcripts; transcripts already gone are
// no error.
func DeleteTeam(ctx context.Context, js jetstream.JetStream, team string) error {
	if err := teambus.ValidateID("team", team); err != nil {
		return err
	}
	if err := js.DeleteStream(ctx, StreamPrefix+team); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return teambus.Unavailablef("delete transcripts of team %s: %w", team, err)
	}
	return nil
}

// Stream returns the name of the team's transcript stream.
func (s *Store) Stream() string { return StreamPrefix + s.team }

// StoredBytes returns the bytes the team's transcript stream holds, with
// the messages' subjects and headers.
func (s *Store) StoredBytes(ctx context.Context) (uint64, error) {
	info, err := s.stream.Info(ctx)
	if err != nil {
		return 0, teambus.Unavailablef("transcripts of team %s: %w", s.team, err)
	}
	return info.State.Bytes, nil
}

func streamConfig(team string, replicas int) jetstream.StreamConfig {
	p := "tb." + team + "."
	return jetstream.StreamConfig{
		Name:        StreamPrefix + team,
		Description: "teambus transcripts of team " + team,
		Subjects:    []string{p + kindChunk + ".>", p + kindManifest + ".>"},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardNew,
		MaxMsgs:     -1,
		MaxBytes:    -1,
		MaxMsgSize:  ChunkSize + 64<<10,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		Duplicates:  10 * time.Minute,
		AllowDirect: true,
		// The manifest is one message per session: each new one rolls up
		// the subject.
		AllowRollup: true,
	}
}

// chunkSubject is the subject of the chunks of one generation; gen < 0
// is every generation.
func (s *Store) chunkSubject(member, session string, gen int64) string {
	if gen < 0 {
		return fmt.Sprintf("tb.%s.%s.%s.%s.*", s.team, kindChunk, member, session)
	}
	return fmt.Sprintf("tb.%s.%s.%s.%s.%d", s.team, kindChunk, member, session, gen)
}

func (s *Store) manifestSubject(member, session string) string {
	return "tb." + s.team + "." + kindManifest + "." + member + "." + session
}

// validate checks the ids that become subject tokens.
func validate(member, session string) error {
	if err := teambus.ValidateID("member", member); err != nil {
		return err
	}
	if err := teambus.ValidateID("Claude session", session); err != nil {
		return err
	}
	return nil
}
