package transcript

import (
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
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
	// ProjectKey is the directory under ~/.claude/projects the session's
	// transcript was in: ProjectKey(Cwd), unless Claude Code chose another
	// (as it does in a git worktree); "" when neither is known.
	ProjectKey string
	// Kept is set by Restore when it found the file already in place,
	// starting with the stored transcript, and left it as it was.
	Kept bool
}

// manifest is what a commit says about its session's transcript: the
// header Tb-Manifest, plus what the message itself tells (ids from its
// subject, the time it was stored, the digest from the state). Its keys
// are short: it is stored once per sync.
type manifest struct {
	V    int   `json:"v"`
	Gen  int64 `json:"g"`
	Size int64 `json:"n"`
	// State is the sha256 state after Size bytes, packed (packState).
	State []byte `json:"s"`
	// Tail is the start of the sha256 of the last min(tailBytes, Size)
	// bytes.
	Tail []byte `json:"t"`
	Cwd  string `json:"w,omitempty"`
	// Key is the project directory Claude Code kept the transcript in,
	// when it is not ProjectKey(Cwd) (a git worktree, say).
	Key string `json:"k,omitempty"`

	Member   string    `json:"-"`
	Session  string    `json:"-"`
	SHA256   string    `json:"-"`
	SyncedAt time.Time `json:"-"`
	Seq      uint64    `json:"-"`
}

// tailLen is how many bytes of the tail's sha256 a manifest keeps.
const tailLen = 12

func (m *manifest) info() Info {
	key := m.Key
	if key == "" && m.Cwd != "" {
		key = ProjectKey(m.Cwd)
	}
	return Info{Member: m.Member, SessionID: m.Session, Cwd: m.Cwd, ProjectKey: key, Size: m.Size, SHA256: m.SHA256, SyncedAt: m.SyncedAt, Gen: m.Gen}
}

// hasher returns the sha256 digest in the state the manifest saved.
func (m *manifest) hasher() (hash.Hash, bool) {
	h := sha256.New()
	u, ok := h.(encoding.BinaryUnmarshaler)
	if !ok || u.UnmarshalBinary(unpackState(m.State, m.Size)) != nil {
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
	m.State, m.SHA256 = packState(st, m.Size), hexSum(h)
	return nil
}

// crypto/sha256 marshals its state as "sha\x03", the eight 32-bit words
// of the digest, the 64-byte block being filled and the byte count. Of the
// block only the first count%64 bytes matter, and the count is the
// manifest's Size: packState keeps the words and those bytes (32 to 95
// bytes instead of 108). A state in any other layout is kept whole, and
// unpackState tells the two apart by length.
const (
	stateMagic = "sha\x03"
	stateLen   = len(stateMagic) + 32 + 64 + 8
)

func packState(st []byte, size int64) []byte {
	if len(st) != stateLen || string(st[:4]) != stateMagic || stateCount(st) != uint64(size) {
		return st
	}
	return append(append([]byte{}, st[4:36]...), st[36:36+size%64]...)
}

func unpackState(p []byte, size int64) []byte {
	if size < 0 || len(p) != 32+int(size%64) {
		return p
	}
	st := make([]byte, 0, stateLen)
	st = append(st, stateMagic...)
	st = append(st, p[:32]...)
	st = append(st, p[32:]...)
	st = append(st, make([]byte, 64-len(p[32:]))...)
	return binary.BigEndian.AppendUint64(st, uint64(size))
}

// stateCount is the byte count of a marshaled sha256 state.
func stateCount(st []byte) uint64 { return binary.BigEndian.Uint64(st[len(st)-8:]) }

// decodeCommit reads the manifest of a commit message. One that does not
// decode, or does not describe what its subject says, is ErrCorrupt.
func (s *Store) decodeCommit(msg *storedMsg) (*manifest, error) {
	var m manifest
	if err := json.Unmarshal([]byte(msg.Header.Get(hdrManifest)), &m); err != nil {
		return nil, fmt.Errorf("%w: manifest %d: %v", ErrCorrupt, msg.Seq, err)
	}
	m.Seq, m.SyncedAt = msg.Seq, msg.Time.UTC()
	// tb.<team>.tr.<member>.<session>.c
	tok := strings.Split(msg.Subject, ".")
	if len(tok) != 6 || tok[0] != "tb" || tok[1] != s.team || tok[2] != "tr" || tok[5] != kindCommit || validate(tok[3], tok[4]) != nil {
		return nil, fmt.Errorf("%w: manifest %d on subject %q", ErrCorrupt, msg.Seq, msg.Subject)
	}
	m.Member, m.Session = tok[3], tok[4]
	if m.V != 1 || m.Gen < 1 || m.Size < 0 || len(m.Tail) != tailLen || (m.Key != "" && !validKey(m.Key)) {
		return nil, fmt.Errorf("%w: manifest %d of %s session %s is not a version 1 manifest", ErrCorrupt, m.Seq, m.Member, m.Session)
	}
	h, ok := m.hasher()
	// The state counts the bytes it hashed: it must count Size.
	if !ok || stateCount(unpackState(m.State, m.Size)) != uint64(m.Size) {
		return nil, fmt.Errorf("%w: manifest %d of %s session %s: its sha256 state is not one of %d bytes", ErrCorrupt, m.Seq, m.Member, m.Session, m.Size)
	}
	m.SHA256 = hexSum(h)
	return &m, nil
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
