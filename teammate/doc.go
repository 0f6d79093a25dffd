// Package teammate runs the sidecar beside a teammate's agent session.
//
// The sidecar registers a new incarnation of its member (epoch up, its
// session the only one accepted), heartbeats into the team's heartbeat
// bucket with a time to live of member-timeout, and answers the status
// checks and shutdown requests the lead sends to the member's sidecar
// inbox. It watches the lead's heartbeat key: when the lead has been silent
// for lead-timeout it enters zombie mode (member status zombie, the team
// records lead_timeout_detected_at, the member's mail is held, checkpoints
// are taken automatically); when a lead heartbeat reappears it leaves zombie
// mode, releases the held mail in order and tells the lead. After zombie-max
// it releases its task with its checkpoint, shuts down, and releases the
// held mail to the stream (each message marked held_since). Held mail is
// never stranded: the member record carries held_since while any waits, and
// the next incarnation (at start), the lead (every reconcile) or the
// member's own next send releases it, always before newer mail. A blocked
// task past blocked-timeout goes back to the queue.
//
// A replaced incarnation (its member record names a newer session, or the
// lead declared it crashed) stops at once: it watches its member record,
// stops consuming its sidecar inbox and gives back, unacked, the control
// mail it fetched, so the successor answers the lead's status check.
//
// With a pid, the sidecar watches the agent process: when the agent exits
// while holding a task, the crash is recorded at once (its task back to the
// queue with its checkpoint, or paused past the crash limit) and the lead is
// told. A cancelled context (SIGTERM) is a clean shutdown: the task is
// released, the member marked shutdown, the heartbeat key removed.
//
// The sidecar is a loop over small interfaces: Team (the team service as
// team.SidecarAPI gives it: domain values, the lead's heartbeat, its own
// records and its sidecar inbox as typed channels; what it shares with
// the lead sidecar is internal/sidecar.Team), a clock
// (internal/clock) and a ProcessWatcher (proc.Watcher). It imports no nats
// package. Its unit tests run it on an in-memory team (internal/sidecartest)
// and a fake clock, in milliseconds; team/sidecarapi_test.go runs it against
// a real server.
package teammate
