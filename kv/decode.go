package kv

import (
	"runtime"
	"sort"
	"sync"
)

// parallelDecodeMin is the number of records from which a snapshot decodes
// them on all CPUs. Decoding is most of the client's cost of reading a
// large team: about 8 µs per task record with encoding/json.
const parallelDecodeMin = 512

// addAll adds the entries read from a state bucket to snap, each decoded
// on its own (record.go): a record that does not decode is listed in
// snap.Damaged and left out of the maps. The records of a large read are
// decoded by one goroutine per CPU; a small read one by one.
func (snap *Snapshot) addAll(entries []entry) {
	recs := make([]Record, len(entries))
	errs := make([]error, len(entries))
	workers := min(runtime.GOMAXPROCS(0), 8)
	if len(entries) < parallelDecodeMin || workers < 2 {
		for i, e := range entries {
			recs[i], errs[i] = DecodeRecord(snap.id, e.key, e.value)
		}
	} else {
		chunk := (len(entries) + workers - 1) / workers
		var wg sync.WaitGroup
		for lo := 0; lo < len(entries); lo += chunk {
			hi := min(lo+chunk, len(entries))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := lo; i < hi; i++ {
					recs[i], errs[i] = DecodeRecord(snap.id, entries[i].key, entries[i].value)
				}
			}()
		}
		wg.Wait()
	}
	for i, e := range entries {
		if errs[i] != nil {
			snap.Damaged = append(snap.Damaged, DamagedRecord{Key: e.key, Revision: e.rev, Reason: reason(errs[i])})
			continue
		}
		snap.add(recs[i], e.key, e.rev)
	}
	sort.Slice(snap.Damaged, func(i, j int) bool { return snap.Damaged[i].Key < snap.Damaged[j].Key })
}

// add puts one decoded record into the snapshot.
func (snap *Snapshot) add(r Record, key string, rev uint64) {
	switch {
	case r.Team != nil:
		snap.Team, snap.TeamRev = r.Team, rev
	case r.Member != nil:
		snap.Members[r.Member.ID], snap.MemberRev[r.Member.ID] = r.Member, rev
	case r.Task != nil:
		snap.Tasks[r.Task.ID], snap.TaskRev[r.Task.ID] = r.Task, rev
	case r.Activity != nil:
		snap.Activity[key[len(preActivity):]] = *r.Activity
	}
}
