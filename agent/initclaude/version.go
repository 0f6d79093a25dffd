package initclaude

import (
	"fmt"
	"regexp"
	"strconv"
	"sync"
)

// Version is a Claude Code version, major.minor.patch.
type Version [3]int

// The Claude Code versions teambus depends on (§12.7.5, notes §1.1.1).
var (
	// MinClaude: below it an event name the version does not know makes
	// Claude Code ignore the whole settings file; init refuses without
	// --force.
	MinClaude = Version{2, 1, 101}
	// ExecFormClaude: the exec form (args) exists from here on; below it
	// the shell form is written.
	ExecFormClaude = Version{2, 1, 139}
	// StopContextClaude: Stop may return additionalContext (the hook's
	// concern; below it the hook blocks with a reason).
	StopContextClaude = Version{2, 1, 163}
	// PidClaude: CLAUDE_PID and SessionStart source "fork" exist from here
	// on; --check warns below it.
	PidClaude = Version{2, 1, 214}
	// BatchClaude is the first version known to have PostToolBatch: it is in
	// the 2.1.240 hooks reference and not in the changelog. Below it the
	// PostToolUse fallback is installed.
	BatchClaude = Version{2, 1, 240}
)

var versionRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`([0-9]+)\.([0-9]+)\.([0-9]+)`) })

// ParseVersion finds the first x.y.z in s (`claude --version` prints
// "2.1.330 (Claude Code)").
func ParseVersion(s string) (Version, bool) {
	m := versionRE().FindStringSubmatch(s)
	if m == nil {
		return Version{}, false
	}
	var v Version
	for i := range v {
		n, err := strconv.Atoi(m[i+1])
		if err != nil {
			return Version{}, false
		}
		v[i] = n
	}
	return v, true
}

// Less reports whether v is older than w.
func (v Version) Less(w Version) bool {
	for i := range v {
		if v[i] != w[i] {
			return v[i] < w[i]
		}
	}
	return false
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]) }
