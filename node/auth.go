package node

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/teambus/teambus/node/credstore"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/teamapi"
)

// AdminUser is the user name the holder of the node token is registered
// under (what monitoring shows).
const AdminUser = "teambus-admin"

// authLookupTimeout bounds the credential lookup of one connection.
const authLookupTimeout = 3 * time.Second

// exportService exports the team service subjects from the data account,
// before any member account imports them.
func exportService(s *server.Server) error {
	g := s.GlobalAccount()
	if err := g.AddServiceExportWithResponse(teamapi.ServicePrefix+".>", server.Singleton, nil); err != nil {
		return err
	}
	// The control subjects, which each member account imports for its own
	// team only (memberAccount).
	return g.AddStreamExport(teamapi.ControlPrefix+".>", nil)
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
			Allow: []string{teamapi.MemberServicePrefix + ".>"},
			Deny:  []string{"$SYS.>", "$JS.>", "$KV.>", "$SRV.>", "_INBOX.>", "_R_.>"},
		},
		Subscribe: &server.SubjectPermission{
			Allow: []string{bus.MemberInboxPrefix(team, member) + ".>"},
			Deny:  []string{"$SYS.>", "_INBOX.>"},
		},
	}
}

// authenticator decides who may connect to a node: the holder of the node
// token as the operator with every permission, and a member with the
// password of its credential, looked up in AuthBucket at every connect,
// with MemberPermissions. It watches AuthBucket to close the connections
// of revoked members.
type authenticator struct {
	token string
	log   *slog.Logger
	conns connLimit // live connections per member credential

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
		if !ok || bus.ValidateCredsIDs(team, member) != nil {
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
		release, ok := a.admitMember(acc, o.Username)
		if !ok {
			return false
		}
		defer release()
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
// service learns the calling account and user from the server; and the
// control subjects of the team's members (tbctl.<team>.<member>) map to
// each member's control inbox (teamapi.ControlInbox).
func (a *authenticator) memberAccount(team string) (*server.Account, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.s == nil {
		return nil, errors.New("node not started")
	}
	acc, _ := a.s.LookupOrRegisterAccount(teamapi.MemberAccount(team))
	if a.imported[team] {
		return acc, nil
	}
	if acc.JetStreamEnabled() {
		if err := acc.DisableJetStream(); err != nil {
			return nil, fmt.Errorf("disable jetstream in %s: %w", acc.Name, err)
		}
	}
	g := a.s.GlobalAccount()
	to := teamapi.ServiceSubject(team, ">")
	if err := acc.AddServiceImport(g, teamapi.MemberServicePrefix+".>", to); err != nil {
		return nil, fmt.Errorf("import team service into %s: %w", acc.Name, err)
	}
	if err := acc.SetServiceImportSharing(g, to, true); err != nil {
		return nil, fmt.Errorf("share request info with the team service of %s: %w", team, err)
	}
	// The control subject of each member of the team lands below that
	// member's own inbox prefix, which only its credential may subscribe to.
	if err := acc.AddMappedStreamImport(g, teamapi.ControlSubject(team, "*"), teamapi.ControlInboxPattern(team)); err != nil {
		return nil, fmt.Errorf("import the control subjects of %s: %w", team, err)
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
	e, err := kv.Get(ctx, credstore.AuthKey(team, member))
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			a.log.Warn("credential lookup failed", "user", bus.MemberUser(team, member), "err", err)
		}
		if errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
			a.forget(kv)
		}
		return false
	}
	return credstore.PasswordMatches(e.Value(), team, member, password)
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
	kv, err := credstore.OpenAuthBucket(ctx, js)
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
	sub, err := nc.Subscribe("$JS.EVENT.ADVISORY.STREAM.CREATED.KV_"+credstore.AuthBucket, func(*nats.Msg) {
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
	bus.EachUpdate(ctx, w, func(e jetstream.KeyValueEntry) {
		if e.Operation() == jetstream.KeyValuePut {
			return
		}
		team, member, ok := strings.Cut(e.Key(), ".")
		if !ok {
			return
		}
		if n := disconnectUser(s, bus.MemberUser(team, member)); n > 0 {
			a.log.Info("revoked credential: connections closed", "user", bus.MemberUser(team, member), "closed", n)
		}
	})
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
