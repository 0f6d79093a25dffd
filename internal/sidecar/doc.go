// Package sidecar holds what the lead sidecar (package lead) and the
// teammate sidecar (package teammate) share and neither owns: Team, the
// part of the team service both use (each package's own Team adds what
// it alone calls); Heart, the heartbeat write with compare-and-set on the
// writer's own last revision; the watch of the agent process; the
// defaults of what a sidecar runs on. lead and teammate never import each
// other; this package, like them, imports no nats package.
package sidecar
