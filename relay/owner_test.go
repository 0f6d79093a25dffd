//go:build unix

package relay_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/teambus/teambus/relay"
)

// A relay directory another local user made first (the temp dir is
// shared) turns the relay off: Listen and Dial refuse it with a
// *relay.DirError that says the relay is off and why. It needs root to
// give the directory away.
func TestRelay_DirOfAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to make a directory owned by another user")
	}
	dir := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", dir)
	path := relay.Path("nats://127.0.0.1:4222", "alpha", "tm1")
	if err := os.Mkdir(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Dir(path), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, err := relay.Listen(path)
	var de *relay.DirError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "relay off") || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Fatalf("listen in a directory of uid 65534 = %v; want a DirError saying the relay is off and why", err)
	}
	if _, err := relay.Dial(testCtx(t), "nats://127.0.0.1:4222", "alpha", "tm1", relay.Auth{Token: "x"}); !errors.As(err, &de) {
		t.Fatalf("dial into a directory of uid 65534 = %v; want a DirError", err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a socket was made in another user's directory: %v", err)
	}
}
