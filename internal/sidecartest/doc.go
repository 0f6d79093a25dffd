// Package sidecartest is an in-memory team for the unit tests of the lead
// and teammate sidecars: it implements lead.Team and teammate.Team over
// plain maps on a fake clock, records what the sidecars did (mail, beats,
// settled deliveries, event log sessions) and lets a test push heartbeat
// changes, state changes and sidecar mail. It is pure logic: the real
// implementation, team.SidecarAPI, is tested against a real server.
package sidecartest
