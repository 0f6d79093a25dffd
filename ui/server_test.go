package ui_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus/bustest"
	"github.com/teambus/teambus/eventlog"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
	"github.com/teambus/teambus/ui"
)

const (
	teamID = "alpha"
	token  = "0123456789abcdef0123456789abcdef"
	// xss is a body that must stay text.
	xss = `<img src=x onerror="document.title='pwned'">`
)

// fixture is a real bus with one team, and a ui server on it.
type fixture struct {
	svc  *team.Service
	srv  *ui.Server
	http *httptest.Server
	pol  teambus.Policy
}

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func testPolicy() teambus.Policy {
	p := teambus.DefaultPolicy()
	p.Heartbeat = time.Second
	p.MemberTimeout = 5 * time.Second
	p.ProbeTimeout = 2 * time.Second
	return p
}

// newFixture starts a node, creates team alpha (lead session L, members
// tm1 and tm2, tasks t1 <- t2 <- t3 and t4, mail with an HTML body) and
// serves the ui on it.
func newFixture(t *testing.T, cfg ui.Config) *fixture {
	t.Helper()
	ctx := testCtx(t)
	n := nodetest.NewBareServer(t)
	conn := nodetest.Connect(t, n)
	svc := team.New(conn.JS, team.Config{})
	pol := testPolicy()
	if _, err := svc.CreateTeam(ctx, teamID, "L", []team.MemberSpec{{ID: "tm1", Role: "coder"}, {ID: "tm2", Role: "reviewer"}}, pol); err != nil {
		t.Fatalf("create team: %v", err)
	}
	for _, ts := range []team.TaskSpec{{ID: "t1", Description: "first"}, {ID: "t2", Description: "second", Deps: []string{"t1"}},
		{ID: "t3", Description: "third", Deps: []string{"t2"}}, {ID: "t4", Description: "alone"}} {
		if _, err := svc.AddTask(ctx, teamID, ts); err != nil {
			t.Fatalf("add task %s: %v", ts.ID, err)
		}
	}
	send(t, svc, "tm1", teambus.Lead, "hello lead")
	send(t, svc, "tm2", "tm1", xss)
	cfg.Service = svc
	if cfg.Token == "" {
		cfg.Token = token
	}
	srv, err := ui.New(cfg)
	if err != nil {
		t.Fatalf("new ui: %v", err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		_ = srv.Close()
		hs.Close()
	})
	return &fixture{svc: svc, srv: srv, http: hs, pol: pol}
}

func send(t *testing.T, svc *team.Service, from, to, body string) mailbox.SendResult {
	t.Helper()
	a := team.Actor{Team: teamID, Member: from}
	if from == teambus.Lead {
		a.Session = "L"
	}
	res, err := svc.Send(testCtx(t), teamapi.SendRequest{Actor: a, To: to, Type: teambus.MsgInfo, Body: body})
	if err != nil {
		t.Fatalf("send from %s: %v", from, err)
	}
	return res
}

