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
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
)

// AuthBucket is the KV bucket of member credentials: one key per member,
// <team>.<member>, holding the SHA-256 of its password. Only the operator
// (the token) can read or write it.
const AuthBucket = "TB_AUTH"

// CredsKind marks a teambus member credentials file, as opposed to a NATS
// .creds file (a JWT and an nkey seed).
const CredsKind = "teambus-member-credentials"

// AdminUser is the user name the holder of the node token is registered
// under (what monitoring shows).
const AdminUser = "teambus-admin"

// inboxRoot starts every member's inbox prefix. It is not _INBOX: members
// never see replies sent to the default inboxes.
const inboxRoot = "_TB_INBOX"

// authLookupTimeout bounds the credential lookup of one connection.
const authLookupTimeout = 3 * time.Second

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

// Accounts and subjects of the team service.
const (
	// MemberAccountPrefix starts the name of a team's member account,
	// TBM_<team>: the account its members' credentials land in. It holds
	// no JetStream, only the import of the team service.
	MemberAccountPrefix = "TBM_"
	// MemberServicePrefix is what a member publishes its requests to, in
	// its member account: tb.<verb>.
	MemberServicePrefix = "tb"
	// ServicePrefix is the subject space of the team service in the data
	// account: tbsvc.<team>.<verb>. The data account exports it; a member
	// account imports the subjects of its own team only.
	ServicePrefix = "tbsvc"
)

// MemberAccount is the member account of team.
func MemberAccount(team string) string { return MemberAccountPrefix + team }

// ServiceSubject is the subject of a verb of team's service in the data
// account; verb may be ">" or "*".
func ServiceSubject(team, verb string) string { return ServicePrefix + "." + team + "." + verb }

// MemberServiceSubject is the subject a member requests verb on.
func MemberServiceSubject(verb string) string { return MemberServicePrefix + "." + verb }

// exportService exports the team service subjects from the data account,
// before any member account imports them.
func exportService(s *server.Server) error {
	return s.GlobalAccount().AddServiceExportWithResponse(ServicePrefix+".>", server.Singleton, nil)
}

// validateCredsIDs checks the ids of a credential: a team id, and a member
// id (or the lead).
func validateCredsIDs(team, member string) error {
	if err := teambus.ValidateID("team", team); err != nil {
		return err
	}
	if member == teambus.Lead {
		return nil
	}
	return teambus.ValidateMemberID(member)
}

// MemberPermissions are what a member's credential may do, and nothing
// else: publish requests to the team service (tb.<verb> in its team's
// member account, which the account imports as the service subjects of its
// team only) and receive the replies on its own inbox prefix. The member
// account has no JetStream and no other responder: everything a member
// does goes through the service, which decides from the server-set
// request info who is asking. team and member must be valid ids: a
// wildcard in either would widen the subscribe rule.
func MemberPermissions(team, member string) *server.Permissions {
	return &server.Permissions{
		Publish: &server.SubjectPermission{
			Allow: []string{MemberServicePrefix + ".>"},
			Deny:  []string{"$SYS.>", "$JS.>", "$KV.>", "$SRV.>", "_INBOX.>", "_R_.>"},
		},
		Subscribe: &server.SubjectPermission{
			Allow: []string{MemberInboxPrefix(team, member) + ".>"},
			Deny:  []string{"$SYS.>", "_INBOX.>"},
		},
	}
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
	if err := validateCredsIDs(c.Team, c.Member); err != nil {
		return err
	}
	if c.User != MemberUser(c.Team, c.Member) || c.Password == "" || c.InboxPrefix != MemberInboxPrefix(c.Team, c.Member) {
		return teambus.Invalidf("member credential of %s in team %s is damaged: issue a new one with `teambus team creds %s --member %s`", c.Member, c.Team, c.Team, c.Member)
	}
	return nil
}

