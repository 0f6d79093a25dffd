package node

import (
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// MemberMaxConns is how many connections one member credential may hold
// at once on a node by default (NodeConfig.MemberMaxConns, `teambus bus
// start --member-max-connections`). A sidecar, an MCP server, hooks and commands of one
// session use a few; the limit stops one credential from holding the
// node's connections. Past it a connect is refused (authorization
// violation) and logged.
const MemberMaxConns = 32

// connLimit counts the live connections of each member credential when
// one more connects. The connects of one user are admitted one at a time,
// so that each counts the ones admitted before it.
type connLimit struct {
	mu     sync.Mutex
	users  map[string]*userSlot
	max    int // 0: MemberMaxConns
	logged map[string]time.Time
}

type userSlot struct{ mu sync.Mutex }

// admit reports whether user (of account acc) may open one more
// connection on s. On true the caller registers the user and then calls
// release; on false it refuses the connection.
func (l *connLimit) admit(s *server.Server, acc, user string) (release func(), ok bool, live, max int) {
	l.mu.Lock()
	if l.users == nil {
		l.users = map[string]*userSlot{}
	}
	slot := l.users[user]
	if slot == nil {
		slot = &userSlot{}
		l.users[user] = slot
	}
	l.mu.Unlock()
	slot.mu.Lock()
	max = l.max
	if max <= 0 {
		max = MemberMaxConns
	}
	// Only connections already registered in the member account count:
	// a connect that claims the user name but has not (or never will)
	// pass the password check is in no account yet.
	cz, err := s.Connz(&server.ConnzOptions{Account: acc, User: user, Limit: max + 1})
	if err == nil && len(cz.Conns) >= max {
		slot.mu.Unlock()
		return nil, false, len(cz.Conns), max
	}
	return slot.mu.Unlock, true, 0, max
}

// shouldLog reports whether a refusal of user is to be logged: at most
// once a minute per user.
func (l *connLimit) shouldLog(user string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.logged == nil {
		l.logged = map[string]time.Time{}
	}
	if now.Sub(l.logged[user]) < time.Minute {
		return false
	}
	l.logged[user] = now
	return true
}

// admitMember applies the connection limit to a member connecting to
// acc; the caller registers the user before it calls release.
func (a *authenticator) admitMember(acc *server.Account, user string) (release func(), ok bool) {
	a.mu.Lock()
	s := a.s
	a.mu.Unlock()
	if s == nil {
		return func() {}, true
	}
	release, ok, live, max := a.conns.admit(s, acc.Name, user)
	if !ok && a.conns.shouldLog(user, time.Now()) {
		a.log.Warn("member connection refused: the credential holds as many connections as allowed", "user", user, "live", live, "max", max)
	}
	return release, ok
}
