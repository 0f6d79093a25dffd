package kv

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/teambus/teambus"
)

// parallelDecodeMin is the number of records from which a snapshot decodes
// its tasks on all CPUs. Decoding is most of the client's cost of reading
// a large team: about 8 µs per task record with encoding/json.
const parallelDecodeMin = 512

// addAll adds the entries read from a state bucket to snap. Task records
// of a large read are decoded by one goroutine per CPU; everything else,
// and a small read, one by one.
func (snap *Snapshot) addAll(entries []entry) error {
	workers := min(runtime.GOMAXPROCS(0), 8)
	if len(entries) < parallelDecodeMin || workers < 2 {
		for _, e := range entries {
			if err := snap.add(e.key, e.value, e.rev); err != nil {
				return err
			}
		}
		return nil
	}
	tasks := make([]*teambus.Task, len(entries))
	errs := make([]error, len(entries))
	chunk := (len(entries) + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < len(entries); lo += chunk {
		hi := min(lo+chunk, len(entries))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				if !strings.HasPrefix(entries[i].key, preTask) {
					continue
				}
				var t teambus.Task
				if err := json.Unmarshal(entries[i].value, &t); err != nil {
					errs[i] = fmt.Errorf("decode %s: %w", entries[i].key, err)
					continue
				}
				tasks[i] = &t
			}
		}()
	}
	wg.Wait()
	for i, e := range entries {
		if errs[i] != nil {
			return errs[i]
		}
		if t := tasks[i]; t != nil {
			snap.Tasks[t.ID], snap.TaskRev[t.ID] = t, e.rev
			continue
		}
		if err := snap.add(e.key, e.value, e.rev); err != nil {
			return err
		}
	}
	return nil
}