// client returns an HTTP client that holds the cookie of a first visit
// and does not follow redirects.
func (f *fixture) client(t *testing.T) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(f.http.URL + "/?token=" + token)
	if err != nil {
		t.Fatalf("first visit: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("first visit: got %d, want 303", resp.StatusCode)
	}
	return c
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func getJSON(t *testing.T, c *http.Client, u string, v any) {
	t.Helper()
	code, body := get(t, c, u)
	if code != http.StatusOK {
		t.Fatalf("GET %s: got %d %s, want 200", u, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: decode: %v", u, err)
	}
}

func TestNew_Validate(t *testing.T) {
	if _, err := ui.New(ui.Config{Token: token}); err == nil {
		t.Errorf("no service: got nil error")
	}
	if _, err := ui.New(ui.Config{Service: &team.Service{}, Token: "short"}); err == nil {
		t.Errorf("short token: got nil error")
	}
}

func TestServer_TokenRule(t *testing.T) {
	f := newFixture(t, ui.Config{AllowActions: true})
	anon := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	paths := []string{"/", "/app.js", "/app.css", "/favicon.svg", "/api/teams", "/api/teams/alpha", "/api/teams/alpha/mail",
		"/api/teams/alpha/events", "/api/teams/alpha/live", "/api/nothing"}
	for _, p := range paths {
		for _, q := range []string{"", "?token=wrong", "?token=" + token[:31]} {
			code, body := get(t, anon, f.http.URL+p+q)
			if code != http.StatusUnauthorized {
				t.Errorf("GET %s%s: got %d, want 401", p, q, code)
			}
			if strings.Contains(body, "tm1") || strings.Contains(body, "hello lead") {
				t.Errorf("GET %s%s: 401 body carries team data: %q", p, q, body)
			}
		}
	}
	for _, p := range []string{"/api/teams/alpha/tasks/t1/release", "/api/teams/alpha/members/tm1/probe"} {
		resp, err := anon.Post(f.http.URL+p, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST %s without token: got %d, want 401", p, resp.StatusCode)
		}
	}
	// A wrong cookie is no cookie.
	req, _ := http.NewRequest("GET", f.http.URL+"/api/teams", nil)
	req.AddCookie(&http.Cookie{Name: ui.CookieName, Value: "nope"})
	resp, err := anon.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong cookie: got %d, want 401", resp.StatusCode)
	}
}

func TestServer_FirstVisit(t *testing.T) {
	f := newFixture(t, ui.Config{})
	tests := []struct{ query, location string }{
		{"?token=" + token, "/"},
		{"?token=" + token + "&team=alpha", "/#team=alpha"},
		{"?token=" + token + "&team=bad.team", "/"},
	}
	for _, tt := range tests {
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Get(f.http.URL + "/" + tt.query)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || got != tt.location {
			t.Errorf("%s: got %d to %q, want 303 to %q", tt.query, resp.StatusCode, got, tt.location)
		}
		var ck *http.Cookie
		for _, c := range resp.Cookies() {
			if c.Name == ui.CookieName {
				ck = c
			}
		}
		if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Value != token || ck.Path != "/" {
			t.Errorf("%s: cookie %+v, want HttpOnly SameSite=Strict with the token", tt.query, ck)
		}
	}
	// The URL stays valid: a second browser opens it too.
	c1, c2 := f.client(t), f.client(t)
	for _, c := range []*http.Client{c1, c2} {
		if code, _ := get(t, c, f.http.URL+"/api/teams"); code != http.StatusOK {
			t.Errorf("second visit: got %d, want 200", code)
		}
	}
}

func TestServer_PageAndHeaders(t *testing.T) {
	f := newFixture(t, ui.Config{})
	c := f.client(t)
	resp, err := c.Get(f.http.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"script-src 'self'", "default-src 'none'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("CSP %q allows inline script", csp)
	}
	if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("X-Content-Type-Options: got %q", got)
	}
	if !strings.Contains(page, `<script src="/app.js" defer></script>`) {
		t.Errorf("page does not load app.js")
	}
	if regexp.MustCompile(`<script>|<script [^>]*>[^<]`).MatchString(page) || regexp.MustCompile(` on[a-z]+=`).MatchString(page) {
		t.Errorf("page has inline script or handlers")
	}
	if !strings.Contains(page, `name="actions" content="off"`) {
		t.Errorf("read-only page does not say so")
	}
	for name, ctype := range map[string]string{"/app.js": "text/javascript", "/app.css": "text/css", "/favicon.svg": "image/svg+xml"} {
		resp, err := c.Get(f.http.URL + name)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), ctype) || len(b) == 0 {
			t.Errorf("%s: got %d %q (%d bytes)", name, resp.StatusCode, resp.Header.Get("Content-Type"), len(b))
		}
	}
	// The script never writes markup from data.
	_, src := get(t, c, f.http.URL+"/app.js")
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("} {
		if strings.Contains(src, bad) {
			t.Errorf("app.js uses %s", bad)
		}
	}
}

