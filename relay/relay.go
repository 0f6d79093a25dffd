package relay

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/teambus/teambus/teamapi"
)

// DisableEnv turns the relay off for a command when set to a non-empty
// value: it then always connects itself.
const DisableEnv = "TEAMBUS_NO_RELAY"

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
// A directory that fails the check is a *DirError.
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
		return &DirError{Dir: dir, Why: "it is not a directory"}
	}
	if uid, ok := ownerOf(fi); ok && uid != os.Getuid() {
		return &DirError{Dir: dir, Why: fmt.Sprintf("it belongs to uid %d, not to this user (uid %d): another local user made it", uid, os.Getuid())}
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return &DirError{Dir: dir, Why: fmt.Sprintf("it is open to others (mode %v)", fi.Mode().Perm())}
	}
	return nil
}

// DirError is a relay directory that is not private to this user: the
// relay is off, and every command connects to the bus itself. Nothing
// leaks (no socket is made or used there), but one-shot commands lose
// the relay's speed, so the sidecar logs it once.
type DirError struct {
	Dir, Why string
}

func (e *DirError) Error() string {
	return fmt.Sprintf("relay off: the relay directory %s is not private (%s): one-shot commands connect to the bus themselves; remove it, or point XDG_RUNTIME_DIR at a private directory", e.Dir, e.Why)
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

// DialTimeout is how long a command waits to reach its sidecar's relay
// before it goes without (connects itself, or hands over to a build that
// can).
const DialTimeout = 250 * time.Millisecond

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
		return "", nil, teamapi.ErrNoResponders
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
