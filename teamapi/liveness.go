//go:build !teambus_agent

package teamapi

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
)

// Liveness subjects. A beat is not a verb of the table (Verbs): it is
// published without a reply, answered by nobody, and every instance of
// the team service receives it.
const (
	// VerbBeat is the last token of the beat subject: a member publishes
	// its beats to tb.beat, the operator to tbsvc.<team>.beat.
	VerbBeat = "beat"
	// ControlPrefix starts the control subjects in the data account:
	// tbctl.<team>.<member>. The member account of the team receives
	// them below each member's own inbox prefix (ControlInbox).
	ControlPrefix = "tbctl"
	// controlToken ends a member's control inbox.
	controlToken = "ctl"
)

// ControlSubject is where the service tells member of team about its own
// incarnation (ControlFenced), in the data account.
func ControlSubject(team, member string) string {
	return ControlPrefix + "." + team + "." + member
}

// ControlInbox is where a member's connection (a member credential)
// receives its ControlSubject: below its own inbox prefix, which it alone
// may subscribe to.
func ControlInbox(team, member string) string {
	return bus.MemberInboxPrefix(team, member) + "." + controlToken
}

// ControlInboxPattern is the member account's side of the control import
// of team: the member token is the import's first wildcard.
func ControlInboxPattern(team string) string {
	return bus.MemberInboxPrefix(team, "{{wildcard(1)}}") + "." + controlToken
}

// Beat is one heartbeat of a member's incarnation, as its sidecar
// publishes it. Member and Session name the incarnation (the member and
// its session are the credential's own with a member credential: the
// service ignores Member there and takes the credential's); Epoch is the
// incarnation's epoch (the team's lead epoch for the lead). Stop asks the
// service to remove the heartbeat key, as a clean shutdown does. Server
// and Conn name the connection that beats (the operator's sidecars set
// them; with a member credential the server tells the service itself): the
// service suspects the member at once when that connection closes.
type Beat struct {
	Member     string               `json:"member"`
	Session    string               `json:"session"`
	Epoch      int64                `json:"epoch"`
	Status     teambus.MemberStatus `json:"status,omitempty"`
	Task       string               `json:"task,omitempty"`
	ContextPct int                  `json:"context_pct,omitempty"`
	PID        int                  `json:"pid,omitempty"`
	Stop       bool                 `json:"stop,omitempty"`
	Server     string               `json:"server,omitempty"`
	Conn       uint64               `json:"conn,omitempty"`
}

// BeatOf is the beat of heartbeat hb.
func BeatOf(hb *teambus.Heartbeat) Beat {
	return Beat{Member: hb.Member, Session: hb.Session, Epoch: hb.Epoch, Status: hb.Status, Task: hb.Task, ContextPct: hb.ContextPct, PID: hb.PID}
}

// Control types: the "type" of a Control message.
const (
	// ControlFenced: a beat of this incarnation was dropped because a
	// newer incarnation registered, or the incarnation was declared
	// crashed, paused or shut down. The incarnation must stop.
	ControlFenced = "fenced"
)

// Control is a message on a member's control subject.
type Control struct {
	Type    string    `json:"type"`
	Team    string    `json:"team"`
	Member  string    `json:"member"`
	Session string    `json:"session,omitempty"`
	Epoch   int64     `json:"epoch,omitempty"`
	Current int64     `json:"current_epoch,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	At      time.Time `json:"at"`
}

// PublishBeat publishes b on nc to the team service: to tb.beat with a
// member credential (member set: the connection's own), to
// tbsvc.<team>.beat with the operator's token. The connection's identity
// is added for the operator (the server adds it for a member credential).
// It does not wait for the service: a beat is answered by nobody.
func PublishBeat(nc *nats.Conn, team string, member bool, b Beat) error {
	subject := ServiceSubject(team, VerbBeat)
	if member {
		subject = MemberServiceSubject(VerbBeat)
	} else if id, err := nc.GetClientID(); err == nil {
		b.Server, b.Conn = nc.ConnectedServerName(), id
	}
	data, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("encode beat: %w", err)
	}
	if err := nc.Publish(subject, data); err != nil {
		return teambus.Unavailablef("beat of %s in team %s: %w", b.Member, team, err)
	}
	return nil
}

// SubscribeControl delivers the control messages of member on nc until
// ctx ends: on ControlInbox with a member credential, on ControlSubject
// with the operator's token.
func SubscribeControl(ctx context.Context, nc *nats.Conn, team, member string, memberCreds bool) (<-chan Control, error) {
	subject := ControlSubject(team, member)
	if memberCreds {
		subject = ControlInbox(team, member)
	}
	ch := make(chan Control, 8)
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		var c Control
		if json.Unmarshal(m.Data, &c) != nil || c.Type == "" {
			return
		}
		select {
		case ch <- c:
		default: // a full channel: the sidecar is told again by the next dropped beat
		}
	})
	if err != nil {
		return nil, teambus.Unavailablef("control subject of %s: %w", member, err)
	}
	context.AfterFunc(ctx, func() { _ = sub.Unsubscribe() })
	return ch, nil
}

// Pulse publishes the caller's beat (fire and forget): Member and Session
// are the client's.
func (c *Client) Pulse(b Beat) error {
	nt, ok := c.tr.(natsTransport)
	if !ok {
		return teambus.Invalidf("beats need a NATS connection")
	}
	b.Member, b.Session = c.who.Member, c.who.Session
	return PublishBeat(nt.nc, c.team, !c.operator, b)
}