func TestServer_Teams(t *testing.T) {
	f := newFixture(t, ui.Config{})
	c := f.client(t)
	var teams []ui.TeamSummary
	getJSON(t, c, f.http.URL+"/api/teams", &teams)
	if len(teams) != 1 {
		t.Fatalf("got %d teams, want 1", len(teams))
	}
	got := teams[0]
	if got.ID != teamID || got.Status != string(teambus.TeamPending) || got.Members != 2 || got.Tasks != 4 || got.Counts["available"] != 2 || got.Counts["pending"] != 2 {
		t.Errorf("got %+v", got)
	}
}

func TestServer_Team(t *testing.T) {
	f := newFixture(t, ui.Config{})
	c := f.client(t)
	var page struct {
		Team    teambus.Team      `json:"team"`
		Members []team.MemberView `json:"members"`
		Tasks   []teambus.Task    `json:"tasks"`
		Depth   map[string]int    `json:"depth"`
		Actions bool              `json:"actions"`
		Now     time.Time         `json:"now"`
	}
	getJSON(t, c, f.http.URL+"/api/teams/alpha", &page)
	if page.Team.ID != teamID || len(page.Members) != 2 || len(page.Tasks) != 4 || page.Actions || page.Now.IsZero() {
		t.Errorf("got team %s, %d members, %d tasks, actions %v, now %v", page.Team.ID, len(page.Members), len(page.Tasks), page.Actions, page.Now)
	}
	want := map[string]int{"t1": 0, "t2": 1, "t3": 2, "t4": 0}
	for id, d := range want {
		if page.Depth[id] != d {
			t.Errorf("depth of %s: got %d, want %d", id, page.Depth[id], d)
		}
	}
	tests := []struct {
		path string
		code int
	}{
		{"/api/teams/nosuch", http.StatusNotFound},
		{"/api/teams/bad.team", http.StatusBadRequest},
		{"/api/teams/nosuch/mail", http.StatusNotFound},
		{"/api/teams/nosuch/events", http.StatusNotFound},
		{"/api/teams/nosuch/live", http.StatusNotFound},
		{"/api/teams/" + url.PathEscape("a b") + "/live", http.StatusBadRequest},
		{"/nothing", http.StatusNotFound},
	}
	for _, tt := range tests {
		if code, body := get(t, c, f.http.URL+tt.path); code != tt.code {
			t.Errorf("GET %s: got %d %q, want %d", tt.path, code, body, tt.code)
		}
	}
}

func TestServer_Mail(t *testing.T) {
	f := newFixture(t, ui.Config{})
	c := f.client(t)
	send(t, f.svc, "tm1", "tm2", "third message")
	tests := []struct {
		query string
		want  []string
	}{
		{"", []string{"hello lead", xss, "third message"}},
		{"?from=tm1", []string{"hello lead", "third message"}},
		{"?to=tm1", []string{xss}},
		{"?type=info&text=THIRD", []string{"third message"}},
		{"?type=question", nil},
		{"?limit=1", []string{"third message"}},
	}
	for _, tt := range tests {
		var msgs []teambus.Message
		getJSON(t, c, f.http.URL+"/api/teams/alpha/mail"+tt.query, &msgs)
		var got []string
		for _, m := range msgs {
			got = append(got, m.Body)
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("mail%s: got %q, want %q", tt.query, got, tt.want)
		}
	}
	// Bodies travel as JSON strings with markup escaped.
	_, raw := get(t, c, f.http.URL+"/api/teams/alpha/mail?to=tm1")
	if strings.Contains(raw, "<img") || !strings.Contains(raw, `\u003cimg`) {
		t.Errorf("mail JSON carries raw markup: %s", raw)
	}
	for _, q := range []string{"?from=a.b", "?type=nosuch", "?limit=0", "?limit=x", "?limit=100000"} {
		if code, _ := get(t, c, f.http.URL+"/api/teams/alpha/mail"+q); code != http.StatusBadRequest {
			t.Errorf("mail%s: got %d, want 400", q, code)
		}
	}
}

