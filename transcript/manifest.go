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
	"strconv"
	"strings"
	"time"

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
	// Kept is set by Restore when it found the file already in place,
	// starting with the stored transcript, and left it as it was.
	Kept bool
}

// manifest is what a commit says about its session's transcript: the
// header Tb-Manifest, plus what the message itself tells (ids from its
// subject, the time it was stored, the digest from the state).
type manifest struct {
	V     int    `json:"v"`
	Gen   int64  `json:"gen"`
	Size  int64  `json:"size"`
	State []byte `json:"state"` // the sha256 state after Size bytes
	Tail  string `json:"tail"`  // sha256 of the last min(tailBytes, Size) bytes, first 16 bytes
	Cwd   string `json:"cwd,omitempty"`

	Member   string    `json:"-"`
	Session  string    `json:"-"`
	SHA256   string    `json:"-"`
	SyncedAt time.Time `json:"-"`
	Seq      uint64    `json:"-"`
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

// setState saves h's state and digest in the manifest.
func (m *manifest) setState(h hash.Hash) error {
	st, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return fmt.Errorf("save sha256 state: %w", err)
	}
	m.State, m.SHA256 = st, hexSum(h)
	return nil
}

// decodeCommit reads the manifest of a commit message. One that does not
// decode, or does not describe what its subject says, is ErrCorrupt.
func (s *Store) decodeCommit(msg *storedMsg) (*manifest, error) {
	var m manifest
	if err := json.Unmarshal([]byte(msg.Header.Get(hdrManifest)), &m); err != nil {
		return nil, fmt.Errorf("%w: manifest %d: %v", ErrCorrupt, msg.Seq, err)
	}
	m.Seq, m.SyncedAt = msg.Seq, msg.Time.UTC()
	// tb.<team>.tr.<member>.<session>.<gen>.c
	tok := strings.Split(msg.Subject, ".")
	if len(tok) != 7 || tok[1] != s.team || tok[6] != kindCommit || validate(tok[3], tok[4]) != nil || tok[5] != strconv.FormatInt(m.Gen, 10) {
		return nil, fmt.Errorf("%w: manifest %d on subject %q", ErrCorrupt, msg.Seq, msg.Subject)
	}
	m.Member, m.Session = tok[3], tok[4]
	h, ok := m.hasher()
	if m.V != 1 || m.Gen < 1 || m.Size < 0 || !ok || len(m.Tail) != 32 {
		return nil, fmt.Errorf("%w: manifest %d of %s session %s is not a version 1 manifest", ErrCorrupt, m.Seq, m.Member, m.Session)
	}
	// The state counts the bytes it hashed: it must count Size.
	if n := stateLen(m.State); n != uint64(m.Size) {
		return nil, fmt.Errorf("%w: manifest %d of %s session %s: state of %d bytes for size %d", ErrCorrupt, m.Seq, m.Member, m.Session, n, m.Size)
	}
	m.SHA256 = hexSum(h)
	return &m, nil
}

// stateLen is the byte count in a marshaled sha256 state (its last 8
// bytes, big-endian).
func stateLen(st []byte) uint64 {
	if len(st) < 8 {
		return ^uint64(0)
	}
	var n uint64
	for _, b := range st[len(st)-8:] {
		n = n<<8 | uint64(b)
	}
	return n
}

// lastCommit returns the newest manifest among the commits of filter; nil
// when there is none. A commit that does not decode is returned as
// ErrCorrupt with its sequence.
func (s *Store) lastCommit(ctx context.Context, filter string) (*manifest, uint64, error) {
	msg, err := s.get(ctx, directReq{LastFor: filter})
	if errors.Is(err, jetstream.ErrMsgNotFound) || errors.Is(err, errNoStream) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, teambus.Unavailablef("read transcripts of team %s: %w", s.team, err)
	}
	m, err := s.decodeCommit(msg)
	if err != nil {
		return nil, msg.Seq, err
	}
	return m, msg.Seq, nil
}

func hexSum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }
