// Command claim is the one-shot claim peer of `teambus bench`: what a user
// would run instead of `teambus task next` / `teambus task complete` to
// take work from a task list shared by several agents, kept in one
// state.json and guarded by flock. Each run is one step, under an
// exclusive lock of FILE.lock: read and decode the whole state, change one
// task, encode it, write it to a temporary file, fsync, rename over FILE.
//
// It imports only the standard library and has its own small main, so its
// start-up is that of a small Go program: the bench builds it once per run.
//
//	claim next --member M FILE          claim the first pending task; prints its id
//	claim complete --member M --task ID FILE
//	claim init --tasks N FILE           write N pending tasks
package main
