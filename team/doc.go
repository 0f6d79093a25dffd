// Package team implements what members and leads do to a team, composed
// from the kv state store and the bus mailbox: create a team, add tasks,
// claim and finish them, checkpoint, send and read mail, register a new
// incarnation, record a crash. The command line, both sidecars and the demo
// call these, so every path applies the same rules.
//
// Each operation reads the records it needs, applies a pure transition of
// the teambus package, and writes with compare-and-set on the revision it
// read; a lost race re-reads and decides again (kv.Retry), so two writers
// never both win and a transition that no longer applies is refused with its
// own error. Member operations check the caller's session against the
// member's current one first (fencing) and record the member's activity.
//
// Every operation also logs what it did in the team's event log (events.go
// describes the sessions and types); logging never fails an operation.
// CheckpointTeam and ExportCheckpoint (checkpoint.go) record a team
// checkpoint and write the team to a directory. Repair (repair.go) fixes
// damaged state records (kv.Store.Repair) and logs state.repaired.
//
// Resume (resume.go) attaches a lead session: another session takes over a
// lead that released the team (stopped cleanly, or its agent exited), one
// silent for takeover-after, or any with force; otherwise it is refused
// with a LeadHeldError saying why (a live lead: its heartbeat is fresh; or
// a silent one not yet past takeover-after) and when. Probe says which of
// these a new session meets now, changing nothing.
//
// SidecarAPI (sidecarapi.go) is the service as the lead and teammate
// sidecars use it, with no JetStream type in sight: heartbeat and state
// watches come through one typed pump, a sidecar inbox through
// ConsumeSidecar, whose stop gives unhandled mail back at once.
package team