func TestServer_Events(t *testing.T) {
	f := newFixture(t, ui.Config{})
	c := f.client(t)
	var evs []ui.EventItem
	getJSON(t, c, f.http.URL+"/api/teams/alpha/events", &evs)
	types := map[string]int{}
	for _, e := range evs {
		types[e.Type]++
	}
	if types[eventlog.EvTaskAdded] != 4 || types[eventlog.EvSessionStart] != 1 {
		t.Errorf("got event types %v, want 4 task.added and a session.start", types)
	}
	getJSON(t, c, f.http.URL+"/api/teams/alpha/events?type=task.added&limit=2", &evs)
	if len(evs) != 2 || evs[0].Type != eventlog.EvTaskAdded {
		t.Errorf("filtered: got %+v", evs)
	}
	if code, _ := get(t, c, f.http.URL+"/api/teams/alpha/events?limit=-1"); code != http.StatusBadRequest {
		t.Errorf("bad limit: got %d, want 400", code)
	}
}

// sse reads a live stream's frames.
type sse struct {
	frames chan [2]string
	seen   [][2]string
	resp   *http.Response
}

func openLive(t *testing.T, f *fixture, c *http.Client) *sse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", f.http.URL+"/api/teams/alpha/live", nil)
	resp, err := c.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("open live: %v", err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("live: got %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &sse{frames: make(chan [2]string, 1024), resp: resp}
	go func() {
		defer close(s.frames)
		r := bufio.NewReader(resp.Body)
		var ev string
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case strings.HasPrefix(line, "event: "):
				ev = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				s.frames <- [2]string{ev, line[len("data: "):]}
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
	})
	return s
}

// waitFor returns the index of the first frame from index from on that
// match accepts, reading more frames as needed: frames arrive in any
// order between the feed's sources, so none is skipped. The bound is
// generous (a loaded machine); the browser test holds the page to 2 s.
func (s *sse) waitFor(t *testing.T, what string, from int, match func(event, data string) bool) int {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for i := from; ; i++ {
		for i >= len(s.seen) {
			select {
			case fr, ok := <-s.frames:
				if !ok {
					t.Fatalf("stream ended waiting for %s", what)
				}
				s.seen = append(s.seen, fr)
			case <-deadline:
				t.Fatalf("no frame for %s", what)
			}
		}
		if match(s.seen[i][0], s.seen[i][1]) {
			return i
		}
	}
}

