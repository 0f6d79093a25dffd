package ui

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/team"
)

//go:embed assets
var assets embed.FS

// CookieName is the cookie that carries the access token after the first
// visit.
const CookieName = "teambus_ui"

// csp forbids inline script and any other origin: the page loads its own
// script, style and icon, and talks only to its own API.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Config holds the settings of a Server.
type Config struct {
	// Service reads and changes teams.
	Service *team.Service
	// Token is the access token; at least 16 bytes. NewToken makes one.
	Token string
	// AllowActions enables the operator actions (POST).
	AllowActions bool
	// Secure marks the cookie Secure (the server is behind TLS).
	Secure bool
	// MailBacklog and EventBacklog are how many messages and events a feed
	// keeps for browsers that connect (default 500 each).
	MailBacklog, EventBacklog int
	// ClientBuffer is how many frames wait for one browser before it is
	// dropped as too slow (default 256).
	ClientBuffer int
	// RebuildEvery is the least time between two rebuilds of a team view
	// (default 150ms): a burst of changes costs one rebuild.
	RebuildEvery time.Duration
	// Logger receives the server's logs (default slog.Default()).
	Logger *slog.Logger
	// Reachable reports whether the bus connection is up (for a NATS
	// connection, its IsConnected). While it is not, the API answers at
	// once 503 "bus unreachable" instead of waiting for a request to time
	// out, and a live stream ends at once, so the browser tries it again
	// a second later. Nil: always.
	Reachable func() bool
	// Hosts are the host names, beside IP addresses and localhost, a
	// request's Host header may name; any other is refused (421), so a
	// page of another site can not reach the view by pointing its name
	// at this address (DNS rebinding).
	Hosts []string
}

// Validate checks the config.
func (c Config) Validate() error {
	if c.Service == nil {
		return teambus.Invalidf("ui: no team service")
	}
	if len(c.Token) < 16 {
		return teambus.Invalidf("ui: access token of %d bytes, at least 16", len(c.Token))
	}
	if c.MailBacklog < 0 || c.EventBacklog < 0 || c.ClientBuffer < 0 || c.RebuildEvery < 0 {
		return teambus.Invalidf("ui: negative limit")
	}
	return nil
}

func (c *Config) defaults() {
	if c.MailBacklog == 0 {
		c.MailBacklog = 500
	}
	if c.EventBacklog == 0 {
		c.EventBacklog = 500
	}
	if c.ClientBuffer == 0 {
		c.ClientBuffer = 256
	}
	if c.RebuildEvery == 0 {
		c.RebuildEvery = 150 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// NewToken returns a random token of 32 hex digits.
func NewToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Server is the web view. It is an http.Handler; Close stops its feeds.
type Server struct {
	cfg  Config
	csrf string
	mux  *http.ServeMux
	page *template.Template
	log  *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	feeds  map[string]*feed
	closed bool
}

// New returns a server for cfg. It does no I/O.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	page, err := template.ParseFS(assets, "assets/index.html")
	if err != nil {
		return nil, fmt.Errorf("ui: parse page: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, csrf: NewToken(), page: page, log: cfg.Logger, ctx: ctx, cancel: cancel, feeds: map[string]*feed{}}
	s.routes()
	return s, nil
}

// Close stops every feed and waits for their goroutines. Open live
// streams end. It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

// URL returns the address a person opens: base (http://host:port) with the
// token and, when team is set, the team's page.
func (s *Server) URL(base, teamID string) string {
	q := url.Values{"token": {s.cfg.Token}}
	if teamID != "" {
		q.Set("team", teamID)
	}
	return strings.TrimRight(base, "/") + "/?" + q.Encode()
}

func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", s.handlePage)
	for _, name := range []string{"app.js", "app.css", "favicon.svg"} {
		m.HandleFunc("GET /"+name, s.handleAsset(name))
	}
	m.HandleFunc("GET /api/teams", s.handleTeams)
	m.HandleFunc("GET /api/teams/{team}", s.handleTeam)
	m.HandleFunc("GET /api/teams/{team}/mail", s.handleMail)
	m.HandleFunc("GET /api/teams/{team}/events", s.handleEvents)
	m.HandleFunc("GET /api/teams/{team}/live", s.handleLive)
	m.HandleFunc("POST /api/teams/{team}/tasks/{task}/{action}", s.handleTaskAction)
	m.HandleFunc("POST /api/teams/{team}/members/{member}/{action}", s.handleMemberAction)
	s.mux = m
}

// ServeHTTP checks the Host header and the token on every request, sets the security headers
// and routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	if !s.hostOK(r.Host) {
		misdirected(w)
		return
	}
	if tok := r.URL.Query().Get("token"); tok != "" {
		if !s.tokenOK(tok) {
			unauthorized(w)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: CookieName, Value: s.cfg.Token, Path: "/", HttpOnly: true, Secure: s.cfg.Secure, SameSite: http.SameSiteStrictMode})
		if r.Method == http.MethodGet && r.URL.Path == "/" {
			// Take the token out of the address bar and the history.
			loc := "/"
			if t := r.URL.Query().Get("team"); t != "" && teambus.ValidateID("team", t) == nil {
				loc = "/#team=" + t
			}
			http.Redirect(w, r, loc, http.StatusSeeOther)
			return
		}
	} else if c, err := r.Cookie(CookieName); err != nil || !s.tokenOK(c.Value) {
		unauthorized(w)
		return
	}
	if s.cfg.Reachable != nil && strings.HasPrefix(r.URL.Path, "/api/") && !s.cfg.Reachable() {
		if live, _ := path.Match("/api/teams/*/live", r.URL.Path); live && r.Method == http.MethodGet {
			// A browser does not reconnect a stream refused with an
			// error status: end this one at once instead, and it comes
			// back in a second, until the bus is back.
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "retry: 1000\n\n") // the browser went away: nothing to tell it
			return
		}
		http.Error(w, "503 bus unreachable: the view reconnects by itself; reload once the bus is back", http.StatusServiceUnavailable)
		return
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) tokenOK(tok string) bool {
	return subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.Token)) == 1
}

