// Package sidecartest is an in-memory team for the unit tests of the lead
// and teammate sidecars: it implements lead.Team and teammate.Team over
// plain maps on a fake clock, records what the sidecars did (mail, beats,
// settled deliveries, event log sessions) and lets a test push heartbeat
// changes, state changes and sidecar mail, and end the agent process
// (Procs). It stays a fake rather than the real service on a test node
// because heartbeat expiry and watch timing are what the sidecar tests
// drive: on a real bucket they follow the wall clock (key TTLs), not the
// fake one. It is pure logic: the real implementation, team.SidecarAPI,
// is tested against a real server.
package sidecartest
