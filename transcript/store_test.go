package transcript_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/transcript"
)

const (
	testTeam    = "alpha"
	testMember  = "tm1"
	testSession = "91a14418-95d4-40e3-8290-20dd80416f47"
)

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newStore starts a node and opens the transcripts of testTeam on it.
func newStore(t *testing.T) (*transcript.Store, jetstream.JetStream) {
	t.Helper()
	n := nodetest.NewBareServer(t)
	c := nodetest.Connect(t, n)
	s, err := transcript.Open(testCtx(t), c.JS, testTeam)
	if err != nil {
		t.Fatal(err)
	}
	return s, c.JS
}

// transcriptFile is a JSONL file a test grows turn by turn.
type transcriptFile struct {
	t    *testing.T
	path string
	n    int
}

func newTranscript(t *testing.T) *transcriptFile {
	return &transcriptFile{t: t, path: filepath.Join(t.TempDir(), testSession+".jsonl")}
}

// grow appends complete JSON lines of about 1 KiB until the file grew by
// at least n bytes.
func (tf *transcriptFile) grow(n int) {
	tf.t.Helper()
	var b bytes.Buffer
	for b.Len() < n {
		tf.n++
		fmt.Fprintf(&b, `{"type":"assistant","uuid":"u-%08d","message":{"content":"%s"}}`+"\n", tf.n, bytes.Repeat([]byte{byte('a' + tf.n%26)}, 950))
	}
	tf.append(b.Bytes())
}

func (tf *transcriptFile) append(b []byte) {
	tf.t.Helper()
	f, err := os.OpenFile(tf.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		tf.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		tf.t.Fatal(err)
	}
}

func (tf *transcriptFile) bytes() []byte {
	tf.t.Helper()
	b, err := os.ReadFile(tf.path)
	if err != nil {
		tf.t.Fatal(err)
	}
	return b
}

