package transcript

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
)

// roundBytes is how much a sync sends before it commits: a long first
// sync cut short by its deadline keeps what it committed.
const roundBytes = 4 << 20

// SyncResult is what one sync did.
type SyncResult struct {
	SessionID string
	// Size is the stored size after the sync, Sent the bytes this sync
	// sent.
	Size, Sent int64
	SHA256     string
	Took       time.Duration
	// Gen is the stored generation; NewGen is set when this sync started
	// it (the file shrank or its end changed).
	Gen    int64
	NewGen bool
}

// SyncOption sets an optional field of a sync.
type SyncOption func(*syncOpts)

type syncOpts struct {
	cwd    string
	stored func(off int64)
}

// OnStored calls f after each message with bytes of this sync is stored,
// with the offset its bytes end at: progress, or a fault injected between
// a data chunk and its commit.
func OnStored(f func(off int64)) SyncOption { return func(o *syncOpts) { o.stored = f } }

// WithCwd records the session's working directory with the transcript
// (where a restore puts it when not told otherwise).
func WithCwd(cwd string) SyncOption { return func(o *syncOpts) { o.cwd = cwd } }

// Sync stores what was appended to the transcript at path since the last
// sync of (member, sessionID), up to its last complete line. It is
// incremental: it hashes and sends only the new bytes, in one message when
// they are few. A file that shrank or whose end changed is sent whole as a
// new generation. When ctx ends mid-way, what was committed in whole
// rounds is kept. Two syncs of one session at once: one fails with
// ErrConflict and stores nothing the manifest counts.
func (s *Store) Sync(ctx context.Context, member, sessionID, path string, opts ...SyncOption) (SyncResult, error) {
	start := time.Now()
	var o syncOpts
	for _, f := range opts {
		f(&o)
	}
	res := SyncResult{SessionID: sessionID}
	if err := validate(member, sessionID); err != nil {
		return res, err
	}
	f, err := os.Open(path)
	if err != nil {
		return res, teambus.Invalidf("transcript of %s session %s: %v", member, sessionID, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return res, teambus.Invalidf("transcript of %s session %s: %v", member, sessionID, err)
	}
	if !fi.Mode().IsRegular() {
		return res, teambus.Invalidf("transcript of %s session %s: %s is not a regular file", member, sessionID, path)
	}
	size := fi.Size()
	old, prev, err := s.lastCommit(ctx, s.commitSubject(member, sessionID))
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			return res, err
		}
		// A commit that does not decode: start over at generation 1,
		// without anything stored of the session.
		if err := s.purge(ctx, s.sessionFilter(member, sessionID)); err != nil {
			return res, err
		}
		prev, res.NewGen = 0, true
	}
	var h hash.Hash
	base, gen := int64(0), int64(1)
	if old != nil {
		gen = old.Gen
		if hh, ok := old.hasher(); ok && size >= old.Size && tailMatches(f, old) {
			h, base = hh, old.Size
		} else {
			gen++
			res.NewGen = true
		}
	}
	if h == nil {
		h = sha256.New()
	}
	end, err := lastLineEnd(f, base, size)
	if err != nil {
		return res, teambus.Invalidf("read transcript of %s session %s: %v", member, sessionID, err)
	}
	res.Gen, res.Size = gen, base
	if old != nil && !res.NewGen {
		res.SHA256 = old.SHA256
	}
	if end <= base && !res.NewGen {
		res.Took = time.Since(start)
		return res, nil
	}
	cwd, key := o.cwd, keyOf(path)
	if cwd == "" && old != nil {
		cwd = old.Cwd
	}
	if cwd != "" && key == ProjectKey(cwd) {
		key = "" // the usual case: nothing to store
	}
	buf := make([]byte, min(int64(ChunkSize), max(end-base, 1)))
	// firstSeq is the sequence of this sync's first commit.
	var firstSeq uint64
	// At least one round: a new generation commits even when the file
	// holds no complete line.
	for off := base; ; {
		roundEnd := min(end, off+roundBytes)
		var inline []byte
		for off < roundEnd {
			n := int(min(int64(ChunkSize), roundEnd-off))
			if _, err := f.ReadAt(buf[:n], off); err != nil {
				return res, teambus.Invalidf("read transcript of %s session %s: %v", member, sessionID, err)
			}
			h.Write(buf[:n])
			if off+int64(n) == roundEnd && n <= inlineMax {
				// The round's last piece goes in its commit.
				inline = buf[:n]
				break
			}
			if err := s.publishData(ctx, member, sessionID, gen, off, buf[:n]); err != nil {
				return res, err
			}
			off += int64(n)
			res.Sent += int64(n)
			if o.stored != nil {
				o.stored(off)
			}
		}
		m := &manifest{V: 1, Member: member, Session: sessionID, Gen: gen, Size: off + int64(len(inline)), Cwd: cwd, Key: key}
		if err := m.setState(h); err != nil {
			return res, err
		}
		if m.Tail, err = tailHash(f, m.Size); err != nil {
			return res, teambus.Invalidf("read transcript of %s session %s: %v", member, sessionID, err)
		}
		if prev, err = s.commit(ctx, m, off, inline, prev); err != nil {
			return res, err
		}
		if firstSeq == 0 {
			firstSeq = prev
		}
		off = m.Size
		res.Sent += int64(len(inline))
		res.Size, res.SHA256 = off, m.SHA256
		if len(inline) > 0 {
			if o.stored != nil {
				o.stored(off)
			}
		}
		if off >= end {
			break
		}
	}
	if res.NewGen && old != nil {
		// The old generation is no longer counted by the newest commit: a
		// purge that fails leaves bytes, never a wrong transcript.
		_ = s.purge(ctx, s.dataSubject(member, sessionID, old.Gen))
		_ = s.purge(ctx, s.commitSubject(member, sessionID), jetstream.WithPurgeSequence(firstSeq))
	}
	res.Took = time.Since(start)
	return res, nil
}

