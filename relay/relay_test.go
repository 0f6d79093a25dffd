//go:build !teambus_agent

package relay_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus/node/credstore"

	"github.com/nats-io/nats.go"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/relay"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// env is a node with team alpha (tm1, tm2), the credential of tm1, and
// the relay of tm1's sidecar serving on the operator's connection, its
// sockets in a directory of the test.
type env struct {
	node  *node.Node
	admin *team.Service
	cr    *bus.Creds
	token string
	srv   *relay.Server
}

func newEnv(t *testing.T) *env {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	ctx := testCtx(t)
	n := nodetest.NewServer(t)
	c := nodetest.Connect(t, n)
	svc := team.New(c.JS, team.Config{})
	if _, err := svc.CreateTeam(ctx, "alpha", "", []team.MemberSpec{{ID: "tm1"}, {ID: "tm2"}}, teambus.DefaultPolicy()); err != nil {
		t.Fatal(err)
	}
	cr, err := credstore.IssueCreds(ctx, c, "alpha", "tm1", []string{n.URL()})
	if err != nil {
		t.Fatal(err)
	}
	d, err := bus.ReadDiscovery(n.Dir())
	if err != nil {
		t.Fatal(err)
	}
	srv := &relay.Server{NC: c.NC, Team: "alpha", Member: "tm1", Log: slog.New(slog.DiscardHandler),
		Connect: func(ctx context.Context, user, password string) (*nats.Conn, error) {
			mc, err := bus.Connect(ctx, bus.ConnectConfig{Server: n.URL(), User: user, Pass: password, InboxPrefix: bus.MemberInboxPrefix("alpha", "tm1"), Timeout: 5 * time.Second, NoReadyCheck: true})
			if err != nil {
				return nil, err
			}
			return mc.NC, nil
		}}
	ln, err := relay.Listen(relay.Path(n.URL(), "alpha", "tm1"))
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		srv.Close()
	})
	return &env{node: n, admin: svc, cr: cr, token: d.Token, srv: srv}
}

func (e *env) client(t *testing.T, auth relay.Auth, who string) (*teamapi.Client, error) {
	t.Helper()
	rc, err := relay.Dial(testCtx(t), e.node.URL(), "alpha", "tm1", auth)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { rc.Close() })
	return teamapi.NewWith(rc, teamapi.Config{Team: "alpha", Member: who, Session: "s1", Operator: auth.Token != ""})
}

