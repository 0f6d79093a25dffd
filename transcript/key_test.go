package transcript

import (
	"strings"
	"testing"
)

func TestProjectKey(t *testing.T) {
	long := "/home/dev/" + strings.Repeat("very-long-directory-name.", 10) + "x"
	for _, tc := range []struct{ cwd, want string }{
		{"/tmp/ccwork-x", "-tmp-ccwork-x"},
		{"/home/dev/proj", "-home-dev-proj"},
		{"/home/a.b/c_d e", "-home-a-b-c-d-e"},
		{"/tmp/é", "-tmp--"},
		{"/tmp/😀", "-tmp---"}, // two UTF-16 units, as Claude Code counts them
		// Over 200 characters: cut, plus Claude Code's base-36 string hash
		// (computed independently).
		{long, "-home-dev-very-long-directory-name-very-long-directory-name-very-long-directory-name-very-long-directory-name-very-long-directory-name-very-long-directory-name-very-long-directory-name-very-long-direc-a4f4bn"},
	} {
		if got := ProjectKey(tc.cwd); got != tc.want {
			t.Errorf("ProjectKey(%q) = %q, want %q", tc.cwd, got, tc.want)
		}
	}
}

func FuzzProjectKey(f *testing.F) {
	f.Add("/tmp/ccwork-x")
	f.Add(strings.Repeat("/ab", 100))
	f.Fuzz(func(t *testing.T, cwd string) {
		k := ProjectKey(cwd)
		if len(k) > maxKey+1+7 {
			t.Fatalf("key of %d bytes", len(k))
		}
		for _, c := range k {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
				t.Fatalf("key %q has %q", k, c)
			}
		}
	})
}

func FuzzDecodeManifest(f *testing.F) {
	f.Add([]byte(`{"v":1,"member":"tm1","session":"s1","gen":1,"size":3,"sha256":"` + strings.Repeat("ab", 32) + `"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeManifest(b)
		if err != nil {
			return
		}
		if validate(m.Member, m.Session) != nil || m.Gen < 1 || m.Size < 0 {
			t.Fatalf("accepted %+v", m)
		}
		m.hasher() // a bad state is refused, never a panic
	})
}
