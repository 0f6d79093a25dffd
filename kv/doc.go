// Package kv stores team state in JetStream KV: the team record, members,
// tasks and member activity in one bucket per team (TBS_<team>), and
// heartbeats with per-key TTL in another (TBH_<team>).
//
// Every write is a compare-and-set on the record's revision: Put* take the
// revision the caller read and fail with ErrConflict when someone else wrote
// in between. Retry re-runs a read-decide-write function until it wins or
// the transition itself refuses. Keys are built only from validated ids, so
// user text never reaches a subject.
//
// Heartbeats are created with a TTL equal to the member's timeout and renewed
// with a revision-checked publish that carries a fresh TTL, so a silent
// member's key expires on the server and every watcher sees a purge at once
// (event-driven, not polled). Errors are the teambus sentinels: ErrNotFound,
// ErrConflict, ErrFenced.
//
// Records are decoded one by one (DecodeRecord, record.go): a record that
// does not decode is listed in Snapshot.Damaged and left out, so one bad
// record does not take the team down; a command that needs it fails with
// ErrDamaged (an ErrState) naming `teambus team repair`. Store.Repair
// (repair.go) restores such a record from its key's history, or deletes
// it, with compare-and-set on the damaged revision. A damaged team record
// makes that team unreadable until it is repaired.
//
// Beside the records the state bucket holds three kinds of derived keys,
// never decoded as records and left out of Snapshot: "summary", the task
// counts, progress and active tasks a resume reports, valid while it names
// the last task write (summary.go, ReportSnapshot); the dependents index,
// "dependents.<id>" per dependency plus the "index" marker of a team
// created with it, which lets a completion promote its dependents without
// reading the team (dependents.go); and the claim board, "board.0",
// "board.1"… plus the "board" marker, the available tasks, which lets
// `task next` claim without reading the team (board.go). How the board is
// split and ordered is the team service's policy (team.BoardLayout, given
// in Config.Board); the store keeps the records with compare-and-set.
// Store.Records reads a few named records in one isolated read, consistent
// at a stream sequence.
//
// The store logs what it leaves undone without failing (a board or
// summary write the next rebuild redoes) to Config.Logger, never to the
// global logger.
package kv
