package ui_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/bus/bustest"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/ui"
)

// TestServer_BusStoppedAndRestarted: with the bus node stopped, the API
// answers 503 "bus unreachable" at once instead of after its request
// timeout; once the node is back on the same address, the same server
// answers from it again, by itself.
func TestServer_BusStoppedAndRestarted(t *testing.T) {
	ctx := testCtx(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	n := nodetest.NewBareServerConfig(t, node.NodeConfig{Dir: dir, Listen: listen})
	conn, err := bus.Connect(ctx, bus.ConnectConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	svc := team.New(conn.JS, team.Config{})
	if _, err := svc.CreateTeam(ctx, teamID, "L", []team.MemberSpec{{ID: "tm1"}}, testPolicy()); err != nil {
		t.Fatalf("create team: %v", err)
	}
	srv, err := ui.New(ui.Config{Service: svc, Token: token, Reachable: conn.NC.IsConnected})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		_ = srv.Close()
		hs.Close()
	})
	f := &fixture{svc: svc, srv: srv, http: hs}
	c := f.client(t)
	teams := func() (int, string) { return get(t, c, hs.URL+"/api/teams") }
	if code, body := teams(); code != http.StatusOK || !strings.Contains(body, `"id":"alpha"`) {
		t.Fatalf("teams with the bus up: %d %s", code, body)
	}

	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	bustest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if conn.NC.IsConnected() {
			return errors.New("the connection has not noticed the node is gone")
		}
		return nil
	})
	for _, p := range []string{"/api/teams", "/api/teams/alpha", "/api/teams/alpha/mail"} {
		start := time.Now()
		code, body := get(t, c, hs.URL+p)
		took := time.Since(start)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "bus unreachable") {
			t.Errorf("GET %s with the bus stopped: %d %q, want 503 bus unreachable", p, code, body)
		}
		t.Logf("GET %s with the bus stopped answered in %v", p, took.Round(time.Microsecond))
	}
	// A live stream ends at once with a retry in a second: the browser
	// comes back by itself (an error status would stop it for good).
	resp, err := c.Get(hs.URL + "/api/teams/alpha/live")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" || string(b) != "retry: 1000\n\n" {
		t.Errorf("live with the bus stopped: %d %s %q, want 200 text/event-stream retry: 1000", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	// The page itself still loads: it shows the error.
	if code, _ := get(t, c, hs.URL+"/"); code != http.StatusOK {
		t.Errorf("page with the bus stopped: %d, want 200", code)
	}

	nodetest.NewBareServerConfig(t, node.NodeConfig{Dir: dir, Listen: listen})
	bustest.CheckFor(t, 15*time.Second, 50*time.Millisecond, func() error {
		code, body := teams()
		if code != http.StatusOK || !strings.Contains(body, `"id":"alpha"`) || strings.Contains(body, `"error"`) {
			return fmt.Errorf("teams after the restart: %d %s", code, body)
		}
		return nil
	})
	// The live stream is back too.
	resp, err = c.Get(hs.URL + "/api/teams/alpha/live")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	var event string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("live after the restart: %d, ended before an event: %v", resp.StatusCode, err)
		}
		if e, ok := strings.CutPrefix(strings.TrimSpace(line), "event: "); ok {
			event = e
			break
		}
	}
	if event != "hello" {
		t.Errorf("live after the restart: first event %q, want hello", event)
	}
}
