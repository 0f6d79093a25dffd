package relay

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/teamapi"
)

// DisableEnv turns the relay off for a command when set to a non-empty
// value: it then always connects itself.
const DisableEnv = "TEAMBUS_NO_RELAY"

// maxTimeout bounds a forwarded request (an inbox --wait is the longest).
const maxTimeout = 10 * time.Minute

// Dir is the directory of the relay sockets: teambus in $XDG_RUNTIME_DIR
// when it is set, else teambus-<uid> in the system temp dir.
func Dir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "teambus")
	}
	return filepath.Join(os.TempDir(), "teambus-"+strconv.Itoa(os.Getuid()))
}

// Path is the socket of the sidecar of member in team on the bus at
// server (a NATS URL; only its host and port count). The name is a hash:
// it tells nothing of the team.
func Path(server, team, member string) string {
	h := sha256.Sum256([]byte("teambus-relay\x00" + hostPort(server) + "\x00" + team + "\x00" + member))
	return filepath.Join(Dir(), hex.EncodeToString(h[:12])+".sock")
}

// hostPort is the host:port of a NATS URL (the first of a list).
func hostPort(server string) string {
	server, _, _ = strings.Cut(server, ",")
	if u, err := url.Parse(strings.TrimSpace(server)); err == nil && u.Host != "" {
		return u.Host
	}
	return strings.TrimSpace(server)
}

// privateDir checks that dir is a directory (not a link) of this user
// that nobody else may enter; with create it makes it first if missing.
func privateDir(dir string, create bool) error {
	if create {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("relay directory: %w", err)
		}
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("relay directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("relay directory %s is not a directory", dir)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("relay directory %s is open to others (mode %v)", dir, fi.Mode().Perm())
	}
	if uid, ok := ownerOf(fi); ok && uid != os.Getuid() {
		return fmt.Errorf("relay directory %s belongs to uid %d", dir, uid)
	}
	return nil
}

// Auth is what a caller would have connected with: the operator's
// token, or a member's user and password.
type Auth struct {
	Token    string `json:"token,omitempty"`
	User     string `json:"user,omitempty"`
	Password string `json:"password,omitempty"`
}

// greeting is a caller's first line: whom it calls for, and its secret.
type greeting struct {
	Team   string `json:"team"`
	Member string `json:"member"`
	Auth
}

// hello is the relay's answer to the greeting: Err when it refuses.
type hello struct {
	MaxPayload int64  `json:"max_payload,omitempty"`
	Err        string `json:"err,omitempty"`
}

// request heads one request from a command: a verb of the team service,
// how long the command waits, and the length of the request body, whose
// bytes follow the line as they are (the body the team service gets).
type request struct {
	Verb      string `json:"verb"`
	Len       int    `json:"len"`
	TimeoutMS int64  `json:"timeout_ms,omitempty"`
}

// reply heads the relay's answer: the service's error code and the
// length of its answer body, whose bytes follow the line as they are, or
// Err when the request got no answer (errNoResponders, errTimeout or a
// reason).
type reply struct {
	Code string `json:"code,omitempty"`
	Len  int    `json:"len,omitempty"`
	Err  string `json:"err,omitempty"`
}

const (
	errNoResponders = "no responders"
	errTimeout      = "timeout"
)

// maxNATSPayload is the largest max_payload a NATS server takes.
const maxNATSPayload = 64 << 20

// maxLine is the longest line either side reads: a greeting, a hello or
// the head of a request or reply.
const maxLine = 64 << 10

// readLine reads one line of at most maxLine bytes, without its newline.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		b, err := r.ReadSlice('\n')
		line = append(line, b...)
		if len(line) > maxLine {
			return nil, errors.New("line too long")
		}
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}

// readFrame reads a head line into head and the n bytes of body that
// follow it, n as the head says (at most max).
func readFrame(r *bufio.Reader, head any, n func() int, max int64) ([]byte, error) {
	line, err := readLine(r)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(line, head); err != nil {
		return nil, fmt.Errorf("undecodable head: %w", err)
	}
	size := n()
	if size < 0 || int64(size) > max {
		return nil, fmt.Errorf("body of %d bytes, at most %d", size, max)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return body, nil
}

// writeFrame writes head as a line and body after it, in one write.
func writeFrame(w io.Writer, head any, body []byte) error {
	b, err := json.Marshal(head)
	if err != nil {
		return err
	}
	buf := make([]byte, 0, len(b)+1+len(body))
	buf = append(append(append(buf, b...), '\n'), body...)
	_, err = w.Write(buf)
	return err
}

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

// Conn is a command's connection to its sidecar's relay: a
// teamapi.Transport.
type Conn struct {
	c     net.Conn
	r     *bufio.Reader
	hello hello
}

// Dial connects to the relay of member in team on the bus at server and
// shows it auth. An error means no relay is there to use (none runs, the
// socket is not private, or it refused): connect directly instead.
func Dial(ctx context.Context, server, team, memberID string, auth Auth) (*Conn, error) {
	path := Path(server, team, memberID)
	if err := privateDir(filepath.Dir(path), false); err != nil {
		return nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	b, err := json.Marshal(greeting{Team: team, Member: memberID, Auth: auth})
	if err == nil {
		_, err = c.Write(append(b, '\n'))
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("relay %s: %w", path, err)
	}
	rc := &Conn{c: c, r: bufio.NewReaderSize(c, 64<<10)}
	line, err := readLine(rc.r)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("relay %s: no hello: %w", path, eof(err))
	}
	if err := json.Unmarshal(line, &rc.hello); err != nil {
		c.Close()
		return nil, fmt.Errorf("relay %s: undecodable hello: %w", path, err)
	}
	if rc.hello.Err != "" {
		c.Close()
		return nil, fmt.Errorf("relay %s: %s", path, rc.hello.Err)
	}
	c.SetDeadline(time.Time{})
	return rc, nil
}

// eof says a connection closed early as io.ErrUnexpectedEOF.
func eof(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Request implements teamapi.Transport.
func (rc *Conn) Request(ctx context.Context, _, verb string, data []byte) (string, []byte, error) {
	req := request{Verb: verb, Len: len(data)}
	if dl, ok := ctx.Deadline(); ok {
		req.TimeoutMS = max(time.Until(dl).Milliseconds(), 1)
		rc.c.SetDeadline(dl.Add(time.Second)) // the relay answers a timeout itself
	}
	stop := context.AfterFunc(ctx, func() { rc.c.SetDeadline(time.Now()) })
	defer stop()
	if err := writeFrame(rc.c, req, data); err != nil {
		return "", nil, fmt.Errorf("sidecar relay: %w", err)
	}
	var rep reply
	body, err := readFrame(rc.r, &rep, func() int { return rep.Len }, maxNATSPayload)
	if err != nil {
		if ctx.Err() != nil {
			return "", nil, ctx.Err()
		}
		return "", nil, fmt.Errorf("sidecar relay: the sidecar closed the connection before answering (the request may have been carried out): %w", eof(err))
	}
	switch rep.Err {
	case "":
		return rep.Code, body, nil
	case errNoResponders:
		return "", nil, nats.ErrNoResponders
	case errTimeout:
		return "", nil, context.DeadlineExceeded
	default:
		return "", nil, fmt.Errorf("sidecar relay: %s", rep.Err)
	}
}

// MaxPayload implements teamapi.Transport: the sidecar connection's.
func (rc *Conn) MaxPayload() int64 { return rc.hello.MaxPayload }

// Close closes the connection.
func (rc *Conn) Close() error { return rc.c.Close() }
