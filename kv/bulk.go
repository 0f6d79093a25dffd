package kv

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/internal/jsbatch"
)

// CreateTasks creates the task records of team in order, in JetStream
// atomic batches of at most jsbatch.Max: a batch is stored whole or not at
// all, and each record in it expects to be new, so a batch in which any
// task already exists (written since the caller looked) is refused whole
// with ErrConflict. Batches before a failed one stay stored; done, when
// not nil, is called after each stored batch with the count so far.
func (s *Store) CreateTasks(ctx context.Context, team string, tasks []*teambus.Task, done func(n int)) error {
	if _, err := s.stateBucket(ctx, team); err != nil {
		return err
	}
	bucket := StatePrefix + team
	upgraded := false
	for start := 0; start < len(tasks); start += jsbatch.Max {
		end := min(start+jsbatch.Max, len(tasks))
		msgs := make([]*nats.Msg, 0, end-start)
		for _, t := range tasks[start:end] {
			if err := teambus.ValidateID("task", t.ID); err != nil {
				return err
			}
			b, err := json.Marshal(t)
			if err != nil {
				return fmt.Errorf("encode task %s: %w", t.ID, err)
			}
			msgs = append(msgs, &nats.Msg{Subject: subject(bucket, preTask+t.ID), Data: b, Header: nats.Header{
				jetstream.ExpectedLastSubjSeqHeader: []string{"0"}, // new: no record of the key yet
			}})
		}
		ack, err := jsbatch.Publish(ctx, s.js.Conn(), msgs)
		if jsbatch.Disabled(err) && !upgraded {
			upgraded = true
			if uerr := s.Upgrade(ctx, team); uerr != nil {
				return teambus.Unavailablef("create tasks of team %s: its state bucket predates batch writes and this connection can not upgrade it: %w", team, uerr)
			}
			ack, err = jsbatch.Publish(ctx, s.js.Conn(), msgs)
		}
		switch {
		case err == nil:
			// The batch is stored at consecutive sequences, the last at
			// the ack's (claim board, board.go).
			s.boardAfterAll(ctx, team, tasks[start:end], ack.Sequence)
		case isConflict(err):
			return fmt.Errorf("create tasks %s..%s of team %s: one exists already: %w", tasks[start].ID, tasks[end-1].ID, team, ErrConflict)
		default:
			return unavailable(fmt.Sprintf("create tasks %s..%s", tasks[start].ID, tasks[end-1].ID), err)
		}
		if done != nil {
			done(end)
		}
	}
	return nil
}
