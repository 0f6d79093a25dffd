package kv

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/nats-io/nats.go/jetstream"
)

// Repair actions.
const (
	// RepairRestore puts back the newest earlier revision of the key that
	// decodes.
	RepairRestore = "restore"
	// RepairDelete deletes the key: no earlier revision decodes (or the
	// key was deleted before the damaged value was written).
	RepairDelete = "delete"
	// RepairNone: the record decodes by now, or is gone; nothing to do.
	RepairNone = "none"
	// RepairRefuse: a team record without a good revision. Deleting it
	// would leave the team's buckets and streams without a team; that is
	// `teambus team delete`'s to do.
	RepairRefuse = "refuse"
)

// RepairStep is what Repair does (or, without apply, would do) to one
// damaged record.
type RepairStep struct {
	DamagedRecord
	// Action is one of RepairRestore, RepairDelete, RepairNone,
	// RepairRefuse.
	Action string `json:"action"`
	// From is the revision a restore puts back.
	From uint64 `json:"from_revision,omitempty"`
	// Applied says the step was written; NewRevision is the revision the
	// restored record got.
	Applied     bool   `json:"applied"`
	NewRevision uint64 `json:"new_revision,omitempty"`
}

// Damaged returns the damaged records of team's state, sorted by key. It
// reads the bucket directly, so it works when the team record itself is
// damaged (where Snapshot fails).
func (s *Store) Damaged(ctx context.Context, team string) ([]DamagedRecord, error) {
	kv, err := s.stateBucket(ctx, team)
	if err != nil {
		return nil, err
	}
	var out []DamagedRecord
	err = readBucket(ctx, s.js.Conn(), kv.Bucket(), func(e entry) error {
		if _, err := DecodeRecord(team, e.key, e.value); err != nil {
			out = append(out, DamagedRecord{Key: e.key, Revision: e.rev, Reason: reason(err)})
		}
		return nil
	})
	if err != nil {
		return nil, unavailable("read team "+team, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Repair plans, and with apply carries out, the repair of every damaged
// record of team: a record is put back to the newest earlier revision of
// its key that decodes (the history the bucket keeps), or deleted when
// there is none. Each write is a compare-and-set on the damaged revision:
// a record someone changed in between is read and judged again. Repair is
// idempotent: once nothing is damaged it does nothing. It needs a
// connection that may read a key's history (the operator's).
func (s *Store) Repair(ctx context.Context, team string, apply bool) ([]RepairStep, error) {
	damaged, err := s.Damaged(ctx, team)
	if err != nil {
		return nil, err
	}
	kv, err := s.stateBucket(ctx, team)
	if err != nil {
		return nil, err
	}
	steps := make([]RepairStep, 0, len(damaged))
	for _, d := range damaged {
		step, err := s.repairKey(ctx, kv, team, d, apply)
		if err != nil {
			return steps, fmt.Errorf("repair %s of team %s: %w", d.Key, team, err)
		}
		steps = append(steps, step)
	}
	return steps, nil
}

// repairKey plans and applies the repair of one damaged key, reading it
// again first and retrying on a lost compare-and-set.
func (s *Store) repairKey(ctx context.Context, kv jetstream.KeyValue, team string, d DamagedRecord, apply bool) (RepairStep, error) {
	step := RepairStep{DamagedRecord: d}
	err := Retry(ctx, func() error {
		step = RepairStep{DamagedRecord: d, Action: RepairNone}
		e, err := kv.Get(ctx, d.Key)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			return nil // gone since it was read
		}
		if err != nil {
			return unavailable("read "+d.Key, err)
		}
		derr := decodeErr(team, d.Key, e.Value())
		if derr == nil {
			return nil // written again since it was read
		}
		step.Revision, step.Reason = e.Revision(), reason(derr)
		good, err := lastGood(ctx, kv, team, d.Key, e.Revision())
		if err != nil {
			return err
		}
		switch {
		case good != nil:
			step.Action, step.From = RepairRestore, good.Revision()
		case d.Key == keyTeam:
			step.Action = RepairRefuse
			return nil
		default:
			step.Action = RepairDelete
		}
		if !apply {
			return nil
		}
		if good != nil {
			n, err := kv.Update(ctx, d.Key, good.Value(), e.Revision())
			if err != nil {
				return repairWriteErr(d.Key, err)
			}
			step.Applied, step.NewRevision = true, n
			return nil
		}
		if err := kv.Delete(ctx, d.Key, jetstream.LastRevision(e.Revision())); err != nil {
			return repairWriteErr(d.Key, err)
		}
		step.Applied = true
		return nil
	})
	return step, err
}

func decodeErr(team, key string, value []byte) error {
	_, err := DecodeRecord(team, key, value)
	return err
}

func repairWriteErr(key string, err error) error {
	if isConflict(err) {
		return fmt.Errorf("write %s: %w", key, ErrConflict)
	}
	return unavailable("write "+key, err)
}

// lastGood returns the newest revision of key before rev that decodes,
// or nil when there is none: no earlier revision is kept, none decodes,
// or the key was deleted (or purged) before rev, which a restore must not
// undo.
func lastGood(ctx context.Context, kv jetstream.KeyValue, team, key string, rev uint64) (jetstream.KeyValueEntry, error) {
	hist, err := kv.History(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, unavailable("read history of "+key, err)
	}
	for i := len(hist) - 1; i >= 0; i-- {
		h := hist[i]
		if h.Revision() >= rev {
			continue
		}
		if h.Operation() != jetstream.KeyValuePut {
			return nil, nil
		}
		if decodeErr(team, key, h.Value()) == nil {
			return h, nil
		}
	}
	return nil, nil
}
