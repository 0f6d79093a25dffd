package bus

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ClusterReplicas is the replica count of team streams and buckets on a
// cluster of at least that many nodes.
const ClusterReplicas = 3

// Replicas is how many copies of a team's streams and buckets to keep:
// ConnectConfig.Replicas when set, else AutoReplicas of the connection.
func (c *Conn) Replicas() int {
	if c.replicas <= 0 {
		return 1
	}
	return c.replicas
}

// Creds is the member credential the connection authenticated with, nil
// for the operator (the node token) or a NATS credential.
func (c *Conn) Creds() *Creds { return c.creds }

// AutoReplicas derives the replica count from the server nc is connected
// to: ClusterReplicas when it belongs to a cluster of at least that many
// nodes, else 1. The nodes are counted from the client URLs the cluster
// advertises (and the URLs given): a cluster that does not advertise them
// (no_advertise) needs all its URLs, or an explicit replica count.
func AutoReplicas(nc *nats.Conn) int {
	if nc == nil || nc.ConnectedClusterName() == "" {
		return 1
	}
	if clusterSize(nc.Servers()) >= ClusterReplicas {
		return ClusterReplicas
	}
	return 1
}

// clusterSize counts distinct host:port among urls.
func clusterSize(urls []string) int {
	seen := map[string]bool{}
	for _, s := range urls {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			continue
		}
		seen[strings.ToLower(u.Host)] = true
	}
	return len(seen)
}

// waitJetStream asks for the account's JetStream info until it answers,
// up to timeout. A cluster answers only once it has elected a meta leader,
// so attempts are short and repeated; a server without JetStream is an
// answer.
func waitJetStream(ctx context.Context, js jetstream.JetStream, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		actx, acancel := context.WithTimeout(ctx, min(timeout, time.Second))
		_, err := js.AccountInfo(actx)
		acancel()
		if err == nil || errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// MemberOf reports the team and member of a connection made with a member
// credential (a credentials file, or a member's user name and password);
// ok is false for the operator's.
func (c *Conn) MemberOf() (team, member string, ok bool) {
	if c.creds != nil {
		return c.creds.Team, c.creds.Member, true
	}
	if c.NC == nil || !MemberConn(c.NC) {
		return "", "", false
	}
	return strings.Cut(c.NC.Opts.User, ".")
}

// MemberConn reports whether nc uses a member credential's inbox prefix:
// it may read only its own consumers.
func MemberConn(nc *nats.Conn) bool {
	return nc != nil && strings.HasPrefix(nc.Opts.InboxPrefix, inboxRoot+".")
}
