package transcript

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
)

// roundBytes is how much a sync sends before it writes a manifest: a long
// first sync cut short by its deadline keeps what it stored.
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

type syncOpts struct{ cwd string }

// WithCwd records the session's working directory with the transcript
// (where a restore puts it when not told otherwise).
func WithCwd(cwd string) SyncOption { return func(o *syncOpts) { o.cwd = cwd } }

// Sync stores what was appended to the transcript at path since the last
// sync of (member, sessionID), up to its last complete line. It is
// incremental: it hashes and sends only the new bytes. A file that shrank
// or whose end changed is sent whole as a new generation. When ctx ends
// mid-way, what was sent in whole rounds is kept.
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
	old, prev, err := s.manifest(ctx, member, sessionID)
	if err != nil {
		if prev == 0 {
			return res, err
		}
		// A manifest that does not decode: start over at generation 1,
		// without the chunks it may have counted.
		if err := s.stream.Purge(ctx, jetstream.WithPurgeSubject(s.chunkSubject(member, sessionID, -1))); err != nil {
			return res, teambus.Unavailablef("reset transcript of %s session %s: %w", member, sessionID, err)
		}
		res.NewGen = true
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
	cwd := o.cwd
	if cwd == "" && old != nil {
		cwd = old.Cwd
	}
	buf := make([]byte, ChunkSize)
	subj := s.chunkSubject(member, sessionID, gen)
	// At least one round: a new generation writes its manifest even when
	// the file holds no complete line.
	for off := base; ; {
		roundEnd := min(end, off+roundBytes)
		for off < roundEnd {
			n := int(min(int64(ChunkSize), roundEnd-off))
			if _, err := f.ReadAt(buf[:n], off); err != nil {
				return res, teambus.Invalidf("read transcript of %s session %s: %v", member, sessionID, err)
			}
			if err := s.publishChunk(ctx, subj, member, sessionID, gen, off, buf[:n]); err != nil {
				return res, err
			}
			h.Write(buf[:n])
			off += int64(n)
			res.Sent += int64(n)
			if s.afterChunk != nil {
				s.afterChunk(off)
			}
		}
		m := &manifest{V: 1, Member: member, Session: sessionID, Gen: gen, Size: off, SHA256: hexSum(h), Cwd: cwd, SyncedAt: s.now().UTC()}
		if m.State, err = h.(encoding.BinaryMarshaler).MarshalBinary(); err != nil {
			return res, fmt.Errorf("save sha256 state: %w", err)
		}
		if m.Tail, err = tailHash(f, off); err != nil {
			return res, teambus.Invalidf("read transcript of %s session %s: %v", member, sessionID, err)
		}
		if prev, err = s.putManifest(ctx, m, prev); err != nil {
			return res, err
		}
		res.Size, res.SHA256 = off, m.SHA256
		if off >= end {
			break
		}
	}
	if res.NewGen && old != nil {
		// The old generation's chunks are no longer counted by any
		// manifest: a purge that fails leaves bytes, never a wrong
		// transcript.
		_ = s.stream.Purge(ctx, jetstream.WithPurgeSubject(s.chunkSubject(member, sessionID, old.Gen)))
	}
	res.Took = time.Since(start)
	return res, nil
}

// publishChunk stores data at off of generation gen and waits for its ack:
// the next chunk goes out only after this one is stored.
func (s *Store) publishChunk(ctx context.Context, subj, member, session string, gen, off int64, data []byte) error {
	msg := nats.NewMsg(subj)
	msg.Data = data
	msg.Header.Set(hdrOffset, strconv.FormatInt(off, 10))
	id := member + "." + session + "." + strconv.FormatInt(gen, 10) + "." + strconv.FormatInt(off, 10) + "." + strconv.Itoa(len(data))
	if _, err := s.js.PublishMsg(ctx, msg, jetstream.WithMsgID(id)); err != nil {
		return teambus.Unavailablef("send transcript of %s session %s at %d: %w", member, session, off, err)
	}
	return nil
}

// tailMatches reports whether the last min(tailBytes, m.Size) bytes before
// m.Size are still those the manifest hashed.
func tailMatches(f *os.File, m *manifest) bool {
	t, err := tailHash(f, m.Size)
	return err == nil && t == m.Tail
}

// tailHash returns the sha256 of the last min(tailBytes, end) bytes before
// end.
func tailHash(f *os.File, end int64) (string, error) {
	n := min(int64(tailBytes), end)
	b := make([]byte, n)
	if _, err := f.ReadAt(b, end-n); err != nil && err != io.EOF {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// lastLineEnd returns the offset just past the last newline in [base,
// size), or base when there is none: a line still being written is sent
// by a later sync.
func lastLineEnd(f *os.File, base, size int64) (int64, error) {
	const step = 64 << 10
	buf := make([]byte, step)
	for hi := size; hi > base; {
		lo := max(base, hi-step)
		b := buf[:hi-lo]
		if _, err := f.ReadAt(b, lo); err != nil && err != io.EOF {
			return 0, err
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			return lo + int64(i) + 1, nil
		}
		hi = lo
	}
	return base, nil
}
