package transcript

import (
	"context"

	"github.com/nats-io/nats.go"
)

// What the tests (package transcript_test, which starts real nodes) reach
// inside the package.

const (
	HdrOffset   = hdrOffset
	HdrManifest = hdrManifest
	MaxKey      = maxKey
)

func (s *Store) DataSubject(member, session string, gen int64) string {
	return s.dataSubject(member, session, gen)
}

func (s *Store) CommitSubject(member, session string) string { return s.commitSubject(member, session) }

// FirstSeq is the stream sequence of the first data chunk of a
// generation.
func (s *Store) FirstSeq(ctx context.Context, member, session string, gen int64) (uint64, error) {
	msg, err := s.get(ctx, directReq{Seq: 1, NextFor: s.dataSubject(member, session, gen)})
	if err != nil {
		return 0, err
	}
	return msg.Seq, nil
}

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
