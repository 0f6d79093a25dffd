package transcript

import (
	"context"

	"github.com/nats-io/nats.go"
)

// What the tests (package transcript_test, which starts real nodes) reach
// inside the package.

const (
	KindData    = kindData
	KindCommit  = kindCommit
	HdrOffset   = hdrOffset
	HdrManifest = hdrManifest
	MaxKey      = maxKey
)

func (s *Store) GenSubject(member, session string, gen int64, kind string) string {
	return s.genSubject(member, session, gen, kind)
}

// FirstSeq is the stream sequence of the first message of a generation.
func (s *Store) FirstSeq(ctx context.Context, member, session string, gen int64) (uint64, error) {
	msg, err := s.get(ctx, directReq{Seq: 1, NextFor: s.genFilter(member, session, gen)})
	if err != nil {
		return 0, err
	}
	return msg.Seq, nil
}

// SetAfterChunk runs f after each stored message with bytes.
func (s *Store) SetAfterChunk(f func(off int64)) { s.afterChunk = f }

// DecodeCommit decodes a commit of team stored on subject with the
// manifest header.
func DecodeCommit(team, subject, header string) (Info, error) {
	s := &Store{team: team}
	msg := &storedMsg{Subject: subject, Seq: 1, Header: nats.Header{}}
	msg.Header.Set(hdrManifest, header)
	m, err := s.decodeCommit(msg)
	if err != nil {
		return Info{}, err
	}
	return m.info(), nil
}
