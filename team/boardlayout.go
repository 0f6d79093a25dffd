package team

import (
	"hash/fnv"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/kv"
)

// boardShards is the number of records the claim board of a team is
// split into: claims racing in one team mostly write different shards.
const boardShards = 8

// shardOf is the board shard of an id: of a task, the shard its entry is
// in; of a member, its home shard (boardOrder).
func shardOf(id string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum32() % boardShards)
}

// rankOf returns a board entry as teambus.Pick orders it.
func rankOf(e kv.BoardEntry) teambus.Rank {
	return teambus.Rank{ID: e.ID, Quantum: e.Quantum, Down: e.Down, Priority: e.Priority, CreatedAt: time.Unix(0, e.Created).UTC()}
}

// BoardLayout is how the team service lays the claim board out in the
// state store: boardShards shards by a hash of the task id, each in
// Pick's order for a member without a quantum. A store that writes tasks
// of a team the service also serves (a fixture writing records as they
// are) must use it, or its board entries land in the wrong shards.
func BoardLayout() kv.BoardLayout {
	return kv.BoardLayout{
		Shards: boardShards,
		Shard:  shardOf,
		Before: func(a, b kv.BoardEntry) bool { return rankOf(a).Before(rankOf(b), "") },
	}
}

// boardWant returns the board entries of the tasks snap holds claimable,
// each with its Down: what a rebuild makes the board agree with.
func boardWant(snap *kv.Snapshot) []kv.BoardEntry {
	var avail []string
	for id, t := range snap.Tasks {
		if t.Status == teambus.TaskAvailable {
			avail = append(avail, id)
		}
	}
	down := teambus.DownstreamOf(snap.Tasks, avail)
	want := make([]kv.BoardEntry, 0, len(avail))
	for _, id := range avail {
		want = append(want, kv.NewBoardEntry(snap.Tasks[id], snap.TaskRev[id], down[id]))
	}
	return want
}
