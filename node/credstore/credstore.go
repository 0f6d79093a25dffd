package credstore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
)

// AuthBucket is the KV bucket of member credentials: one key per member,
// <team>.<member>, holding the SHA-256 of its password. Only the operator
// (the token) can read or write it.
const AuthBucket = "TB_AUTH"

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
func IssueCreds(ctx context.Context, c *bus.Conn, team, member string, servers []string) (*bus.Creds, error) {
	if err := bus.ValidateCredsIDs(team, member); err != nil {
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
	cr := &bus.Creds{
		Kind:        bus.CredsKind,
		Team:        team,
		Member:      member,
		User:        bus.MemberUser(team, member),
		Password:    hex.EncodeToString(raw),
		InboxPrefix: bus.MemberInboxPrefix(team, member),
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
func RevokeCreds(ctx context.Context, c *bus.Conn, team, member string) error {
	if err := bus.ValidateCredsIDs(team, member); err != nil {
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

// Accepts reports whether the node accepts cr: AuthBucket holds a record
// for cr's team and member with the hash of cr's password, which is what
// the node checks at every connect. It reads the record without connecting
// as the member (a member's connection coming and going is a liveness
// signal of its own). It needs the operator's connection; an error is no
// answer (transient).
func Accepts(ctx context.Context, c *bus.Conn, cr *bus.Creds) (bool, error) {
	if err := cr.Validate(); err != nil {
		return false, nil
	}
	kv, err := authBucket(ctx, c.JS, 0, false)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return false, nil
	}
	if err != nil {
		return false, teambus.Unavailablef("open credentials bucket %s: %w", AuthBucket, err)
	}
	e, err := kv.Get(ctx, AuthKey(cr.Team, cr.Member))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return false, nil
	}
	if err != nil {
		return false, teambus.Unavailablef("read the credential record of %s in team %s: %w", cr.Member, cr.Team, err)
	}
	return PasswordMatches(e.Value(), cr.Team, cr.Member, cr.Password), nil
}