func TestServer_Live(t *testing.T) {
	f := newFixture(t, ui.Config{})
	c := f.client(t)
	ctx := testCtx(t)
	s := openLive(t, f, c)
	s.waitFor(t, "hello", 0, func(ev, _ string) bool { return ev == "hello" })
	s.waitFor(t, "first state", 0, func(ev, data string) bool { return ev == "state" && strings.Contains(data, `"id":"t4"`) })
	s.waitFor(t, "mail backlog", 0, func(ev, data string) bool { return ev == "mail" && strings.Contains(data, "hello lead") })
	s.waitFor(t, "event backlog", 0, func(ev, data string) bool { return ev == "event" && strings.Contains(data, "task.added") })

	send(t, f.svc, "tm2", teambus.Lead, "sent after load")
	s.waitFor(t, "new mail", 0, func(ev, data string) bool { return ev == "mail" && strings.Contains(data, "sent after load") })

	if _, err := f.svc.Claim(ctx, team.Actor{Team: teamID, Member: "tm1"}, "t1"); err != nil {
		t.Fatalf("claim: %v", err)
	}
	var sawState, sawEvent bool
	s.waitFor(t, "claimed task in state and the claim event", 0, func(ev, data string) bool {
		sawState = sawState || ev == "state" && strings.Contains(data, `"id":"t1","description":"first","priority":0,"dependencies":[],"status":"in_progress"`)
		sawEvent = sawEvent || ev == "event" && strings.Contains(data, eventlog.EvTaskClaimed)
		return sawState && sawEvent
	})

	// A heartbeat is pushed (the member comes online), and so is its
	// expiry, which the server reports as a purge.
	if _, err := f.svc.Store().Beat(ctx, teamID, kv.MemberKey("tm2"), &kv.Heartbeat{Member: "tm2", TS: time.Now()}, time.Second, 0); err != nil {
		t.Fatalf("beat: %v", err)
	}
	online := func(want bool) func(ev, data string) bool {
		return func(ev, data string) bool {
			if ev != "state" {
				return false
			}
			var v struct {
				Members []team.MemberView `json:"members"`
			}
			_ = json.Unmarshal([]byte(data), &v)
			for _, m := range v.Members {
				if m.ID == "tm2" {
					return m.Online == want
				}
			}
			return false
		}
	}
	i := s.waitFor(t, "tm2 online", 0, online(true))
	s.waitFor(t, "tm2 heartbeat expired", i, online(false))

	// Two browsers share one feed; it stops when both leave.
	s2 := openLive(t, f, f.client(t))
	s2.waitFor(t, "second browser backlog", 0, func(ev, data string) bool { return ev == "mail" && strings.Contains(data, "sent after load") })
	if teams, browsers := f.srv.Feeds(); teams != 1 || browsers != 2 {
		t.Errorf("feeds: got %d teams, %d browsers, want 1, 2", teams, browsers)
	}
	s.resp.Body.Close()
	s2.resp.Body.Close()
	bustest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		if teams, browsers := f.srv.Feeds(); teams != 0 || browsers != 0 {
			return fmt.Errorf("%d feeds, %d browsers left", teams, browsers)
		}
		return nil
	})
}

