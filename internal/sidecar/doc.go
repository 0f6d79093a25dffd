// Package sidecar holds what the lead sidecar (package lead) and the
// teammate sidecar (package teammate) share and neither owns: Team, the
// part of the team service both use (each package's own Team adds what
// it alone calls); Heart, the beats sent to the team service (which
// keeps the heartbeat keys) and the clean stop of the last one; the
// backstop timing of a key no service renews; the watch of the agent
// process; the
// defaults of what a sidecar runs on. lead and teammate never import each
// other; this package, like them, imports no nats package.
package sidecar
