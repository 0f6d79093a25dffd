package bustest

import (
	"testing"
	"time"
)

// CheckFor calls f every interval until it returns nil, and fails the test
// with f's last error when timeout passes first.
func CheckFor(t testing.TB, timeout, interval time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %s: %v", timeout, err)
		}
		time.Sleep(interval)
	}
}
