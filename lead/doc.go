// Package lead runs the sidecar beside the lead's agent session.
//
// The sidecar attaches through the resume validation sequence (team.Resume:
// lead epoch up, the old lead fenced), heartbeats into the team's heartbeat
// bucket with a time to live of lead-timeout and records lead_last_seen
// with its state every heartbeat, so a new lead loses at most one heartbeat
// of state. It watches the teammates' heartbeat keys: an expired key (a
// silent member) or a fresh heartbeat without activity for stuck-timeout (a
// wedged member) gets a status_check, sent again every probe-timeout/4
// until answered (a check can be lost, or taken by a replaced sidecar); a
// member that answers is alive, one that does not answer within
// probe-timeout is crashed: crash count +1, its
// task back to the queue with its checkpoint, or past the crash limit the
// task and member paused and exactly one escalation in the lead's inbox.
// Every heartbeat it also finishes what a crash may have cut short:
// dependents of completed tasks become available, crashed members' tasks
// are requeued, pending escalations are sent, mail a member held in zombie
// mode and nobody released (its sidecar gone) is released.
//
// Handlers are idempotent: probes and escalations carry ids derived from the
// member's incarnation, crash records are counted once per incarnation, so
// mail redelivered after a lead crash changes nothing twice. With a pid, the
// sidecar stops heartbeating when the lead's agent exits, so the teammates
// see the lead gone after lead-timeout.
//
// A lead that lets go releases the team: when the sidecar stops cleanly
// (SIGTERM, SIGINT: a SessionEnd hook's stop) or sees its agent exit, it
// records the release in the team record with compare-and-set (nothing
// when another lead attached since), and the next lead session resumes at
// once instead of waiting for takeover-after. A kill -9 of the sidecar
// releases nothing: that lead is held for takeover-after. Its next beat
// takes a release back (a sidecar adopting a lead whose agent lives on).
//
// The sidecar is a loop over small interfaces: Team (the team service as
// team.SidecarAPI gives it: domain values, heartbeat changes and the
// sidecar inbox as typed channels; what it shares with the teammate
// sidecar is internal/sidecar.Team), a clock (internal/clock) and a
// ProcessWatcher (proc.Watcher). It imports no nats package. Its unit tests
// run it on an in-memory team (internal/sidecartest) and a fake clock, in
// milliseconds; team/sidecarapi_test.go runs it against a real server.
package lead
