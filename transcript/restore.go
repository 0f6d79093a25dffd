package transcript

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/internal/atomicfile"
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
	m, _, err := s.lastCommit(ctx, s.memberCommits(member))
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("%w of %s in team %s", ErrNone, member, s.team)
	}
	return m, nil
}

// Restore writes the newest transcript of member to
// <home>/.claude/projects/<ProjectKey(cwd)>/<session>.jsonl, where
// `claude --resume <session>` run in cwd with HOME=home finds it. An empty
// cwd is the one recorded at sync; for that one the directory is the one
// Claude Code used (Info.ProjectKey), which differs in a git worktree. The file is written beside its target
// and renamed into place only when its size and sha256 match the
// manifest (ErrCorrupt otherwise, and nothing is written there), ErrNone
// when member has no transcript. A file already there whose first Size
// bytes are the stored transcript is kept as it is (Info.Kept): it is the
// same conversation, with what was written after the last sync.
// It returns the transcript's info and the path written.
func (s *Store) Restore(ctx context.Context, member, home, cwd string) (Info, string, error) {
	m, err := s.latest(ctx, member)
	if err != nil {
		return Info{}, "", err
	}
	info := m.info()
	key := info.ProjectKey
	if cwd != "" && cwd != m.Cwd {
		key = ProjectKey(cwd)
	}
	if home == "" || key == "" {
		return info, "", teambus.Invalidf("restore transcript of %s: need a home directory and a working directory", member)
	}
	dir := filepath.Join(home, ".claude", "projects", key)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return info, "", fmt.Errorf("restore transcript of %s: %w", member, err)
	}
	path := filepath.Join(dir, m.Session+".jsonl")
	if extends(path, m) {
		// Back on the host it ran on: the file there holds all that was
		// stored and what the crash kept from being synced.
		info.Kept = true
		return info, path, nil
	}
	if err := atomicfile.WriteFunc(path, 0o600, func(w io.Writer) error { return s.assemble(ctx, m, w) }); err != nil {
		return info, "", fmt.Errorf("restore transcript of %s: %w", member, err)
	}
	return info, path, nil
}

// WriteTo writes the transcript of (member, session) to w, checked as
// Restore checks it; on ErrCorrupt part of it may have been written.
func (s *Store) WriteTo(ctx context.Context, member, session string, w io.Writer) (Info, error) {
	if err := validate(member, session); err != nil {
		return Info{}, err
	}
	m, _, err := s.lastCommit(ctx, s.commitSubject(member, session))
	if err != nil {
		return Info{}, err
	}
	if m == nil {
		return Info{}, fmt.Errorf("%w of %s session %s in team %s", ErrNone, member, session, s.team)
	}
	return m.info(), s.assemble(ctx, m, w)
}

// List returns the newest commit of every session of every member, sorted
// by member and session. A session whose newest commit does not decode is
// listed with its ids only (Gen 0).
func (s *Store) List(ctx context.Context) ([]Info, error) {
	st, err := s.js.Stream(ctx, s.Stream())
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	var si *jetstream.StreamInfo
	if err == nil {
		si, err = st.Info(ctx, jetstream.WithSubjectFilter("tb."+s.team+".tr.*.*."+kindCommit))
	}
	if err != nil {
		return nil, teambus.Unavailablef("list transcripts of team %s: %w", s.team, err)
	}
	seen := map[[2]string]bool{}
	var out []Info
	for subj := range si.State.Subjects {
		tok := strings.Split(subj, ".")
		if len(tok) != 6 || validate(tok[3], tok[4]) != nil || seen[[2]string{tok[3], tok[4]}] {
			continue
		}
		seen[[2]string{tok[3], tok[4]}] = true
		m, _, err := s.lastCommit(ctx, s.commitSubject(tok[3], tok[4]))
		switch {
		case errors.Is(err, ErrCorrupt):
			out = append(out, Info{Member: tok[3], SessionID: tok[4]})
		case err != nil:
			return nil, err
		case m != nil:
			out = append(out, m.info())
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Member != out[j].Member {
			return out[i].Member < out[j].Member
		}
		return out[i].SessionID < out[j].SessionID
	})
	return out, nil
}

// extends reports whether the file at path starts with the transcript m
// describes.
func extends(path string, m *manifest) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() < m.Size {
		return false
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, m.Size)); err != nil {
		return false
	}
	return hexSum(h) == m.SHA256
}

// assemble writes the first m.Size bytes of m's generation to w, from the
// session's messages of that generation in stream order up to m's commit,
// taking from each only the bytes not yet written, and checks their
// sha256.
func (s *Store) assemble(ctx context.Context, m *manifest, w io.Writer) error {
	h := sha256.New()
	filter := s.sessionFilter(m.Member, m.Session)
	data, gen := s.dataSubject(m.Member, m.Session, m.Gen), strconv.FormatInt(m.Gen, 10)
	var pos int64
	for seq := uint64(1); pos < m.Size && seq <= m.Seq; {
		msg, err := s.get(ctx, directReq{Seq: seq, NextFor: filter})
		if errors.Is(err, jetstream.ErrMsgNotFound) || errors.Is(err, errNoStream) {
			break
		}
		if err != nil {
			return teambus.Unavailablef("read transcript of %s session %s: %w", m.Member, m.Session, err)
		}
		seq = msg.Seq + 1
		if msg.Subject != data && !commitOfGen(msg, gen) {
			continue // another generation's
		}
		off, err := strconv.ParseInt(msg.Header.Get(hdrOffset), 10, 64)
		if err != nil || off < 0 {
			return fmt.Errorf("%w: transcript of %s session %s: message %d has no offset", ErrCorrupt, m.Member, m.Session, msg.Seq)
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
	if pos < m.Size {
		return fmt.Errorf("%w: transcript of %s session %s: stored bytes end at %d of %d", ErrCorrupt, m.Member, m.Session, pos, m.Size)
	}
	if got := hexSum(h); got != m.SHA256 {
		return fmt.Errorf("%w: transcript of %s session %s: sha256 %s, manifest says %s", ErrCorrupt, m.Member, m.Session, got, m.SHA256)
	}
	return nil
}

// commitOfGen reports whether msg is a commit of generation gen.
func commitOfGen(msg *storedMsg, gen string) bool {
	if !strings.HasSuffix(msg.Subject, "."+kindCommit) {
		return false
	}
	var m struct {
		Gen json.Number `json:"g"`
	}
	return json.Unmarshal([]byte(msg.Header.Get(hdrManifest)), &m) == nil && string(m.Gen) == gen
}

// validKey reports whether key can be a project directory: what
// ProjectKey makes, nothing that leaves the projects directory.
func validKey(key string) bool {
	if key == "" || len(key) > maxKey+1+13 {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
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
