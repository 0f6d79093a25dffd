package proc

import (
	"context"
	"errors"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Exited returns a channel closed when process pid exits, or never when ctx
// ends first. A pid that does not exist counts as exited.
func Exited(ctx context.Context, pid int) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		if waitPidfd(ctx, pid) || waitPoll(ctx, pid) {
			close(ch)
		}
	}()
	return ch
}

// Watcher watches processes with Exited; it is what the sidecars use
// unless a test gives them another watcher.
type Watcher struct{}

// Exited is the package's Exited.
func (Watcher) Exited(ctx context.Context, pid int) <-chan struct{} { return Exited(ctx, pid) }

// Alive reports whether a process with this pid exists.
func Alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// waitPidfd waits through a pidfd; it returns true when the process exited
// and false when ctx ended or pidfds are not available (then the caller
// polls; an unavailable pidfd for a live process falls through).
func waitPidfd(ctx context.Context, pid int) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return true
	}
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for ctx.Err() == nil {
		n, err := unix.Poll(fds, 200)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return false
		}
		if n > 0 {
			return true
		}
	}
	return false
}

func waitPoll(ctx context.Context, pid int) bool {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if !Alive(pid) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}