func unauthorized(w http.ResponseWriter) {
	http.Error(w, "401 unauthorized: open the URL `teambus ui` printed (it carries the access token)", http.StatusUnauthorized)
}

type pageData struct {
	CSRF    string
	Actions bool
}

func (s *Server) handlePage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := s.page.Execute(w, pageData{CSRF: s.csrf, Actions: s.cfg.AllowActions}); err != nil {
		s.log.Warn("render page", "err", err)
	}
}

func (s *Server) handleAsset(name string) http.HandlerFunc {
	b, err := fs.ReadFile(assets, "assets/"+name)
	ctype := map[string]string{"js": "text/javascript; charset=utf-8", "css": "text/css; charset=utf-8", "svg": "image/svg+xml"}[name[strings.LastIndexByte(name, '.')+1:]]
	return func(w http.ResponseWriter, r *http.Request) {
		if err != nil {
			http.Error(w, "asset missing", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", ctype)
		_, _ = w.Write(b) // the client went away: nothing to tell it
	}
}

// checkAction refuses a POST unless actions are enabled and it carries the
// CSRF token from this origin.
func (s *Server) checkAction(w http.ResponseWriter, r *http.Request) bool {
	if !s.cfg.AllowActions {
		http.Error(w, "403 forbidden: the view is read-only (start `teambus ui --allow-actions`)", http.StatusForbidden)
		return false
	}
	tok := r.Header.Get("X-CSRF-Token")
	if tok == "" || subtle.ConstantTimeCompare([]byte(tok), []byte(s.csrf)) != 1 {
		http.Error(w, "403 forbidden: missing or wrong CSRF token", http.StatusForbidden)
		return false
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		http.Error(w, "403 forbidden: cross-site request", http.StatusForbidden)
		return false
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			http.Error(w, "403 forbidden: cross-origin request", http.StatusForbidden)
			return false
		}
	}
	return true
}

// httpError answers err with the status of its class.
func httpError(w http.ResponseWriter, err error) {
	code := http.StatusServiceUnavailable
	switch {
	case errors.Is(err, teambus.ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, teambus.ErrInvalid):
		code = http.StatusBadRequest
	case errors.Is(err, teambus.ErrState), errors.Is(err, teambus.ErrConflict), errors.Is(err, teambus.ErrFenced):
		code = http.StatusConflict
	}
	http.Error(w, oneLine(err.Error()), code)
}

// oneLine strips control characters, newlines included.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return ' '
		}
		return r
	}, s)
}
