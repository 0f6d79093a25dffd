//go:build !teambus_agent

package relay

// The sidecar's side of the relay: it links the NATS client. The lean
// agent build (-tags teambus_agent) has only the caller's side
// (relay.go).

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/teamapi"
)

// maxTimeout bounds a forwarded request (an inbox --wait is the longest).
const maxTimeout = 10 * time.Minute

// Server forwards the requests of one member's commands: NC is its
// sidecar's connection, with the operator's token.
type Server struct {
	NC     *nats.Conn
	Team   string
	Member string
	Log    *slog.Logger // nil: no log
	// Connect opens a connection with a member's credential, for callers
	// that show one; the relay keeps it for the next.
	Connect func(ctx context.Context, user, password string) (*nats.Conn, error)

	mu      sync.Mutex
	member  *nats.Conn // the member credential's connection, once opened
	userKey [32]byte   // which credential it is
}

// Listener is a relay socket; Close removes it unless another sidecar
// has taken the path over since.
type Listener struct {
	net.Listener
	path string
	fi   os.FileInfo
	once sync.Once
}

// Listen opens the relay socket at path (Path): its directory is made
// private to the user first. A socket left by a sidecar that was killed
// is replaced, and so is one a live sidecar of the same credential holds:
// the newest sidecar serves (an older one is being fenced).
func Listen(path string) (*Listener, error) {
	if err := privateDir(filepath.Dir(path), true); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("relay socket %s: a file that is not a socket is in the way", path)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("relay socket %s: remove the old one: %w", path, err)
		}
	}
	sweep(filepath.Dir(path), time.Now().Add(-staleAfter))
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("relay socket %s: %w", path, err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("relay socket %s: %w", path, err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("relay socket %s: %w", path, err)
	}
	return &Listener{Listener: ln, path: path, fi: fi}, nil
}

// staleAfter is how old a socket nobody listens on must be before a
// starting sidecar removes it (a younger one may be a sidecar between
// bind and listen).
const staleAfter = time.Minute

// sweep removes the sockets in dir that were left by sidecars killed
// before they could remove them: older than before, and refusing
// connections.
func sweep(dir string, before time.Time) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.Type() != os.ModeSocket || !strings.HasSuffix(e.Name(), ".sock") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(p)
		if err != nil || fi.ModTime().After(before) {
			continue
		}
		c, err := net.DialTimeout("unix", p, 100*time.Millisecond)
		if err == nil {
			c.Close()
			continue
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			os.Remove(p)
		}
	}
}

// Close stops listening and removes the socket if it is still this one.
func (l *Listener) Close() error {
	err := l.Listener.Close()
	l.once.Do(func() {
		if fi, serr := os.Lstat(l.path); serr == nil && os.SameFile(fi, l.fi) {
			os.Remove(l.path)
		}
	})
	return err
}

// Serve answers the connections of ln until ctx ends or ln is closed,
// and closes ln.
func (s *Server) Serve(ctx context.Context, ln *Listener) error {
	if s.Log == nil {
		s.Log = slog.New(slog.DiscardHandler)
	}
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	defer ln.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("relay accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serveConn(ctx, c)
		}()
	}
}

func (s *Server) serveConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	if uid, ok := peerUID(c); ok && uid != os.Getuid() {
		s.Log.Warn("relay: refused a connection of another user", "uid", uid)
		return
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	enc := json.NewEncoder(c)
	max := s.NC.MaxPayload()
	r := bufio.NewReaderSize(c, 64<<10)
	line, err := readLine(r)
	if err != nil {
		return
	}
	var g greeting
	if err := json.Unmarshal(line, &g); err != nil {
		enc.Encode(hello{Err: "undecodable greeting"})
		return
	}
	nc, subject, err := s.route(ctx, g)
	if err != nil {
		enc.Encode(hello{Err: err.Error()})
		return
	}
	if err := enc.Encode(hello{MaxPayload: max}); err != nil {
		return
	}
	for {
		var req request
		data, err := readFrame(r, &req, func() int { return req.Len }, max)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				_ = writeFrame(c, reply{Err: "unreadable request: " + err.Error()}, nil)
			}
			return
		}
		rep, body := forward(ctx, nc, subject, req, data)
		s.Log.Debug("relay: forwarded", "verb", req.Verb, "operator", g.Token != "", "code", rep.Code, "err", rep.Err)
		if err := writeFrame(c, rep, body); err != nil {
			return
		}
	}
}

// route checks a caller's greeting and returns the connection its
// requests go out on and their subject (verb appended): the sidecar's own
// for the operator's token, the member credential's for that credential.
func (s *Server) route(ctx context.Context, g greeting) (*nats.Conn, func(verb string) string, error) {
	if g.Team != s.Team || g.Member != s.Member {
		return nil, nil, fmt.Errorf("this relay serves %s of team %s", s.Member, s.Team)
	}
	switch {
	case g.Token != "" && g.User == "":
		if s.NC.Opts.Token == "" || subtle.ConstantTimeCompare([]byte(g.Token), []byte(s.NC.Opts.Token)) != 1 {
			return nil, nil, errors.New("refused: not the token of this bus")
		}
		return s.NC, func(verb string) string { return teamapi.ServiceSubject(s.Team, verb) }, nil
	case g.User != "" && g.Password != "" && g.Token == "":
		if g.User != bus.MemberUser(s.Team, s.Member) {
			return nil, nil, fmt.Errorf("refused: the credential of %s does not call for %s of team %s", g.User, s.Member, s.Team)
		}
		nc, err := s.memberConn(ctx, g.User, g.Password)
		if err != nil {
			return nil, nil, err
		}
		return nc, teamapi.MemberServiceSubject, nil
	}
	return nil, nil, errors.New("refused: show the token or a member credential")
}

// memberConn returns the connection of the credential user/password,
// opening it (the node checks the credential) unless the relay holds it
// already.
func (s *Server) memberConn(ctx context.Context, user, password string) (*nats.Conn, error) {
	key := sha256.Sum256([]byte(user + "\x00" + password))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.member != nil && s.userKey == key && !s.member.IsClosed() {
		return s.member, nil
	}
	if s.Connect == nil {
		return nil, errors.New("refused: this relay takes only the operator's token")
	}
	nc, err := s.Connect(ctx, user, password)
	if err != nil {
		return nil, fmt.Errorf("connect with the credential of %s: %w", user, err)
	}
	if s.member != nil {
		s.member.Close()
	}
	s.member, s.userKey = nc, key
	return nc, nil
}

// Close closes the member credential's connection the relay holds.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.member != nil {
		s.member.Close()
		s.member = nil
	}
}

// forward sends the request body data of req to the team service on nc
// and returns its answer.
func forward(ctx context.Context, nc *nats.Conn, subject func(string) string, req request, data []byte) (reply, []byte) {
	if !teamapi.IsVerb(req.Verb) {
		return reply{Err: fmt.Sprintf("unknown verb %q", req.Verb)}, nil
	}
	d := teamapi.DefaultTimeout
	if req.TimeoutMS > 0 {
		d = min(time.Duration(req.TimeoutMS)*time.Millisecond, maxTimeout)
	}
	rctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	msg, err := nc.RequestWithContext(rctx, subject(req.Verb), data)
	switch {
	case err == nil:
		return reply{Code: msg.Header.Get(teamapi.ErrorCodeHeader), Len: len(msg.Data)}, msg.Data
	case errors.Is(err, nats.ErrNoResponders):
		return reply{Err: errNoResponders}, nil
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return reply{Err: errTimeout}, nil
	default:
		return reply{Err: err.Error()}, nil
	}
}
