package transcript_test

import (
	"strings"
	"testing"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/transcript"
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
		if got := transcript.ProjectKey(tc.cwd); got != tc.want {
			t.Errorf("ProjectKey(%q) = %q, want %q", tc.cwd, got, tc.want)
		}
	}
}

func FuzzProjectKey(f *testing.F) {
	f.Add("/tmp/ccwork-x")
	f.Add(strings.Repeat("/ab", 100))
	f.Fuzz(func(t *testing.T, cwd string) {
		k := transcript.ProjectKey(cwd)
		if len(k) > transcript.MaxKey+1+7 {
			t.Fatalf("key of %d bytes", len(k))
		}
		for _, c := range k {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
				t.Fatalf("key %q has %q", k, c)
			}
		}
	})
}

func FuzzDecodeCommit(f *testing.F) {
	f.Add("tb.alpha.tr.tm1.s1.c", `{"v":1,"g":1,"n":0,"s":"c2hhAwAA","t":"AAAAAAAAAAAAAAAA"}`)
	f.Add("tb.alpha.tr.tm1.s1.c", `{"v":1,"g":1,"n":3,"s":"`+strings.Repeat("A", 47)+`=","t":"AAAAAAAAAAAAAAAA"}`)
	f.Add("tb.alpha.tr.tm1.s1.c", `{}`)
	f.Fuzz(func(t *testing.T, subject, header string) {
		info, err := transcript.DecodeCommit("alpha", subject, header)
		if err != nil {
			return
		}
		if teambus.ValidateID("member", info.Member) != nil || teambus.ValidateID("session", info.SessionID) != nil || info.Gen < 1 || info.Size < 0 || len(info.SHA256) != 64 {
			t.Fatalf("accepted %+v", info)
		}
	})
}
