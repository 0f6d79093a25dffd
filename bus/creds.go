package bus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/internal/atomicfile"
)

// CredsKind marks a teambus member credentials file, as opposed to a NATS
// .creds file (a JWT and an nkey seed).
const CredsKind = "teambus-member-credentials"

// inboxRoot starts every member's inbox prefix. It is not _INBOX: members
// never see replies sent to the default inboxes.
const inboxRoot = "_TB_INBOX"

// MemberUser is the NATS user name of a member's credential. Ids hold no
// dot, so the name is unambiguous.
func MemberUser(team, member string) string { return team + "." + member }

// MemberInboxPrefix is the inbox prefix a member's connection must use:
// replies to its requests (JetStream acks, pulled mail, KV reads) land
// below it, and it may subscribe nowhere else. It is a subject of its own
// tokens, so no two (team, member) pairs share a prefix.
func MemberInboxPrefix(team, member string) string {
	return inboxRoot + "." + team + "." + member
}

// ValidateCredsIDs checks the ids of a credential: a team id, and a member
// id (or the lead).
func ValidateCredsIDs(team, member string) error {
	if err := teambus.ValidateID("team", team); err != nil {
		return err
	}
	if member == teambus.Lead {
		return nil
	}
	return teambus.ValidateMemberID(member)
}

// Creds is a member credential as written to its file (mode 0600): who it
// is, the user name and password, the inbox prefix the connection must
// use, and the URLs of the bus.
type Creds struct {
	Kind        string    `json:"kind"`
	Team        string    `json:"team"`
	Member      string    `json:"member"`
	User        string    `json:"user"`
	Password    string    `json:"password"`
	InboxPrefix string    `json:"inbox_prefix"`
	Servers     []string  `json:"servers,omitempty"`
	IssuedAt    time.Time `json:"issued_at"`
}

// Validate checks that c is a complete member credential.
func (c *Creds) Validate() error {
	if c.Kind != CredsKind {
		return teambus.Invalidf("not a teambus member credential (kind %q)", c.Kind)
	}
	if err := ValidateCredsIDs(c.Team, c.Member); err != nil {
		return err
	}
	if c.User != MemberUser(c.Team, c.Member) || c.Password == "" || c.InboxPrefix != MemberInboxPrefix(c.Team, c.Member) {
		return &DamagedCredsError{Team: c.Team, Member: c.Member}
	}
	return nil
}

// DamagedCredsError is a member credential whose fields do not agree
// (user, password, inbox prefix): a new one must be issued. It is
// invalid input (teambus.ErrInvalid).
type DamagedCredsError struct{ Team, Member string }

func (e *DamagedCredsError) Error() string {
	return fmt.Sprintf("member credential of %s in team %s is damaged: issue a new one for the member", e.Member, e.Team)
}

// Unwrap makes the error invalid input.
func (e *DamagedCredsError) Unwrap() error { return teambus.ErrInvalid }

// WriteCreds writes c to path, mode 0600, replacing what was there.
func WriteCreds(path string, c *Creds) error {
	if err := atomicfile.WriteJSON(path, c, 0o600); err != nil {
		return fmt.Errorf("write credentials %s: %w", path, err)
	}
	return nil
}

// ReadCreds reads a member credentials file. ok is false, with no error,
// for any other file (a NATS .creds file): Connect then hands it to NATS.
func ReadCreds(path string) (c *Creds, ok bool, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false, teambus.Invalidf("read credentials %s: %w", path, err)
	}
	if !bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
		return nil, false, nil
	}
	var cr Creds
	if err := json.Unmarshal(b, &cr); err != nil || cr.Kind != CredsKind {
		return nil, false, nil
	}
	if err := cr.Validate(); err != nil {
		return nil, true, fmt.Errorf("credentials %s: %w", path, err)
	}
	return &cr, true, nil
}

// deniedError keeps the last permission violation the server reported on
// a connection. The server answers a denied request with nothing at all,
// so the request times out; this says why.
type deniedError struct {
	mu   sync.Mutex
	err  error
	once sync.Once
	ch   chan struct{} // closed at the first violation
}

func newDeniedError() *deniedError { return &deniedError{ch: make(chan struct{})} }

func (d *deniedError) record(_ *nats.Conn, _ *nats.Subscription, err error) {
	if err == nil || !(errors.Is(err, nats.ErrPermissionViolation) || strings.Contains(strings.ToLower(err.Error()), "permissions violation")) {
		return
	}
	d.mu.Lock()
	d.err = err
	d.mu.Unlock()
	d.once.Do(func() { close(d.ch) })
}

// Denied returns the last permission violation the server reported on the
// connection, nil if none: a request the server refused for lack of
// permission gets no answer and fails with a timeout.
func (c *Conn) Denied() error {
	if c == nil || c.denied == nil {
		return nil
	}
	c.denied.mu.Lock()
	defer c.denied.mu.Unlock()
	return c.denied.err
}

// DeniedC is closed when the server reports the connection's first
// permission violation: a one-shot command can stop waiting for the
// answer that will not come.
func (c *Conn) DeniedC() <-chan struct{} {
	if c == nil || c.denied == nil {
		return nil
	}
	return c.denied.ch
}
