//go:build !teambus_agent

package teamapi

import (
	"context"

	"github.com/nats-io/nats.go"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
)

// The NATS face of the client: a Transport over a NATS connection. The
// lean agent build (-tags teambus_agent) leaves it out and links no NATS
// client: its requests go through a sidecar's relay (agent.go).

// ErrNoResponders is what a Transport reports when no team service
// answers: the NATS client's own error.
var ErrNoResponders = nats.ErrNoResponders

var (
	errMaxPayload = nats.ErrMaxPayload
	errTimeout    = nats.ErrTimeout
)

// natsTransport is the member API over a NATS connection.
type natsTransport struct{ nc *nats.Conn }

func (t natsTransport) Request(ctx context.Context, subject, _ string, data []byte) (string, []byte, error) {
	msg, err := t.nc.RequestWithContext(ctx, subject, data)
	if err != nil {
		return "", nil, err
	}
	return msg.Header.Get(ErrorCodeHeader), msg.Data, nil
}

func (t natsTransport) MaxPayload() int64 { return t.nc.MaxPayload() }

// New returns a client on nc. It does no I/O.
func New(nc *nats.Conn, cfg Config) (*Client, error) {
	return NewWith(natsTransport{nc}, cfg)
}

// ForConn returns the client of the member on c: a member credential's
// connection calls as the credential's member (which must be member), any
// other as the operator on the member's behalf.
func ForConn(c *bus.Conn, team, member, session string) (*Client, error) {
	if ct, cm, ok := c.MemberOf(); ok {
		if ct != team || cm != member {
			return nil, teambus.Invalidf("the credential is of %s in team %s, not of %s in team %s", cm, ct, member, team)
		}
		return New(c.NC, Config{Team: team, Member: member, Session: session})
	}
	return New(c.NC, Config{Team: team, Member: member, Session: session, Operator: true})
}
