package initclaude

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/teambus/teambus/internal/atomicfile"
)

// BackupSuffix is appended to a file's name for the copy of its bytes
// before teambus first wrote it.
const BackupSuffix = ".teambus.bak"

// Action says what a Change does.
type Action string

// The actions of a Change.
const (
	Create    Action = "create"
	Update    Action = "update"
	Delete    Action = "delete"
	Restore   Action = "restore" // the backup's bytes are written back
	Unchanged Action = "unchanged"
)

// Change is one file of a plan: its bytes before (nil: absent) and after
// (nil: deleted).
type Change struct {
	Path string
	Old  []byte
	New  []byte
	// Backup keeps Old in Path+BackupSuffix before the first write, when no
	// backup exists yet.
	Backup bool
	// DropBackup deletes Path+BackupSuffix after the write (a remove that
	// gave the original back).
	DropBackup bool
	// Restored marks a remove that wrote the backup's bytes back.
	Restored bool
	// Prune lists directories to remove after a Delete when they are empty
	// (innermost first).
	Prune []string
}

// Action returns what c does.
func (c Change) Action() Action {
	switch {
	case c.Old == nil && c.New == nil:
		return Unchanged
	case c.New == nil:
		return Delete
	case c.Old == nil:
		return Create
	case bytes.Equal(c.Old, c.New):
		return Unchanged
	case c.Restored:
		return Restore
	default:
		return Update
	}
}

// readFile returns the bytes of path, nil when it does not exist.
func readFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// Apply performs c: the backup first, then the write (temporary file, fsync,
// rename, directory fsync) or the removal.
func Apply(c Change) error {
	act := c.Action()
	if act == Unchanged && !c.DropBackup {
		return nil
	}
	target, err := resolve(c.Path)
	if err != nil {
		return err
	}
	if act != Unchanged && c.Backup && c.Old != nil {
		bak := c.Path + BackupSuffix
		if _, err := os.Lstat(bak); errors.Is(err, fs.ErrNotExist) {
			if err := atomicfile.Write(bak, c.Old, modeOf(target)); err != nil {
				return fmt.Errorf("back up %s: %w", c.Path, err)
			}
		}
	}
	switch act {
	case Delete:
		if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", c.Path, err)
		}
		if err := atomicfile.SyncDir(filepath.Dir(target)); err != nil {
			return err
		}
		for _, d := range c.Prune {
			if os.Remove(d) != nil {
				break // not empty, or gone: stop at the first one kept
			}
		}
	case Create, Update, Restore:
		if err := writeAtomic(target, c.New, modeOf(target)); err != nil {
			return err
		}
	}
	if c.DropBackup {
		if err := os.Remove(c.Path + BackupSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove backup of %s: %w", c.Path, err)
		}
	}
	return nil
}

// resolve follows a symbolic link at path, so a write replaces the file it
// points to and the link stays.
func resolve(path string) (string, error) {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return path, nil
	}
	t, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("follow link %s: %w", path, err)
	}
	return t, nil
}

// modeOf is the permission of an existing file, 0644 for a new one.
func modeOf(path string) fs.FileMode {
	if fi, err := os.Stat(path); err == nil {
		return fi.Mode().Perm()
	}
	return 0o644
}

// writeAtomic writes data to path atomically and durably with mode,
// creating its directory first.
func writeAtomic(path string, data []byte, mode fs.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create directory %s: %w", dir, err)
	}
	return atomicfile.Write(path, data, mode)
}
