package transcript

import (
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
)

// tailBytes is how much of a transcript's end a sync checks is unchanged
// before it appends to what is stored.
const tailBytes = 4096

// Info describes a stored transcript.
type Info struct {
	Member, SessionID, Cwd string
	Size                   int64
	SHA256                 string
	SyncedAt               time.Time
	// Gen is the generation: it grows when the file shrank or its end
	// changed and was sent whole again.
	Gen int64
}

// manifest is the last message of a session's manifest subject.
type manifest struct {
	V        int       `json:"v"`
	Member   string    `json:"member"`
	Session  string    `json:"session"`
	Gen      int64     `json:"gen"`
	Size     int64     `json:"size"`
	SHA256   string    `json:"sha256"`
	State    []byte    `json:"state"` // the sha256 state after Size bytes
	Tail     string    `json:"tail"`  // sha256 of the last min(tailBytes, Size) bytes
	Cwd      string    `json:"cwd,omitempty"`
	SyncedAt time.Time `json:"synced_at"`
}

func (m *manifest) info() Info {
	return Info{Member: m.Member, SessionID: m.Session, Cwd: m.Cwd, Size: m.Size, SHA256: m.SHA256, SyncedAt: m.SyncedAt, Gen: m.Gen}
}

// hasher returns the sha256 digest in the state the manifest saved.
func (m *manifest) hasher() (hash.Hash, bool) {
	h := sha256.New()
	u, ok := h.(encoding.BinaryUnmarshaler)
	if !ok || u.UnmarshalBinary(m.State) != nil {
		return nil, false
	}
	return h, true
}

// decodeManifest decodes a manifest message; a manifest that does not
// decode or does not describe what it should is ErrCorrupt.
func decodeManifest(b []byte) (*manifest, error) {
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: manifest: %v", ErrCorrupt, err)
	}
	if m.V != 1 || m.Gen < 1 || m.Size < 0 || len(m.SHA256) != 2*sha256.Size || validate(m.Member, m.Session) != nil {
		return nil, fmt.Errorf("%w: manifest of %s/%s is not a version 1 manifest", ErrCorrupt, m.Member, m.Session)
	}
	return &m, nil
}

// manifest returns the manifest of (member, session) and its stream
// sequence; nil and 0 when none.
func (s *Store) manifest(ctx context.Context, member, session string) (*manifest, uint64, error) {
	msg, err := s.stream.GetLastMsgForSubject(ctx, s.manifestSubject(member, session))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, teambus.Unavailablef("read transcript manifest of %s session %s: %w", member, session, err)
	}
	m, err := decodeManifest(msg.Data)
	if err != nil {
		return nil, msg.Sequence, err
	}
	return m, msg.Sequence, nil
}

// putManifest stores m if the subject's last message is still at prev
// (0: none), rolling up the older ones, and returns its sequence.
func (s *Store) putManifest(ctx context.Context, m *manifest, prev uint64) (uint64, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return 0, fmt.Errorf("encode transcript manifest: %w", err)
	}
	msg := nats.NewMsg(s.manifestSubject(m.Member, m.Session))
	msg.Data = b
	msg.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	ack, err := s.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(prev))
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
			return 0, teambus.Conflictf("transcript of %s session %s: synced by another process at the same time", m.Member, m.Session)
		}
		return 0, teambus.Unavailablef("write transcript manifest of %s session %s: %w", m.Member, m.Session, err)
	}
	return ack.Sequence, nil
}

func hexSum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }
