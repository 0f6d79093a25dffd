package kv

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
)

// The dependents index: which tasks wait on a task.
//
// A completion makes the tasks that wait on the completed one available.
// Finding them used to read every task of the team (PromoteReady). The
// record "dependents.<id>" lists the tasks that named <id> as a
// dependency: it is written, with compare-and-set, before those tasks are
// (AddDependents), so it names every task that depends on <id> and
// possibly one whose creation then failed (harmless: it is read and found
// absent). The record "index" marks a team whose index is complete: one
// created with it (CreateTeam writes it before the team record). A team
// without it, created by an older teambus, is promoted by reading every
// task, as before.

const (
	preDependents = "dependents."
	keyIndex      = "index"
)

type dependentsRecord struct {
	Tasks []string `json:"tasks"`
}

// AddDependents records that tasks depend on task dep.
func (s *Store) AddDependents(ctx context.Context, team, dep string, tasks ...string) error {
	if err := teambus.ValidateID("task", dep); err != nil {
		return err
	}
	kv, err := s.stateBucket(ctx, team)
	if err != nil {
		return err
	}
	key := preDependents + dep
	return Retry(ctx, func() error {
		var (
			rec dependentsRecord
			rev uint64
		)
		e, err := kv.Get(ctx, key)
		switch {
		case err == nil:
			rev = e.Revision()
			// A record that does not decode is replaced: the lost names
			// are found by the lead's full promotion on its heartbeat.
			_ = json.Unmarshal(e.Value(), &rec)
		case !isNotFound(err):
			return unavailable("read "+key, err)
		}
		n := len(rec.Tasks)
		for _, id := range tasks {
			if !slices.Contains(rec.Tasks, id) {
				rec.Tasks = append(rec.Tasks, id)
			}
		}
		if n == len(rec.Tasks) && rev != 0 {
			return nil
		}
		b, _ := json.Marshal(rec)
		_, err = update(ctx, kv, key, b, rev)
		return err
	})
}

// Dependents returns the tasks recorded as depending on task id, and
// whether the team's index is complete (else the list means nothing).
func (s *Store) Dependents(ctx context.Context, team, id string) ([]string, bool, error) {
	if err := teambus.ValidateID("task", id); err != nil {
		return nil, false, err
	}
	kv, err := s.stateBucket(ctx, team)
	if err != nil {
		return nil, false, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	pre := "$KV." + kv.Bucket() + "."
	entries, _, err := readLastAt(ctx, s.js.Conn(), kv.Bucket(), pre+keyIndex, pre+preDependents+id)
	if err != nil {
		return nil, false, unavailable("read the dependents of task "+id, err)
	}
	var (
		indexed bool
		rec     dependentsRecord
	)
	for _, e := range entries {
		switch e.key {
		case keyIndex:
			indexed = true
		case preDependents + id:
			if json.Unmarshal(e.value, &rec) != nil {
				return nil, false, nil // damaged: promote by a full read
			}
		}
	}
	return rec.Tasks, indexed, nil
}

// markIndexed writes the index marker of a new team.
func markIndexed(ctx context.Context, kv jetstream.KeyValue) error {
	_, err := kv.Create(ctx, keyIndex, []byte(`{"dependents":true}`))
	if err != nil && !isConflict(err) {
		return err
	}
	return nil
}

func isNotFound(err error) bool {
	return errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted)
}
