package sidecartest

import "context"

// Procs is a process watcher (sidecar.ProcessWatcher) whose agent exits
// when the test calls Exit. The zero value is not usable: use NewProcs.
type Procs struct{ exited chan struct{} }

// NewProcs returns a watcher whose agent runs until Exit.
func NewProcs() Procs { return Procs{exited: make(chan struct{})} }

// Exited returns the channel Exit closes, whatever the pid.
func (p Procs) Exited(context.Context, int) <-chan struct{} { return p.exited }

// Exit ends the agent process; call it once.
func (p Procs) Exit() { close(p.exited) }
