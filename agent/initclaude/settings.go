package initclaude

import (
	"fmt"
	"path/filepath"
)

// PlanSettings returns the change that installs groups into the settings
// file at path.
func PlanSettings(path string, groups []EventGroup) (Change, error) {
	old, err := readFile(path)
	if err != nil {
		return Change{}, err
	}
	out, err := Merge(old, groups)
	if err != nil {
		return Change{}, fmt.Errorf("%s: %w", path, err)
	}
	if old != nil && sameJSON(out, old) {
		return Change{Path: path, Old: old, New: old}, nil // already current
	}
	return Change{Path: path, Old: old, New: out, Backup: true}, nil
}

// PlanSettingsRemove returns the change that takes teambus's handlers out of
// the settings file at path: the backup's exact bytes when the rest means
// the same as the backup, no file when teambus created it, else the file
// with every other value as written.
func PlanSettingsRemove(path string) (Change, error) {
	old, err := readFile(path)
	if err != nil || old == nil {
		return Change{Path: path}, err
	}
	inst, err := FindInstalled(old)
	if err != nil {
		return Change{}, fmt.Errorf("%s: %w", path, err)
	}
	if len(inst) == 0 {
		return Change{Path: path, Old: old, New: old}, nil
	}
	bak, err := readFile(path + BackupSuffix)
	if err != nil {
		return Change{}, err
	}
	out, err := RemoveHooks(old, hasKey(bak, "hooks"))
	if err != nil {
		return Change{}, fmt.Errorf("%s: %w", path, err)
	}
	return restoreOrDelete(path, old, out, bak), nil
}

// restoreOrDelete finishes a remove plan: out is the file without teambus's
// parts, bak the backup (nil when none).
func restoreOrDelete(path string, old, out, bak []byte) Change {
	c := Change{Path: path, Old: old, New: out}
	switch {
	case bak != nil && sameJSON(out, bak):
		c.New, c.Restored, c.DropBackup = bak, true, true
	case bak == nil && sameJSON(out, []byte("{}")):
		c.New = nil // teambus created the file
		c.Prune = []string{filepath.Dir(path)}
	}
	return c
}

// hasKey reports whether the JSON object data has a non-null member key.
func hasKey(data []byte, key string) bool {
	if data == nil {
		return false
	}
	ms, err := parseDocument(data)
	if err != nil {
		return false
	}
	i, err := findKey(ms, key)
	return err == nil && i >= 0 && kind(ms[i].value) != 'n'
}
