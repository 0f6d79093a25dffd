package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"

	"github.com/teambus/teambus"
)

func TestUI_UsageErrors(t *testing.T) {
	t.Parallel()
	dir := []string{"--dir", t.TempDir(), "--server", "nats://127.0.0.1:1", "--timeout", "1s"}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "0.0.0.0:0"}, "not a loopback address"},
		{[]string{"--listen", "192.0.2.1:8080"}, "--insecure"},
		{[]string{"--listen", "nonsense"}, "invalid --listen"},
		{[]string{"--http-tls-cert", "c.pem"}, "go together"},
		{[]string{"--team", "bad.team"}, "team"},
		{[]string{"extra"}, ""},
	}
	for _, tt := range tests {
		r := runCLI(t, append(append([]string{"ui"}, dir...), tt.args...)...)
		r.wantError(t, teambus.ExitPermanent, tt.want)
	}
}

// TestUI_Serves runs `teambus ui` in-process against a real node: the first
// stdout line is the URL with the token, which opens the team's page and
// sets the cookie; the command stops cleanly on cancel.
func TestUI_Serves(t *testing.T) {
	t.Parallel()
	dir := evTeam(t, "alpha")
	pr, pw := io.Pipe()
	var stderr strings.Builder
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int, 1)
	go func() {
		app := newApp(pw, &stderr)
		app.Reader = strings.NewReader("")
		code := exit(ctx, runApp(ctx, app, append([]string{"teambus", "ui", "--team", "alpha", "--log-level", "warn"}, dir...)), &stderr)
		pw.Close()
		done <- code
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("read the URL line: %v (stderr %q)", err, stderr.String())
	}
	u := strings.TrimSpace(line)
	if !strings.HasPrefix(u, "http://127.0.0.1:") || !strings.Contains(u, "/?team=alpha&token=") {
		t.Errorf("first line %q, want http://127.0.0.1:PORT/?team=alpha&token=…", u)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/#team=alpha" {
		t.Errorf("open the URL: got %d to %q, want 303 to /#team=alpha", resp.StatusCode, resp.Header.Get("Location"))
	}
	base := u[:strings.Index(u, "/?")]
	resp, err = c.Get(base + "/api/teams/alpha")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"tm1"`) {
		t.Errorf("team: got %d %.200s", resp.StatusCode, b)
	}
	resp, err = http.Get(base + "/api/teams/alpha")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: got %d, want 401", resp.StatusCode)
	}
	cancel()
	if code := <-done; code != teambus.ExitOK {
		t.Errorf("exit code %d after cancel, want 0 (stderr %q)", code, stderr.String())
	}
}
