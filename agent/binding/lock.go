package binding

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// ErrLocked is returned when a lock is held by another process past the
// wait.
var ErrLocked = errors.New("locked by another process")

// Lock is a held flock; Unlock releases it.
type Lock struct{ f *os.File }

// TryLock takes the exclusive flock of path, waiting at most wait (0: not
// at all). It fails with ErrLocked when another process holds it.
func TryLock(ctx context.Context, path string, wait time.Duration) (*Lock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("lock dir: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	deadline := time.Now().Add(wait)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return &Lock{f: f}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !time.Now().Before(deadline) || ctx.Err() != nil {
			f.Close()
			return nil, ErrLocked
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Unlock releases the lock. It is idempotent.
func (l *Lock) Unlock() {
	if l == nil || l.f == nil {
		return
	}
	_ = unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	l.f.Close()
	l.f = nil
}

// Update applies fn to the binding of pid under its lock and saves it when
// fn returns true. held says the caller already holds the lock (a hook in
// its drain). It returns the binding as saved (or as read).
func Update(ctx context.Context, stateDir string, pid int, held bool, wait time.Duration, fn func(*Binding) bool) (*Binding, error) {
	if !held {
		l, err := TryLock(ctx, LockPath(stateDir, pid), wait)
		if err != nil {
			return nil, err
		}
		defer l.Unlock()
	}
	b, err := Load(stateDir, pid)
	if err != nil {
		return nil, err
	}
	if fn(b) {
		if err := Save(stateDir, b); err != nil {
			return nil, err
		}
	}
	return b, nil
}