// restored restores the member's newest transcript into a fresh home and
// returns its bytes.
func restored(t *testing.T, s *transcript.Store, cwd string) (transcript.Info, []byte) {
	t.Helper()
	home := t.TempDir()
	info, path, err := s.Restore(testCtx(t), testMember, home, cwd)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if cwd == "" {
		cwd = info.Cwd
	}
	want := filepath.Join(home, ".claude", "projects", transcript.ProjectKey(cwd), info.SessionID+".jsonl")
	if path != want {
		t.Fatalf("restored to %s, want %s", path, want)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return info, b
}

func TestStore_Sync_GrowingTranscript(t *testing.T) {
	s, _ := newStore(t)
	ctx := testCtx(t)
	tf := newTranscript(t)
	tf.grow(10 << 20)
	res, err := s.Sync(ctx, testMember, testSession, tf.path, transcript.WithCwd("/tmp/ccwork-x"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Size, int64(len(tf.bytes())); got != want || res.Sent != want || res.Gen != 1 {
		t.Fatalf("first sync: size %d sent %d gen %d, want size and sent %d, gen 1", res.Size, res.Sent, res.Gen, want)
	}
	for turn := 0; turn < 20; turn++ {
		before := int64(len(tf.bytes()))
		tf.grow(20 << 10)
		res, err := s.Sync(ctx, testMember, testSession, tf.path)
		if err != nil {
			t.Fatalf("turn %d: %v", turn, err)
		}
		if got, want := res.Sent, int64(len(tf.bytes()))-before; got != want || res.NewGen {
			t.Fatalf("turn %d: sent %d (new generation %v), want the %d appended bytes", turn, got, res.NewGen, want)
		}
	}
	// Nothing new: nothing sent.
	if res, err := s.Sync(ctx, testMember, testSession, tf.path); err != nil || res.Sent != 0 {
		t.Fatalf("idle sync: sent %d, %v", res.Sent, err)
	}
	size := int64(len(tf.bytes()))
	stored, err := s.StoredBytes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if float64(stored) > 1.1*float64(size) {
		t.Fatalf("stored %d bytes for a %d-byte transcript: more than 1.1x", stored, size)
	}
	t.Logf("stored %d bytes for %d (%.4fx)", stored, size, float64(stored)/float64(size))
	info, got := restored(t, s, "/tmp/ccwork-x")
	if !bytes.Equal(got, tf.bytes()) {
		t.Fatalf("restored %d bytes, not the %d of the transcript", len(got), size)
	}
	if info.Size != size || info.SessionID != testSession || info.Cwd != "/tmp/ccwork-x" || info.Member != testMember {
		t.Fatalf("info %+v", info)
	}
}

func TestStore_Sync_PartialLine(t *testing.T) {
	s, _ := newStore(t)
	ctx := testCtx(t)
	tf := newTranscript(t)
	tf.grow(3000)
	whole := int64(len(tf.bytes()))
	tf.append([]byte(`{"type":"user","mess`))
	res, err := s.Sync(ctx, testMember, testSession, tf.path, transcript.WithCwd("/w"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Size != whole {
		t.Fatalf("synced %d bytes, want the %d of complete lines", res.Size, whole)
	}
	tf.append([]byte("age\"}\n"))
	if res, err = s.Sync(ctx, testMember, testSession, tf.path); err != nil || res.Size != int64(len(tf.bytes())) || res.NewGen {
		t.Fatalf("after the line completed: %+v, %v", res, err)
	}
	if _, got := restored(t, s, "/w"); !bytes.Equal(got, tf.bytes()) {
		t.Fatal("restored transcript differs")
	}
}

func TestStore_Sync_NewGeneration(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(tf *transcriptFile)
	}{
		{"shrank", func(tf *transcriptFile) {
			b := tf.bytes()
			if err := os.WriteFile(tf.path, b[:len(b)/2-len(b)/2%1000], 0o600); err != nil {
				t.Fatal(err)
			}
			tf.append([]byte("{}\n"))
		}},
		{"end rewritten", func(tf *transcriptFile) {
			b := tf.bytes()
			b[len(b)-10] = 'Z'
			if err := os.WriteFile(tf.path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			tf.grow(5000)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newStore(t)
			ctx := testCtx(t)
			tf := newTranscript(t)
			tf.t = t
			tf.grow(1 << 20)
			if _, err := s.Sync(ctx, testMember, testSession, tf.path, transcript.WithCwd("/w")); err != nil {
				t.Fatal(err)
			}
			tc.change(tf)
			res, err := s.Sync(ctx, testMember, testSession, tf.path)
			if err != nil {
				t.Fatal(err)
			}
			if !res.NewGen || res.Gen != 2 || res.Size != int64(len(tf.bytes())) {
				t.Fatalf("sync after the change: %+v, want generation 2 of %d bytes", res, len(tf.bytes()))
			}
			info, got := restored(t, s, "")
			if !bytes.Equal(got, tf.bytes()) || info.Gen != 2 {
				t.Fatalf("restored generation %d, %d bytes; want generation 2 equal to the file", info.Gen, len(got))
			}
			// The first generation is gone.
			stored, err := s.StoredBytes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if float64(stored) > 1.1*float64(len(got)) {
				t.Fatalf("stored %d bytes for a %d-byte transcript: the old generation was kept", stored, len(got))
			}
		})
	}
}

func TestStore_Restore_Corrupt(t *testing.T) {
	for _, tc := range []struct {
		name string
		// before runs before the sync, after after it.
		before, after func(t *testing.T, s *transcript.Store, js jetstream.JetStream)
	}{
		{"altered chunk", func(t *testing.T, s *transcript.Store, js jetstream.JetStream) {
			// A chunk at offset 0 whose bytes are not the file's, stored
			// before the real ones.
			msg := nats.NewMsg(s.DataSubject(testMember, testSession, 1))
			msg.Data = bytes.Repeat([]byte("x"), 5000)
			msg.Header.Set(transcript.HdrOffset, "0")
			if _, err := js.PublishMsg(testCtx(t), msg); err != nil {
				t.Fatal(err)
			}
		}, nil},
		{"missing chunk", nil, func(t *testing.T, s *transcript.Store, js jetstream.JetStream) {
			seq, err := s.FirstSeq(testCtx(t), testMember, testSession, 1)
			if err != nil {
				t.Fatal(err)
			}
			st, err := js.Stream(testCtx(t), s.Stream())
			if err != nil {
				t.Fatal(err)
			}
			if err := st.DeleteMsg(testCtx(t), seq); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, js := newStore(t)
			tf := newTranscript(t)
			tf.t = t
			tf.grow(600 << 10)
			if tc.before != nil {
				tc.before(t, s, js)
			}
			if _, err := s.Sync(testCtx(t), testMember, testSession, tf.path, transcript.WithCwd("/w")); err != nil {
				t.Fatal(err)
			}
			if tc.after != nil {
				tc.after(t, s, js)
			}
			home := t.TempDir()
			_, _, err := s.Restore(testCtx(t), testMember, home, "")
			if !errors.Is(err, transcript.ErrCorrupt) {
				t.Fatalf("restore: %v, want transcript.ErrCorrupt", err)
			}
			// Nothing was left where claude would look.
			dir := filepath.Join(home, ".claude", "projects", transcript.ProjectKey("/w"))
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Fatalf("restore left %d files in %s", len(ents), dir)
			}
		})
	}
}

func TestStore_Latest(t *testing.T) {
	s, js := newStore(t)
	ctx := testCtx(t)
	if _, err := s.Latest(ctx, testMember); !errors.Is(err, transcript.ErrNone) || !errors.Is(err, teambus.ErrNotFound) {
		t.Fatalf("latest of a member without transcripts: %v, want transcript.ErrNone", err)
	}
	if _, _, err := s.Restore(ctx, testMember, t.TempDir(), "/w"); !errors.Is(err, transcript.ErrNone) {
		t.Fatalf("restore of a member without transcripts: %v, want transcript.ErrNone", err)
	}
	// Two sessions, then the first again: the newest sync wins.
	a, b := newTranscript(t), &transcriptFile{t: t, path: filepath.Join(t.TempDir(), "b.jsonl")}
	a.grow(2000)
	b.grow(3000)
	for i, step := range []struct {
		session string
		tf      *transcriptFile
	}{{"sess-a", a}, {"sess-b", b}, {"sess-a", a}} {
		step.tf.grow(1000)
		if _, err := s.Sync(ctx, testMember, step.session, step.tf.path); err != nil {
			t.Fatal(err)
		}
		info, err := s.Latest(ctx, testMember)
		if err != nil {
			t.Fatal(err)
		}
		if info.SessionID != step.session || info.Size != int64(len(step.tf.bytes())) {
			t.Fatalf("step %d: latest %+v, want session %s of %d bytes", i, info, step.session, len(step.tf.bytes()))
		}
	}
	// Another member's transcripts are not tm1's.
	if _, err := s.Latest(ctx, "tm2"); !errors.Is(err, transcript.ErrNone) {
		t.Fatalf("latest of tm2: %v", err)
	}
	// A second transcript.Open is idempotent, and transcript.DeleteTeam removes everything.
	if _, err := transcript.Open(ctx, js, testTeam); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := transcript.DeleteTeam(ctx, js, testTeam); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.Stream(ctx, transcript.StreamPrefix+testTeam); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("stream after transcript.DeleteTeam: %v", err)
	}
}

func TestStore_Sync_BadInput(t *testing.T) {
	s, js := newStore(t)
	ctx := testCtx(t)
	tf := newTranscript(t)
	tf.grow(100)
	for _, tc := range []struct{ member, session, path string }{
		{"tm.1", testSession, tf.path},
		{testMember, "a.b", tf.path},
		{testMember, "*", tf.path},
		{testMember, testSession, filepath.Join(t.TempDir(), "missing")},
		{testMember, testSession, t.TempDir()},
	} {
		if _, err := s.Sync(ctx, tc.member, tc.session, tc.path); !errors.Is(err, teambus.ErrInvalid) {
			t.Errorf("sync %q %q %q: %v, want ErrInvalid", tc.member, tc.session, tc.path, err)
		}
	}
	if _, err := transcript.Open(ctx, js, "a.b"); !errors.Is(err, teambus.ErrInvalid) {
		t.Errorf("open team a.b: %v", err)
	}
	if n, err := s.StoredBytes(ctx); err != nil || n != 0 {
		t.Fatalf("bad input stored %d bytes (%v)", n, err)
	}
}

// Two processes syncing one session at once: one may lose the manifest's
// compare-and-set; the stored transcript stays valid, and a later sync
// completes it.
func TestStore_Sync_Concurrent(t *testing.T) {
	s, js := newStore(t)
	ctx := testCtx(t)
	s2, err := transcript.Open(ctx, js, testTeam)
	if err != nil {
		t.Fatal(err)
	}
	tf := newTranscript(t)
	tf.grow(2 << 20)
	errs := make(chan error, 2)
	for _, st := range []*transcript.Store{s, s2} {
		go func() {
			_, err := st.Sync(ctx, testMember, testSession, tf.path, transcript.WithCwd("/w"))
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil && !errors.Is(err, teambus.ErrConflict) {
			t.Fatalf("concurrent sync: %v", err)
		}
	}
	if _, err := s.Sync(ctx, testMember, testSession, tf.path); err != nil {
		t.Fatal(err)
	}
	if _, got := restored(t, s, ""); !bytes.Equal(got, tf.bytes()) {
		t.Fatal("restored transcript differs")
	}
}

// A commit whose manifest does not decode: Latest and Restore say
// transcript.ErrCorrupt; the next sync starts the session over and restores.
func TestStore_Sync_CorruptManifest(t *testing.T) {
	s, js := newStore(t)
	ctx := testCtx(t)
	tf := newTranscript(t)
	tf.grow(100 << 10)
	if _, err := s.Sync(ctx, testMember, testSession, tf.path, transcript.WithCwd("/w")); err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(s.CommitSubject(testMember, testSession))
	msg.Header.Set(transcript.HdrManifest, `{"v":1,"g":1,"n":5}`)
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Latest(ctx, testMember); !errors.Is(err, transcript.ErrCorrupt) {
		t.Fatalf("latest: %v, want transcript.ErrCorrupt", err)
	}
	if _, _, err := s.Restore(ctx, testMember, t.TempDir(), ""); !errors.Is(err, transcript.ErrCorrupt) {
		t.Fatalf("restore: %v, want transcript.ErrCorrupt", err)
	}
	tf.grow(1000)
	res, err := s.Sync(ctx, testMember, testSession, tf.path, transcript.WithCwd("/w"))
	if err != nil || !res.NewGen || res.Gen != 1 || res.Size != int64(len(tf.bytes())) {
		t.Fatalf("sync after the bad commit: %+v, %v", res, err)
	}
	if _, got := restored(t, s, ""); !bytes.Equal(got, tf.bytes()) {
		t.Fatal("restored transcript differs")
	}
}

// Restore on the host the session ran on: a file that holds the stored
// transcript and more is kept; one that differs is replaced.
func TestStore_Restore_KeepsLongerLocalFile(t *testing.T) {
	s, _ := newStore(t)
	ctx := testCtx(t)
	home := t.TempDir()
	dir := filepath.Join(home, ".claude", "projects", transcript.ProjectKey("/w"))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	tf := &transcriptFile{t: t, path: filepath.Join(dir, testSession+".jsonl")}
	tf.grow(50 << 10)
	if _, err := s.Sync(ctx, testMember, testSession, tf.path, transcript.WithCwd("/w")); err != nil {
		t.Fatal(err)
	}
	tf.grow(1000) // written after the last sync
	want := tf.bytes()
	info, path, err := s.Restore(ctx, testMember, home, "")
	if err != nil || path != tf.path || !info.Kept {
		t.Fatalf("restore: %+v %s %v, want the local file kept", info, path, err)
	}
	if !bytes.Equal(tf.bytes(), want) {
		t.Fatal("the local file changed")
	}
	if err := os.WriteFile(tf.path, bytes.Repeat([]byte("z\n"), 40<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	info, _, err = s.Restore(ctx, testMember, home, "")
	if err != nil || info.Kept {
		t.Fatalf("restore over a different file: %+v %v", info, err)
	}
	if got := tf.bytes(); !bytes.Equal(got, want[:info.Size]) {
		t.Fatal("restore did not replace a file that is not the transcript")
	}
}

// List and WriteTo: every session of every member, each as stored.
func TestStore_List(t *testing.T) {
	s, _ := newStore(t)
	ctx := testCtx(t)
	if l, err := s.List(ctx); err != nil || len(l) != 0 {
		t.Fatalf("list of no transcripts: %v %v", l, err)
	}
	files := map[string]*transcriptFile{}
	for _, id := range []string{"tm2/s1", "tm1/s2", "tm1/s1"} {
		member, session, _ := strings.Cut(id, "/")
		tf := &transcriptFile{t: t, path: filepath.Join(t.TempDir(), session+".jsonl")}
		tf.grow(3000)
		files[id] = tf
		if _, err := s.Sync(ctx, member, session, tf.path); err != nil {
			t.Fatal(err)
		}
	}
	files["tm1/s1"].grow(300 << 10) // a second generation-1 commit with data chunks
	if _, err := s.Sync(ctx, "tm1", "s1", files["tm1/s1"].path); err != nil {
		t.Fatal(err)
	}
	l, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, info := range l {
		id := info.Member + "/" + info.SessionID
		got = append(got, id)
		var b bytes.Buffer
		if _, err := s.WriteTo(ctx, info.Member, info.SessionID, &b); err != nil || !bytes.Equal(b.Bytes(), files[id].bytes()) {
			t.Fatalf("WriteTo %s: %v, or not the file", id, err)
		}
	}
	if strings.Join(got, " ") != "tm1/s1 tm1/s2 tm2/s1" {
		t.Fatalf("list %v", got)
	}
}

// The project directory Claude Code used is kept when it is not
// ProjectKey(cwd) (a git worktree): a restore for the same working
// directory goes there, one for another directory under its own key.
func TestStore_Restore_ProjectKey(t *testing.T) {
	s, js := newStore(t)
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), ".claude", "projects", "-main-repo")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	tf := &transcriptFile{t: t, path: filepath.Join(dir, testSession+".jsonl")}
	tf.grow(5000)
	if _, err := s.Sync(ctx, testMember, testSession, tf.path, transcript.WithCwd("/main/repo-wt")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ cwd, key string }{{"", "-main-repo"}, {"/main/repo-wt", "-main-repo"}, {"/elsewhere", "-elsewhere"}} {
		home := t.TempDir()
		info, path, err := s.Restore(ctx, testMember, home, tc.cwd)
		if err != nil || info.ProjectKey != "-main-repo" {
			t.Fatalf("restore for %q: %+v %v", tc.cwd, info, err)
		}
		if want := filepath.Join(home, ".claude", "projects", tc.key, testSession+".jsonl"); path != want {
			t.Errorf("restore for %q wrote %s, want %s", tc.cwd, path, want)
		}
	}
	// A manifest naming a directory outside projects is refused.
	msg := nats.NewMsg(s.CommitSubject(testMember, testSession))
	msg.Header.Set(transcript.HdrManifest, `{"v":1,"g":1,"n":0,"s":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","t":"AAAAAAAAAAAAAAAA","k":".."}`)
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Restore(ctx, testMember, t.TempDir(), ""); !errors.Is(err, transcript.ErrCorrupt) {
		t.Fatalf("restore of a manifest with key ..: %v", err)
	}
}