func (e *env) mail(t *testing.T) []teambus.Message {
	t.Helper()
	var got []teambus.Message
	if err := e.admin.Mailbox("alpha").Replay(testCtx(t), mailbox.ReplayFilter{}, func(m teambus.Message) error { got = append(got, m); return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

// A member's credential is carried on a connection of that credential:
// the message is the member's, a payload naming another member is
// refused, and requests after the first reuse the relay's connection.
func TestRelay_MemberCredential(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	cl, err := e.client(t, relay.Auth{User: e.cr.User, Password: e.cr.Password}, "tm1")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		res, err := cl.Send(ctx, teamapi.SendRequest{To: "tm2", Body: "hello", ID: "k1"})
		if err != nil || res.Seq == 0 || res.Duplicate != (i > 0) {
			t.Fatalf("send %d = %+v, %v", i, res, err)
		}
	}
	if got := e.mail(t); len(got) != 1 || got[0].From != "tm1" || got[0].Body != "hello" {
		t.Fatalf("mailbox = %+v, want one message from tm1", got)
	}
	forged, err := e.client(t, relay.Auth{User: e.cr.User, Password: e.cr.Password}, "tm2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := forged.Send(ctx, teamapi.SendRequest{To: "lead", Body: "forged"}); !errors.Is(err, teambus.ErrInvalid) {
		t.Fatalf("send naming tm2 with tm1's credential = %v, want refused", err)
	}
	if got := e.mail(t); len(got) != 1 {
		t.Fatalf("mailbox = %+v, want the forged message refused", got)
	}
	// A service refusal comes back as the service's error.
	if _, err := cl.Send(ctx, teamapi.SendRequest{To: "nobody", Body: "x"}); !errors.Is(err, teambus.ErrNotFound) && !errors.Is(err, teambus.ErrInvalid) {
		t.Fatalf("send to an unknown member = %v, want refused", err)
	}
}

// The operator's token is checked against the relay's own and then
// carried on the sidecar's connection as the operator's request.
func TestRelay_OperatorToken(t *testing.T) {
	e := newEnv(t)
	cl, err := e.client(t, relay.Auth{Token: e.token}, "tm1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Send(testCtx(t), teamapi.SendRequest{To: "tm2", Body: "from the operator's command", ID: "op1"}); err != nil {
		t.Fatal(err)
	}
	if got := e.mail(t); len(got) != 1 || got[0].From != "tm1" {
		t.Fatalf("mailbox = %+v", got)
	}
}

// Whoever can not show a secret the node would take, or calls for
// another member or team, is refused before any request; nothing is
// stored.
func TestRelay_RefusesWithoutTheSecret(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	for name, auth := range map[string]relay.Auth{
		"wrong token":    {Token: strings.Repeat("0", len(e.token))},
		"no secret":      {},
		"wrong password": {User: e.cr.User, Password: "not-it"},
		"another user":   {User: bus.MemberUser("alpha", "tm2"), Password: e.cr.Password},
		"both":           {Token: e.token, User: e.cr.User, Password: e.cr.Password},
	} {
		if rc, err := relay.Dial(ctx, e.node.URL(), "alpha", "tm1", auth); err == nil {
			rc.Close()
			t.Errorf("%s: dial succeeded, want refused", name)
		}
	}
	if _, err := relay.Dial(ctx, e.node.URL(), "alpha", "tm2", relay.Auth{Token: e.token}); err == nil {
		t.Error("dial for tm2 reached tm1's relay")
	}
	if got := e.mail(t); len(got) != 0 {
		t.Fatalf("mailbox = %+v, want nothing stored", got)
	}
}

// An unknown verb is refused by the relay itself.
func TestRelay_UnknownVerb(t *testing.T) {
	e := newEnv(t)
	rc, err := relay.Dial(testCtx(t), e.node.URL(), "alpha", "tm1", relay.Auth{Token: e.token})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, _, err := rc.Request(testCtx(t), "", "stream.delete", []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "unknown verb") {
		t.Fatalf("request of an unknown verb = %v", err)
	}
}

// The socket directory must be private: one open to others is not used,
// and nothing else than a socket is ever removed from a socket's path.
func TestRelay_PrivateDirectory(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", dir)
	path := relay.Path("nats://127.0.0.1:4222", "alpha", "tm1")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := relay.Listen(path); err == nil || !strings.Contains(err.Error(), "open to others") {
		t.Fatalf("listen in a 0755 directory = %v", err)
	}
	if _, err := relay.Dial(testCtx(t), "nats://127.0.0.1:4222", "alpha", "tm1", relay.Auth{Token: "x"}); err == nil {
		t.Fatal("dial into a 0755 directory succeeded")
	}
	if err := os.Chmod(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := relay.Listen(path); err == nil {
		t.Fatal("listen over a regular file succeeded")
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "mine" {
		t.Fatalf("the file in the way = %q, %v: want it untouched", b, err)
	}
}

// A newer sidecar takes the socket over from an older one (or from one
// killed with its socket left behind); the older one closing then leaves
// the newer one's socket in place.
func TestRelay_Takeover(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	path := relay.Path("nats://127.0.0.1:4222", "alpha", "tm1")
	old, err := relay.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	newer, err := relay.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Close()
	old.Close()
	if fi, err := os.Lstat(path); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("socket after the old relay closed: %v, %v", fi, err)
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want 0600", fi.Mode().Perm())
	}
	newer.Close()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket after the newer relay closed: %v, want removed", err)
	}
}

// A starting relay removes the sockets killed sidecars left behind, once
// they are old enough, and never a live one.
func TestRelay_SweepsDeadSockets(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	dead := relay.Path("nats://127.0.0.1:1", "alpha", "tm1")
	live := relay.Path("nats://127.0.0.1:2", "alpha", "tm1")
	young := relay.Path("nats://127.0.0.1:3", "alpha", "tm1")
	for _, p := range []string{dead, live, young} {
		ln, err := relay.Listen(p)
		if err != nil {
			t.Fatal(err)
		}
		if p == live {
			defer ln.Close()
			continue
		}
		// A killed sidecar: the socket stays, nobody listens.
		ln.Listener.(*net.UnixListener).SetUnlinkOnClose(false)
		ln.Listener.Close()
	}
	old := time.Now().Add(-2 * time.Minute)
	for _, p := range []string{dead, live} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := relay.Listen(relay.Path("nats://127.0.0.1:4", "alpha", "tm1"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := os.Lstat(dead); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dead socket: %v, want removed", err)
	}
	for _, p := range []string{live, young} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s: %v, want kept", p, err)
		}
	}
}
