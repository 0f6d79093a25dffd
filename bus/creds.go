package bus

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/internal/atomicfile"
)

// AuthBucket is the KV bucket of member credentials: one key per member,
// <team>.<member>, holding the SHA-256 of its password. Only the operator
// (the token) can read or write it.
const AuthBucket = "TB_AUTH"

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
		return teambus.Invalidf("member credential of %s in team %s is damaged: issue a new one with `teambus team creds %s --member %s`", c.Member, c.Team, c.Team, c.Member)
	}
	return nil
}

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

// credRecord is what AuthBucket keeps of a credential: never the password.
type credRecord struct {
	Team     string    `json:"team"`
	Member   string    `json:"member"`
	SHA256   string    `json:"sha256"`
	IssuedAt time.Time `json:"issued_at"`
}

// AuthKey is the key of member's credential record in AuthBucket.
func AuthKey(team, member string) string { return team + "." + member }

// PasswordMatches reports whether record, a credential record of
// AuthBucket, is team's member's and holds the hash of password. The hashes
// are compared in constant time.
func PasswordMatches(record []byte, team, member, password string) bool {
	var rec credRecord
	if json.Unmarshal(record, &rec) != nil || rec.Team != team || rec.Member != member {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(rec.SHA256), []byte(hashPassword(password))) == 1
}

// OpenAuthBucket opens AuthBucket: jetstream.ErrBucketNotFound while no
// credential was ever issued.
func OpenAuthBucket(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	return authBucket(ctx, js, 0, false)
}

func hashPassword(p string) string {
	sum := sha256.Sum256([]byte(p))
	return hex.EncodeToString(sum[:])
}

// authBucket opens AuthBucket, creating it with replicas when create is
// set.
func authBucket(ctx context.Context, js jetstream.JetStream, replicas int, create bool) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, AuthBucket)
	if err == nil || !create || !errors.Is(err, jetstream.ErrBucketNotFound) {
		return kv, err
	}
	kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      AuthBucket,
		Description: "teambus member credentials (password hashes)",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
		MaxBytes:    16 << 20,
	})
	if errors.Is(err, jetstream.ErrBucketExists) {
		return js.KeyValue(ctx, AuthBucket)
	}
	return kv, err
}

// IssueCreds creates a new credential for member of team (the lead is
// member teambus.Lead) and returns it with servers as its bus URLs. A
// member has one credential: issuing again replaces the password, and new
// connections with the old one are refused. The caller checks that the
// member exists. It needs the operator's connection.
func IssueCreds(ctx context.Context, c *Conn, team, member string, servers []string) (*Creds, error) {
	if err := ValidateCredsIDs(team, member); err != nil {
		return nil, err
	}
	kv, err := authBucket(ctx, c.JS, c.Replicas(), true)
	if err != nil {
		return nil, teambus.Unavailablef("open credentials bucket %s: %w", AuthBucket, err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("generate password: %w", err)
	}
	cr := &Creds{
		Kind:        CredsKind,
		Team:        team,
		Member:      member,
		User:        MemberUser(team, member),
		Password:    hex.EncodeToString(raw),
		InboxPrefix: MemberInboxPrefix(team, member),
		Servers:     servers,
		IssuedAt:    time.Now().UTC().Truncate(time.Second),
	}
	rec, _ := json.Marshal(credRecord{Team: team, Member: member, SHA256: hashPassword(cr.Password), IssuedAt: cr.IssuedAt})
	if _, err := kv.Put(ctx, AuthKey(team, member), rec); err != nil {
		return nil, teambus.Unavailablef("store credential of %s in team %s: %w", member, team, err)
	}
	return cr, nil
}

// RevokeCreds removes member's credential: new connections are refused and
// the nodes close the open ones. Revoking a member without one is not an
// error.
func RevokeCreds(ctx context.Context, c *Conn, team, member string) error {
	if err := ValidateCredsIDs(team, member); err != nil {
		return err
	}
	kv, err := authBucket(ctx, c.JS, 0, false)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		return teambus.Unavailablef("open credentials bucket %s: %w", AuthBucket, err)
	}
	if err := kv.Purge(ctx, AuthKey(team, member)); err != nil {
		return teambus.Unavailablef("revoke credential of %s in team %s: %w", member, team, err)
	}
	return nil
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
