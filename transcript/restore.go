package transcript

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"unicode/utf16"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
)

// Latest returns the newest synced transcript of member: the session
// whose manifest was written last. ErrNone when there is none.
func (s *Store) Latest(ctx context.Context, member string) (Info, error) {
	m, err := s.latest(ctx, member)
	if err != nil {
		return Info{}, err
	}
	return m.info(), nil
}

func (s *Store) latest(ctx context.Context, member string) (*manifest, error) {
	if err := teambus.ValidateID("member", member); err != nil {
		return nil, err
	}
	msg, err := s.stream.GetLastMsgForSubject(ctx, "tb."+s.team+"."+kindManifest+"."+member+".*")
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("%w of %s in team %s", ErrNone, member, s.team)
	}
	if err != nil {
		return nil, teambus.Unavailablef("read transcripts of %s in team %s: %w", member, s.team, err)
	}
	m, err := decodeManifest(msg.Data)
	if err != nil {
		return nil, err
	}
	if m.Member != member {
		return nil, fmt.Errorf("%w: manifest of %s stored under %s", ErrCorrupt, m.Member, member)
	}
	return m, nil
}

// Restore writes the newest transcript of member to
// <home>/.claude/projects/<ProjectKey(cwd)>/<session>.jsonl, where
// `claude --resume <session>` run in cwd with HOME=home finds it. An empty
// cwd is the one recorded at sync. The file is written beside its target
// and renamed into place only when its size and sha256 match the
// manifest: ErrCorrupt otherwise, ErrNone when member has no transcript.
// It returns the transcript's info and the path written.
func (s *Store) Restore(ctx context.Context, member, home, cwd string) (Info, string, error) {
	m, err := s.latest(ctx, member)
	if err != nil {
		return Info{}, "", err
	}
	info := m.info()
	if cwd == "" {
		cwd = m.Cwd
	}
	if home == "" || cwd == "" {
		return info, "", teambus.Invalidf("restore transcript of %s: need a home directory and a working directory", member)
	}
	dir := filepath.Join(home, ".claude", "projects", ProjectKey(cwd))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return info, "", fmt.Errorf("restore transcript of %s: %w", member, err)
	}
	path := filepath.Join(dir, m.Session+".jsonl")
	tmp, err := os.CreateTemp(dir, "."+m.Session+".*.tmp")
	if err != nil {
		return info, "", fmt.Errorf("restore transcript of %s: %w", member, err)
	}
	defer os.Remove(tmp.Name()) // gone after the rename; the leftover of a failure otherwise
	if err := s.assemble(ctx, m, tmp); err != nil {
		tmp.Close()
		return info, "", err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return info, "", fmt.Errorf("restore transcript of %s: %w", member, err)
	}
	if err := tmp.Close(); err != nil {
		return info, "", fmt.Errorf("restore transcript of %s: %w", member, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return info, "", fmt.Errorf("restore transcript of %s: %w", member, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // the rename's durability; the file is complete either way
		d.Close()
	}
	return info, path, nil
}

// assemble writes the first m.Size bytes of m's generation to w, from its
// chunks in stream order, taking from each only the bytes not yet written,
// and checks their sha256.
func (s *Store) assemble(ctx context.Context, m *manifest, w *os.File) error {
	h := sha256.New()
	subj := s.chunkSubject(m.Member, m.Session, m.Gen)
	var pos int64
	for seq := uint64(1); pos < m.Size; {
		msg, err := s.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return fmt.Errorf("%w: transcript of %s session %s: chunks end at %d of %d bytes", ErrCorrupt, m.Member, m.Session, pos, m.Size)
		}
		if err != nil {
			return teambus.Unavailablef("read transcript of %s session %s: %w", m.Member, m.Session, err)
		}
		seq = msg.Sequence + 1
		off, err := strconv.ParseInt(msg.Header.Get(hdrOffset), 10, 64)
		if err != nil || off < 0 {
			return fmt.Errorf("%w: transcript of %s session %s: chunk %d has no offset", ErrCorrupt, m.Member, m.Session, msg.Sequence)
		}
		end := off + int64(len(msg.Data))
		if off > pos || end <= pos {
			continue // a gap (never expected) or bytes already written
		}
		b := msg.Data[pos-off : min(end, m.Size)-off]
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("restore transcript of %s: %w", m.Member, err)
		}
		h.Write(b)
		pos += int64(len(b))
	}
	if got := hexSum(h); got != m.SHA256 {
		return fmt.Errorf("%w: transcript of %s session %s: sha256 %s, manifest says %s", ErrCorrupt, m.Member, m.Session, got, m.SHA256)
	}
	return nil
}

// maxKey is the longest project key Claude Code uses as is; a longer one
// is cut and suffixed with a hash of the directory.
const maxKey = 200

// ProjectKey is the directory under ~/.claude/projects where Claude Code
// keeps the transcripts of sessions run in cwd: every character but
// A-Z a-z 0-9 becomes "-" ("/tmp/ccwork-x" → "-tmp-ccwork-x"); a key over
// 200 characters is cut to 200 and given "-" and a base-36 hash of cwd,
// as Claude Code 2.1.330 does.
func ProjectKey(cwd string) string {
	u := utf16.Encode([]rune(cwd))
	key := make([]rune, 0, len(u))
	for _, c := range u {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			key = append(key, rune(c))
		} else {
			key = append(key, '-')
		}
	}
	if len(key) <= maxKey {
		return string(key)
	}
	var h int32
	for _, c := range u {
		h = h*31 + int32(c)
	}
	n := int64(h)
	if n < 0 {
		n = -n
	}
	return string(key[:maxKey]) + "-" + strconv.FormatInt(n, 36)
}