// WriteCreds writes c to path, mode 0600, replacing what was there.
func WriteCreds(path string, c *Creds) error {
	if err := writeFileAtomic(path, c); err != nil {
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

func authKey(team, member string) string { return team + "." + member }

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
	if err := validateCredsIDs(team, member); err != nil {
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
	if _, err := kv.Put(ctx, authKey(team, member), rec); err != nil {
		return nil, teambus.Unavailablef("store credential of %s in team %s: %w", member, team, err)
	}
	return cr, nil
}

// RevokeCreds removes member's credential: new connections are refused and
// the nodes close the open ones. Revoking a member without one is not an
// error.
func RevokeCreds(ctx context.Context, c *Conn, team, member string) error {
	if err := validateCredsIDs(team, member); err != nil {
		return err
	}
	kv, err := authBucket(ctx, c.JS, 0, false)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		return teambus.Unavailablef("open credentials bucket %s: %w", AuthBucket, err)
	}
	if err := kv.Purge(ctx, authKey(team, member)); err != nil {
		return teambus.Unavailablef("revoke credential of %s in team %s: %w", member, team, err)
	}
	return nil
}

// authenticator decides who may connect to a node: the holder of the node
// token as the operator with every permission, and a member with the
// password of its credential, looked up in AuthBucket at every connect,
// with MemberPermissions. It watches AuthBucket to close the connections
// of revoked members.
type authenticator struct {
	token string
	log   *slog.Logger

	mu       sync.Mutex
	s        *server.Server      // set once the server is built
	imported map[string]bool     // teams whose member account imports the service
	js       jetstream.JetStream // the node's own connection; nil until attached
	kv       jetstream.KeyValue  // AuthBucket, once it exists
}

// Check implements server.Authentication. The token holder lands in the
// data account ($G, with the team streams); a member lands in its team's
// member account (no JetStream, the team service imported). A CONNECT
// that carries an nkey, a JWT or a token besides a member's password is
// refused: the server would show the nkey to the service as the user (a
// member could pose as a teammate). No connection is accepted without an
// account.
func (a *authenticator) Check(c server.ClientAuthentication) bool {
	o := c.GetOpts()
	if o.Nkey != "" || o.JWT != "" || o.Sig != "" {
		return false
	}
	switch {
	case o.Token != "" && o.Username == "" && o.Password == "":
		if subtle.ConstantTimeCompare([]byte(o.Token), []byte(a.token)) != 1 {
			return false
		}
		g := a.dataAccount()
		if g == nil {
			return false
		}
		c.RegisterUser(&server.User{Username: AdminUser, Account: g})
		return true
	case o.Token == "" && o.Username != "" && o.Password != "":
		team, member, ok := strings.Cut(o.Username, ".")
		if !ok || validateCredsIDs(team, member) != nil {
			return false
		}
		if !a.verify(team, member, o.Password) {
			return false
		}
		acc, err := a.memberAccount(team)
		if err != nil {
			a.log.Warn("member account", "team", team, "err", err)
			return false
		}
		c.RegisterUser(&server.User{Username: o.Username, Account: acc, Permissions: MemberPermissions(team, member)})
		return true
	default:
		return false
	}
}

// dataAccount is the account of the team streams and the service: $G.
func (a *authenticator) dataAccount() *server.Account {
	a.mu.Lock()
	s := a.s
	a.mu.Unlock()
	if s == nil {
		return nil
	}
	return s.GlobalAccount()
}

// memberAccount returns the member account of team, registering it with
// its service import the first time: the member subjects tb.> map to the
// service subjects of this team only, with the request info shared so the
// service learns the calling account and user from the server.
func (a *authenticator) memberAccount(team string) (*server.Account, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.s == nil {
		return nil, errors.New("node not started")
	}
	acc, _ := a.s.LookupOrRegisterAccount(MemberAccount(team))
	if a.imported[team] {
		return acc, nil
	}
	if acc.JetStreamEnabled() {
		if err := acc.DisableJetStream(); err != nil {
			return nil, fmt.Errorf("disable jetstream in %s: %w", acc.Name, err)
		}
	}
	g := a.s.GlobalAccount()
	to := ServiceSubject(team, ">")
	if err := acc.AddServiceImport(g, MemberServicePrefix+".>", to); err != nil {
		return nil, fmt.Errorf("import team service into %s: %w", acc.Name, err)
	}
	if err := acc.SetServiceImportSharing(g, to, true); err != nil {
		return nil, fmt.Errorf("share request info with the team service of %s: %w", team, err)
	}
	if a.imported == nil {
		a.imported = map[string]bool{}
	}
	a.imported[team] = true
	return acc, nil
}

// verify looks the member's credential up and compares the password.
func (a *authenticator) verify(team, member, password string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), authLookupTimeout)
	defer cancel()
	kv, err := a.bucket(ctx)
	if err != nil {
		return false
	}
	e, err := kv.Get(ctx, authKey(team, member))
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			a.log.Warn("credential lookup failed", "user", MemberUser(team, member), "err", err)
		}
		if errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
			a.forget(kv)
		}
		return false
	}
	var rec credRecord
	if json.Unmarshal(e.Value(), &rec) != nil || rec.Team != team || rec.Member != member {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(rec.SHA256), []byte(hashPassword(password))) == 1
}

