package transcript

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
)

// StreamPrefix prefixes the name of a team's transcript stream.
const StreamPrefix = "TBT_"

// ChunkSize is the most bytes of a transcript in one message: well under
// the server's 1 MiB max_payload.
const ChunkSize = 256 << 10

// inlineMax is the most bytes a commit carries itself; a sync whose last
// piece is larger sends it as a data chunk and commits with no bytes, so
// reading a manifest never reads much more than the manifest.
const inlineMax = 64 << 10

// kindCommit is the last token of a session's commit subject; its data
// subjects end with their generation number.
const kindCommit = "c"

// Headers of the stored messages.
const (
	hdrOffset   = "Tb-Off"      // a message's bytes start at this offset of the file
	hdrManifest = "Tb-Manifest" // a commit's manifest (JSON)
)

// ErrNone is returned when a member has no synced transcript. It is an
// ErrNotFound.
var ErrNone = fmt.Errorf("%w: no transcript synced", teambus.ErrNotFound)

// ErrCorrupt is returned when a stored transcript does not match its
// manifest (a chunk missing or altered, or an unreadable manifest).
var ErrCorrupt = errors.New("transcript corrupt")

// errNoStream is a request the team's transcript stream did not answer:
// it does not exist (yet).
var errNoStream = errors.New("no transcript stream")

// Store is one team's Claude Code transcripts in the bus.
type Store struct {
	js   jetstream.JetStream
	team string
	now  func() time.Time
	// ensured is set once the stream is known to exist.
	ensured bool
}

// New returns the team's transcript store without any I/O: its stream is
// created by the first sync that finds it missing. For one-shot callers
// (the hooks), which then pay no round trip for it.
func New(js jetstream.JetStream, team string) (*Store, error) {
	if err := teambus.ValidateID("team", team); err != nil {
		return nil, err
	}
	return &Store{js: js, team: team, now: time.Now}, nil
}

// Open returns the team's transcript store, creating its stream if
// missing. It is idempotent.
func Open(ctx context.Context, js jetstream.JetStream, team string) (*Store, error) {
	s, err := New(js, team)
	if err != nil {
		return nil, err
	}
	if err := s.ensure(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// ensure creates the team's stream if it does not exist.
func (s *Store) ensure(ctx context.Context) error {
	_, err := s.js.Stream(ctx, s.Stream())
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = s.js.CreateOrUpdateStream(ctx, streamConfig(s.team, bus.AutoReplicas(s.js.Conn())))
	}
	if err != nil {
		return teambus.Unavailablef("open transcripts of team %s: %w", s.team, err)
	}
	s.ensured = true
	return nil
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
	st, err := s.js.Stream(ctx, s.Stream())
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, teambus.Unavailablef("transcripts of team %s: %w", s.team, err)
	}
	return st.CachedInfo().State.Bytes, nil
}

func streamConfig(team string, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        StreamPrefix + team,
		Description: "teambus transcripts of team " + team,
		Subjects:    []string{"tb." + team + ".tr.>"},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardNew,
		MaxMsgs:     -1,
		MaxBytes:    -1,
		MaxMsgSize:  ChunkSize + 16<<10,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		Duplicates:  10 * time.Minute,
		AllowDirect: true,
	}
}

// Subjects, built from validated ids only.

func (s *Store) sessionPrefix(member, session string) string {
	return "tb." + s.team + ".tr." + member + "." + session + "."
}

// dataSubject is the subject of the data chunks of one generation.
func (s *Store) dataSubject(member, session string, gen int64) string {
	return s.sessionPrefix(member, session) + strconv.FormatInt(gen, 10)
}

// commitSubject is the subject of a session's commits, every generation.
func (s *Store) commitSubject(member, session string) string {
	return s.sessionPrefix(member, session) + kindCommit
}

// sessionFilter is every message of a session.
func (s *Store) sessionFilter(member, session string) string {
	return s.sessionPrefix(member, session) + "*"
}

// memberCommits is the commits of every session of member.
func (s *Store) memberCommits(member string) string {
	return "tb." + s.team + ".tr." + member + ".*." + kindCommit
}

// publish stores msg, creating the stream first when it is missing.
func (s *Store) publish(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	ack, err := s.js.PublishMsg(ctx, msg, opts...)
	if errors.Is(err, jetstream.ErrNoStreamResponse) && !s.ensured {
		if err := s.ensure(ctx); err != nil {
			return nil, err
		}
		ack, err = s.js.PublishMsg(ctx, msg, opts...)
	}
	return ack, err
}

// purge removes the messages of subject filter (with opts, those below a
// sequence); a missing stream has none.
func (s *Store) purge(ctx context.Context, filter string, opts ...jetstream.StreamPurgeOpt) error {
	st, err := s.js.Stream(ctx, s.Stream())
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err == nil {
		err = st.Purge(ctx, append(opts, jetstream.WithPurgeSubject(filter))...)
	}
	if err != nil {
		return teambus.Unavailablef("purge transcripts of team %s: %w", s.team, err)
	}
	return nil
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
