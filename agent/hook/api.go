package hook

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// apiOf is the member API a hook acts through on conn: with a member's
// (or the lead's) credential the team service, as that member (the
// credential must be the bound identity's); with the node token the team
// state itself, with no service hop.
func apiOf(conn *bus.Conn, teamID, member string) (teamapi.API, error) {
	if _, _, ok := conn.MemberOf(); ok {
		return teamapi.ForConn(conn, teamID, member, "")
	}
	return team.New(conn.JS, team.Config{}).API(), nil
}

// lease is mail leased from the member's inbox: each message is acked or
// released by the token the lease gave for it.
type lease struct {
	api      teamapi.API
	actor    teamapi.Actor
	Messages []teambus.Message
	tokens   map[uint64]teamapi.Token
}

// leaseInbox leases up to max messages of the member's inbox, waiting up
// to wait for one when there is none.
func leaseInbox(ctx context.Context, api teamapi.API, a teamapi.Actor, max int, wait time.Duration) (*lease, error) {
	rep, err := api.Inbox(ctx, teamapi.InboxRequest{Actor: a, Mode: teamapi.InboxLease, Max: max, WaitMS: wait.Milliseconds()})
	if err != nil {
		return nil, err
	}
	l := &lease{api: api, actor: a, tokens: make(map[uint64]teamapi.Token, len(rep.Messages))}
	for _, m := range rep.Messages {
		l.Messages = append(l.Messages, m.Message)
		l.tokens[m.Seq] = teamapi.Token{Seq: m.Seq, Token: m.Token}
	}
	return l, nil
}

// Ack acknowledges the leased message seq, confirmed by the server, and
// returns it (none when the lease does not hold it). Acking twice is
// harmless.
func (l *lease) Ack(ctx context.Context, seq uint64) ([]uint64, error) {
	tok, ok := l.tokens[seq]
	if !ok {
		return nil, nil
	}
	rep, err := l.api.Ack(ctx, teamapi.AckRequest{Actor: l.actor, Tokens: []teamapi.Token{tok}})
	if err != nil {
		return nil, err
	}
	delete(l.tokens, seq)
	return append(rep.Acked, rep.Already...), nil
}

// Release returns every message still held for redelivery now. It is
// idempotent.
func (l *lease) Release(ctx context.Context) error {
	if len(l.tokens) == 0 {
		return nil
	}
	toks := make([]teamapi.Token, 0, len(l.tokens))
	for _, t := range l.tokens {
		toks = append(toks, t)
	}
	l.tokens = nil
	_, err := l.api.Release(ctx, teamapi.ReleaseRequest{Actor: l.actor, Tokens: toks})
	return err
}

// decoded is a reply of the member API that is a value of package team
// locally and its JSON over the wire (a brief, a team view).
func decoded[T any](v any, err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case *T:
		return x, nil
	case json.RawMessage:
		var out T
		if err := json.Unmarshal(x, &out); err != nil {
			return nil, teambus.Unavailablef("decode the team service's answer: %w", err)
		}
		return &out, nil
	}
	return nil, fmt.Errorf("unexpected answer %T", v)
}
