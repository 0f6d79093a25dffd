package jsbatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus/internal/jserr"
)

// Headers of a JetStream atomic batch publish.
const (
	hdrID     = "Nats-Batch-Id"
	hdrSeq    = "Nats-Batch-Sequence"
	hdrCommit = "Nats-Batch-Commit"
)

// Max is the most messages teambus puts in one batch: half the server's
// default limit, so a deployment that lowered it a little still takes it.
const Max = 500

// Publish publishes msgs (each with a non-nil Header) as one atomic
// batch and returns the ack of the commit, which carries the stream
// sequence of the last message. Any expected-sequence header of any
// message that fails refuses the whole batch.
func Publish(ctx context.Context, nc *nats.Conn, msgs []*nats.Msg) (*jetstream.PubAck, error) {
	if len(msgs) == 0 {
		return nil, errors.New("publish batch: no messages")
	}
	var raw [16]byte
	_, _ = rand.Read(raw[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	id := hex.EncodeToString(raw[:])
	for i, m := range msgs {
		if m.Header == nil {
			m.Header = nats.Header{}
		}
		m.Header.Set(hdrID, id)
		m.Header.Set(hdrSeq, strconv.Itoa(i+1))
		if i < len(msgs)-1 {
			if err := nc.PublishMsg(m); err != nil {
				return nil, err
			}
			continue
		}
		m.Header.Set(hdrCommit, "1")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	resp, err := nc.RequestMsgWithContext(ctx, msgs[len(msgs)-1])
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return nil, jetstream.ErrNoStreamResponse
		}
		return nil, err
	}
	var r struct {
		jetstream.PubAck
		Error *jetstream.APIError `json:"error,omitempty"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return nil, fmt.Errorf("decode batch ack: %w", err)
	}
	if r.Error != nil {
		return nil, r.Error
	}
	return &r.PubAck, nil
}

// Disabled reports the server's answer to a batch on a stream without
// AllowAtomicPublish.
func Disabled(err error) bool { return jserr.Is(err, jserr.AtomicPublishDisabled) }

// AllowAtomic turns on AllowAtomicPublish on stream name, unless it is on.
func AllowAtomic(ctx context.Context, js jetstream.JetStream, name string) error {
	st, err := js.Stream(ctx, name)
	if err != nil {
		return fmt.Errorf("open stream %s: %w", name, err)
	}
	cfg := st.CachedInfo().Config
	if cfg.AllowAtomicPublish {
		return nil
	}
	cfg.AllowAtomicPublish = true
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("allow atomic publish on stream %s: %w", name, err)
	}
	return nil
}
