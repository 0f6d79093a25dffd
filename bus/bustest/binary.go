package bustest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// Binary builds cmd/teambus once per test binary and returns its path,
// for tests that run teambus as a real process. A package that uses it
// calls RemoveBinary from its TestMain.
func Binary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "teambus-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "teambus")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/teambus/teambus/cmd/teambus").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("build teambus: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// RemoveBinary removes what Binary built, if anything.
func RemoveBinary() {
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
}
