// Package sidecar holds the little the lead sidecar (package lead) and the
// teammate sidecar (package teammate) share and neither owns: the defaults
// of what a sidecar runs on. lead and teammate never import each other;
// this package, like them, imports no nats package.
package sidecar
