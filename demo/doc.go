// Package demo is `teambus demo`: the whole product in one run. It opens a
// bus node in a temporary directory, creates a team of three teammates and
// six tasks, and runs the lead and teammate sidecars beside simulated agents
// as real processes (the teambus binary, re-executed). It kills the lead
// with SIGKILL, watches the teammates enter zombie mode, attaches a new lead
// that takes over, kills a teammate's agent mid-task and respawns it, which
// continues from its checkpoint, narrating each step with its timing.
//
// RunAgent is the simulated agent session (`teambus agent-sim`) the demo
// starts: it talks to the bus through the team API as a real agent's hooks
// would: a teammate claims tasks, works through their steps with a
// checkpoint after each, reports to the lead and completes them; the lead
// reads and acks its inbox.
package demo
