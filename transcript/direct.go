package transcript

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A direct get, sent as a plain request: the stream needs no STREAM.INFO
// round trip first (jetstream.Stream does one), which a hook would pay on
// every sync.

// directReq is the body of $JS.API.DIRECT.GET.<stream>.
type directReq struct {
	Seq     uint64 `json:"seq,omitempty"`
	LastFor string `json:"last_by_subj,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`
}

// storedMsg is a message read back from the stream.
type storedMsg struct {
	Subject string
	Seq     uint64
	Time    time.Time
	Header  nats.Header
	Data    []byte
}

// get answers req; jetstream.ErrMsgNotFound when no message matches, and
// errNoStream when the stream does not exist.
func (s *Store) get(ctx context.Context, req directReq) (*storedMsg, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	r, err := s.js.Conn().RequestWithContext(ctx, "$JS.API.DIRECT.GET."+s.Stream(), body)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, errNoStream
	}
	if err != nil {
		return nil, err
	}
	if len(r.Data) == 0 {
		switch st := r.Header.Get("Status"); st {
		case "":
		case "404":
			return nil, jetstream.ErrMsgNotFound
		default:
			return nil, fmt.Errorf("direct get: status %s %s", st, r.Header.Get("Description"))
		}
	}
	seq, err := strconv.ParseUint(r.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("direct get: bad sequence header: %w", err)
	}
	tm, err := time.Parse(time.RFC3339Nano, r.Header.Get(jetstream.TimeStampHeaer))
	if err != nil {
		return nil, fmt.Errorf("direct get: bad time header: %w", err)
	}
	return &storedMsg{Subject: r.Header.Get(jetstream.SubjectHeader), Seq: seq, Time: tm, Header: r.Header, Data: r.Data}, nil
}
