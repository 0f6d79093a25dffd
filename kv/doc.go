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
package kv
