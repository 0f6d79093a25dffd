// Package spawn starts the agent sessions of a team's members and keeps
// them running: `teambus spawn` (a member's session, headless or in a tmux
// window, bound to its member through a settings file that teambus
// writes), `teambus host` (a machine that runs the spawns addressed to it
// and respawns the crashed members of teams whose policy says
// respawn=auto), and the records that tie them together.
//
// Two key-value buckets hold the state, beside the teams':
//
//   - TBSPAWN, one record per member (key <team>.<member>): what was
//     started (the Spec, so a respawn starts the same thing), where (the
//     host), and for which member epoch. Every start of a member is
//     claimed with a compare-and-set of this record: a start for epoch E
//     may be claimed once, so a crashed incarnation is respawned at most
//     once, by one host or one command, and a member that runs is never
//     started twice without --force.
//   - TBHOSTS, one key per running host with a time to live renewed by
//     its heartbeat. A key that expires is a lost host: the surviving
//     hosts log host.lost and judge the members it ran crashed.
//
// A Claude Code member is resumed where it stopped when its transcript
// was carried into the bus (package transcript): the newest one is
// restored into the target machine's HOME and the session runs with
// --resume; without one (or with a damaged one) it starts fresh from its
// brief, and the member.respawned event says which.
package spawn
