package ui_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/teambus/teambus/ui"
)

// TestServer_HostCheck: a request whose Host is not an IP address,
// localhost or a configured name is refused 421 before the token is
// looked at (DNS rebinding), even with the right token; the right
// names work.
func TestServer_HostCheck(t *testing.T) {
	f := newFixture(t, ui.Config{Hosts: []string{"teams.internal"}})
	port := mustURL(t, f.http.URL).Port()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(host, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", f.http.URL+path, nil)
		req.Host = host
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, host := range []string{"evil.example:" + port, "evil.example", "localhost.evil.example:" + port, "127.0.0.1.nip.io:" + port} {
		for _, p := range []string{"/?token=" + token, "/api/teams?token=" + token, "/app.js"} {
			code, body := do(host, p)
			if code != http.StatusMisdirectedRequest || !strings.Contains(body, "teambus ui") || strings.Contains(body, "tm1") {
				t.Errorf("GET %s with Host %s: %d %q; want 421 without team data", p, host, code, body)
			}
		}
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST", "app.localhost:" + port, "[::1]:" + port, "teams.internal:" + port, "teams.internal."} {
		if code, _ := do(host, "/?token="+token); code != http.StatusSeeOther {
			t.Errorf("first visit with Host %s: %d, want 303", host, code)
		}
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