// bucket returns AuthBucket: jetstream.ErrBucketNotFound while no
// credential was ever issued, another error while the node is not
// attached or JetStream does not answer.
func (a *authenticator) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	a.mu.Lock()
	js, kv := a.js, a.kv
	a.mu.Unlock()
	if kv != nil {
		return kv, nil
	}
	if js == nil {
		return nil, errors.New("node not attached")
	}
	kv, err := authBucket(ctx, js, 0, false)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	if a.kv == nil {
		a.kv = kv
	}
	a.mu.Unlock()
	return kv, nil
}

// forget drops a bucket handle that no longer works (the bucket was
// deleted): the next lookup opens it again.
func (a *authenticator) forget(kv jetstream.KeyValue) {
	a.mu.Lock()
	if a.kv == kv {
		a.kv = nil
	}
	a.mu.Unlock()
}

// attach gives the authenticator the node's own connection and watches
// AuthBucket until ctx is done: a revoked credential closes the
// connections that use it. The bucket is created by the first IssueCreds;
// until then the watch waits for its creation advisory.
func (a *authenticator) attach(ctx context.Context, s *server.Server, nc *nats.Conn) (<-chan struct{}, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	created := make(chan struct{}, 1)
	sub, err := nc.Subscribe("$JS.EVENT.ADVISORY.STREAM.CREATED.KV_"+AuthBucket, func(*nats.Msg) {
		select {
		case created <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.js = js
	a.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { _ = sub.Unsubscribe() }()
		a.watch(ctx, s, created)
	}()
	return done, nil
}

// watch closes the connections of revoked credentials until ctx is done.
func (a *authenticator) watch(ctx context.Context, s *server.Server, created <-chan struct{}) {
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-created:
		case <-retry.C:
		}
		kv, err := a.bucket(ctx)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			// No credential issued yet: wait for the advisory, and look
			// again in a while in case it was missed. Lookups at connect
			// do not depend on this watch, only revocation does.
			retry.Reset(30 * time.Second)
			continue
		}
		if err != nil {
			// JetStream not ready yet (a cluster without a leader).
			retry.Reset(time.Second)
			continue
		}
		w, err := kv.WatchAll(ctx, jetstream.UpdatesOnly())
		if err != nil {
			retry.Reset(time.Second)
			continue
		}
		a.apply(ctx, s, w)
		_ = w.Stop() // a watcher's stop only unsubscribes
		if ctx.Err() != nil {
			return
		}
		retry.Reset(time.Second)
	}
}

// apply handles the changes of one watch until it ends.
func (a *authenticator) apply(ctx context.Context, s *server.Server, w jetstream.KeyWatcher) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil || e.Operation() == jetstream.KeyValuePut {
				continue
			}
			team, member, ok := strings.Cut(e.Key(), ".")
			if !ok {
				continue
			}
			if n := disconnectUser(s, MemberUser(team, member)); n > 0 {
				a.log.Info("revoked credential: connections closed", "user", MemberUser(team, member), "closed", n)
			}
		}
	}
}

// disconnectUser closes the client connections authenticated as user and
// returns how many it closed.
func disconnectUser(s *server.Server, user string) int {
	cz, err := s.Connz(&server.ConnzOptions{User: user, Username: true, Limit: 1 << 16})
	if err != nil {
		return 0
	}
	n := 0
	for _, ci := range cz.Conns {
		if ci.AuthorizedUser == user && s.DisconnectClientByID(ci.Cid) == nil {
			n++
		}
	}
	return n
}

// attachAuth connects the node to itself (in-process, with the token) for
// the credential lookups and starts the revocation watch; Close stops both.
func (n *Node) attachAuth(a *authenticator, token string) error {
	nc, err := nats.Connect("", nats.InProcessServer(n.s), nats.Token(token), nats.Name("teambus-node-auth"))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done, err := a.attach(ctx, n.s, nc)
	if err != nil {
		cancel()
		nc.Close()
		return err
	}
	n.authConn = nc
	n.authStop = func() {
		cancel()
		<-done
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