func csrfToken(t *testing.T, f *fixture, c *http.Client) string {
	t.Helper()
	_, page := get(t, c, f.http.URL+"/")
	m := regexp.MustCompile(`name="csrf-token" content="([0-9a-f]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no csrf token in page")
	}
	return m[1]
}

func post(t *testing.T, f *fixture, c *http.Client, path string, hdr map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", f.http.URL+path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServer_ReadOnly(t *testing.T) {
	f := newFixture(t, ui.Config{})
	c := f.client(t)
	tok := csrfToken(t, f, c)
	for _, p := range []string{"/api/teams/alpha/tasks/t1/release", "/api/teams/alpha/tasks/t1/pause", "/api/teams/alpha/members/tm1/probe"} {
		if code, _ := post(t, f, c, p, map[string]string{"X-CSRF-Token": tok}); code != http.StatusForbidden {
			t.Errorf("POST %s read-only: got %d, want 403", p, code)
		}
	}
	tk, _, err := f.svc.Store().Task(testCtx(t), teamID, "t1")
	if err != nil || tk.Status != teambus.TaskAvailable {
		t.Errorf("t1 changed: %v %v", tk, err)
	}
}

func TestServer_Actions(t *testing.T) {
	f := newFixture(t, ui.Config{AllowActions: true})
	ctx := testCtx(t)
	c := f.client(t)
	tok := csrfToken(t, f, c)
	ok := map[string]string{"X-CSRF-Token": tok}
	if _, err := f.svc.Claim(ctx, team.Actor{Team: teamID, Member: "tm1"}, "t1"); err != nil {
		t.Fatalf("claim: %v", err)
	}
	// The CSRF check.
	for _, hdr := range []map[string]string{nil, {"X-CSRF-Token": "nope"}, {"X-CSRF-Token": tok, "Origin": "http://evil.example"},
		{"X-CSRF-Token": tok, "Sec-Fetch-Site": "cross-site"}} {
		if code, _ := post(t, f, c, "/api/teams/alpha/tasks/t1/release", hdr); code != http.StatusForbidden {
			t.Errorf("POST with %v: got %d, want 403", hdr, code)
		}
	}
	if tk, _, _ := f.svc.Store().Task(ctx, teamID, "t1"); tk.Status != teambus.TaskInProgress {
		t.Fatalf("refused POST changed t1: %s", tk.Status)
	}
	tests := []struct {
		path string
		code int
	}{
		{"/api/teams/alpha/tasks/t1/release", http.StatusOK},
		{"/api/teams/alpha/tasks/t1/release", http.StatusConflict}, // not active any more
		{"/api/teams/alpha/tasks/t4/pause", http.StatusOK},
		{"/api/teams/alpha/tasks/t4/pause", http.StatusOK}, // twice is harmless
		{"/api/teams/alpha/members/tm2/probe", http.StatusOK},
		{"/api/teams/alpha/tasks/nosuch/pause", http.StatusNotFound},
		{"/api/teams/alpha/tasks/t1/explode", http.StatusNotFound},
		{"/api/teams/alpha/members/nosuch/probe", http.StatusNotFound},
		{"/api/teams/alpha/members/lead/probe", http.StatusBadRequest},
		{"/api/teams/nosuch/tasks/t1/pause", http.StatusNotFound},
	}
	for _, tt := range tests {
		if code, body := post(t, f, c, tt.path, ok); code != tt.code {
			t.Errorf("POST %s: got %d %q, want %d", tt.path, code, body, tt.code)
		}
	}
	for id, want := range map[string]teambus.TaskStatus{"t1": teambus.TaskAvailable, "t4": teambus.TaskPaused} {
		if tk, _, _ := f.svc.Store().Task(ctx, teamID, id); tk.Status != want {
			t.Errorf("%s: got %s, want %s", id, tk.Status, want)
		}
	}
	// The probe is a status_check to the member's sidecar.
	var probes []teambus.Message
	if err := f.svc.Mailbox(teamID).Replay(ctx, mailbox.ReplayFilter{To: "tm2", Type: teambus.MsgStatusCheck}, func(m teambus.Message) error {
		probes = append(probes, m)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(probes) != 1 || probes[0].From != teambus.Lead {
		t.Errorf("probes: got %+v, want one status_check from the lead", probes)
	}
	// Every action that did something is in the event log.
	var actions []string
	if err := f.svc.Events(teamID).Replay(ctx, eventlog.EventFilter{Type: "ui.action"}, func(r *eventlog.EventRecord) error {
		var d struct{ Action string }
		_ = json.Unmarshal(r.Event.Data, &d)
		actions = append(actions, d.Action)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(actions, ","); got != "release,pause,pause,probe" {
		t.Errorf("ui.action events: got %s, want release,pause,pause,probe", got)
	}
}

func TestDepths(t *testing.T) {
	tk := func(id string, deps ...string) *teambus.Task { return &teambus.Task{ID: id, Dependencies: deps} }
	tests := []struct {
		name  string
		tasks []*teambus.Task
		want  map[string]int
	}{
		{"diamond", []*teambus.Task{tk("a"), tk("b", "a"), tk("c", "a"), tk("d", "b", "c")}, map[string]int{"a": 0, "b": 1, "c": 1, "d": 2}},
		{"missing dependency", []*teambus.Task{tk("a", "gone")}, map[string]int{"a": 0}},
		{"cycle", []*teambus.Task{tk("a", "b"), tk("b", "a")}, map[string]int{"a": 1, "b": 0}},
		{"longest path wins", []*teambus.Task{tk("a"), tk("b", "a"), tk("c", "b"), tk("d", "a", "c")}, map[string]int{"a": 0, "b": 1, "c": 2, "d": 3}},
	}
	for _, tt := range tests {
		got := ui.Depths(tt.tasks)
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}