// publishData stores data at off of generation gen and waits for its ack:
// the next message goes out only after this one is stored. A retried
// chunk is stored once (its publish id).
func (s *Store) publishData(ctx context.Context, member, session string, gen, off int64, data []byte) error {
	msg := nats.NewMsg(s.dataSubject(member, session, gen))
	msg.Data = data
	msg.Header.Set(hdrOffset, strconv.FormatInt(off, 10))
	id := member + "." + session + "." + strconv.FormatInt(gen, 10) + "." + strconv.FormatInt(off, 10) + "." + strconv.Itoa(len(data))
	if _, err := s.publish(ctx, msg, jetstream.WithMsgID(id)); err != nil {
		return teambus.Unavailablef("send transcript of %s session %s at %d: %w", member, session, off, err)
	}
	return nil
}

// commit stores the commit of m, carrying data at off, if the newest
// commit of the session is still prev (0: none). It returns the commit's
// sequence.
func (s *Store) commit(ctx context.Context, m *manifest, off int64, data []byte, prev uint64) (uint64, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return 0, err
	}
	msg := nats.NewMsg(s.commitSubject(m.Member, m.Session))
	msg.Data = data
	msg.Header.Set(hdrOffset, strconv.FormatInt(off, 10))
	msg.Header.Set(hdrManifest, string(b))
	ack, err := s.publish(ctx, msg, jetstream.WithExpectLastSequencePerSubject(prev))
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
			return 0, teambus.Conflictf("transcript of %s session %s: synced by another process at the same time", m.Member, m.Session)
		}
		return 0, teambus.Unavailablef("commit transcript of %s session %s: %w", m.Member, m.Session, err)
	}
	return ack.Sequence, nil
}

// keyOf returns the project directory of a transcript at
// .../projects/<key>/<session>.jsonl, or "".
func keyOf(path string) string {
	dir := filepath.Dir(path)
	if key := filepath.Base(dir); filepath.Base(filepath.Dir(dir)) == "projects" && validKey(key) {
		return key
	}
	return ""
}

// tailMatches reports whether the last min(tailBytes, m.Size) bytes before
// m.Size are still those the manifest hashed.
func tailMatches(f *os.File, m *manifest) bool {
	t, err := tailHash(f, m.Size)
	return err == nil && bytes.Equal(t, m.Tail)
}

// tailHash returns the first tailLen bytes of the sha256 of the last
// min(tailBytes, end) bytes before end.
func tailHash(f *os.File, end int64) ([]byte, error) {
	n := min(int64(tailBytes), end)
	b := make([]byte, n)
	if _, err := f.ReadAt(b, end-n); err != nil && err != io.EOF {
		return nil, err
	}
	sum := sha256.Sum256(b)
	return sum[:tailLen], nil
}

// lastLineEnd returns the offset just past the last newline in [base,
// size), or base when there is none: a line still being written is sent
// by a later sync.
func lastLineEnd(f *os.File, base, size int64) (int64, error) {
	// A transcript almost always ends with a newline: read a little first.
	step := int64(4 << 10)
	buf := make([]byte, 64<<10)
	for hi := size; hi > base; {
		lo := max(base, hi-step)
		b := buf[:hi-lo]
		if _, err := f.ReadAt(b, lo); err != nil && err != io.EOF {
			return 0, err
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			return lo + int64(i) + 1, nil
		}
		hi, step = lo, min(2*step, int64(len(buf)))
	}
	return base, nil
}
