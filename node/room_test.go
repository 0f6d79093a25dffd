package node_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/node/credstore"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// memberClient issues a credential of team/member on n and returns its
// client of the team service, over TCP.
func memberClient(t *testing.T, n *node.Node, admin *bus.Conn, teamID, member string) *teamapi.Client {
	t.Helper()
	ctx := testCtx(t)
	cr, err := credstore.IssueCreds(ctx, admin, teamID, member, []string{n.URL()})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), teamID+"-"+member+".creds")
	if err := bus.WriteCreds(file, cr); err != nil {
		t.Fatal(err)
	}
	c, err := bus.Connect(ctx, bus.ConnectConfig{Creds: file})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := teamapi.ForConn(c, teamID, member, "s-"+member)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// TestRoom_FullMailboxThenTeamSet: a member flooding its team's mailbox
// through the team service stops at its send quota (exit 1); once the
// mailbox is full, every send and a new join fail
// permanently (exit 2) with a message that names `teambus team set`. A
// raise past the node's store limit is refused as the operator's
// problem and changes nothing; a smaller limit is refused; a raise within
// the store makes sends and joins work again, on the live team.
func TestRoom_FullMailboxThenTeamSet(t *testing.T) {
	n := nodetest.NewServerConfig(t, node.NodeConfig{MaxStore: 256 << 20})
	ctx := testCtx(t)
	admin := nodetest.Connect(t, n)
	svc := team.New(admin.JS, team.Config{Mailbox: mailbox.MailboxConfig{MaxBytes: 1 << 20}})
	if _, err := svc.CreateTeam(ctx, "alpha", "", []team.MemberSpec{{ID: "tm1"}, {ID: "tm2"}}, teambus.DefaultPolicy()); err != nil {
		t.Fatal(err)
	}
	tm1 := memberClient(t, n, admin, "alpha", "tm1")
	tm2 := memberClient(t, n, admin, "alpha", "tm2")
	// tm1 floods: it stops at its send quota, a quarter of the mailbox,
	// with a transient error; the others go on filling the mailbox to the
	// last byte (the lead, big bodies then small ones).
	var err error
	sent := 0
	for ; sent < 40; sent++ {
		if _, err = tm1.Send(ctx, teamapi.SendRequest{To: teambus.Lead, ID: fmt.Sprint("flood-", sent), Body: strings.Repeat("x", 60<<10)}); err != nil {
			break
		}
	}
	if !errors.Is(err, teamapi.ErrQuota) || teambus.ExitCode(err) != teambus.ExitTransient || sent < 3 || sent > 5 {
		t.Fatalf("tm1's flood of 60 KiB sends into 1 MiB: %v after %d sends; want its quota (a quarter) after 4, exit 1", err, sent)
	}
	lead := team.Actor{Team: "alpha", Member: teambus.Lead}
	for _, size := range []int{60 << 10, 1 << 10, 1} {
		for i := 0; i < 2000; i++ {
			if _, err = svc.Send(ctx, teamapi.SendRequest{Actor: lead, To: "tm1", ID: fmt.Sprint("fill-", sent), Body: strings.Repeat("x", size)}); err != nil {
				break
			}
			sent++
		}
	}
	if err == nil || sent < 5 {
		t.Fatalf("after %d sends into 1 MiB: %v; want some stored, then a full mailbox", sent, err)
	}
	// tm2, far from its quota, meets the full mailbox.
	_, err = tm2.Send(ctx, teamapi.SendRequest{To: teambus.Lead, Body: "x"})
	full := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, teambus.ErrFull) || teambus.ExitCode(err) != teambus.ExitPermanent ||
			!strings.Contains(err.Error(), "team alpha's mailbox is full (1MiB)") ||
			!strings.Contains(err.Error(), "`teambus team set alpha --mailbox-max-bytes 2MiB`") {
			t.Fatalf("%s on a full mailbox: %v (exit %d); want ErrFull, exit 2, naming `teambus team set`", what, err, teambus.ExitCode(err))
		}
	}
	full("send", err)
	// The operator's own send, and a new join of another member.
	_, err = svc.Send(ctx, teamapi.SendRequest{Actor: team.Actor{Team: "alpha", Member: teambus.Lead}, To: "tm2", Body: "from the operator"})
	full("operator send", err)
	// A join stores a small marker, which may still fit; if not, it is
	// the same permanent error.
	if _, err = tm2.JoinSession(ctx); err != nil {
		full("join", err)
	}

	// Past the node's store limit: refused, the operator's to fix.
	_, err = svc.SetLimits(ctx, "alpha", team.Limits{Mailbox: 1 << 30})
	var room *team.LimitRoomError
	if !errors.As(err, &room) || !errors.Is(err, teambus.ErrNoSpace) || teambus.ExitCode(err) != teambus.ExitPermanent || !strings.Contains(err.Error(), "--max-store") {
		t.Fatalf("raise to 1GiB on a 256MiB store: %v (exit %d); want a LimitRoomError, ErrNoSpace, exit 2, naming --max-store", err, teambus.ExitCode(err))
	}
	_, err = tm2.Send(ctx, teamapi.SendRequest{To: teambus.Lead, Body: "still full"})
	full("send after a refused raise", err)
	// A limit only grows.
	if _, err = svc.SetLimits(ctx, "alpha", team.Limits{Events: 8 << 20}); !errors.Is(err, teambus.ErrInvalid) {
		t.Fatalf("lower the event log to 8MiB: %v; want ErrInvalid", err)
	}
	if _, err = svc.SetLimits(ctx, "nosuch", team.Limits{Mailbox: 2 << 20}); !errors.Is(err, teambus.ErrNotFound) {
		t.Fatalf("set limits of a team that does not exist: %v; want ErrNotFound", err)
	}

	res, err := svc.SetLimits(ctx, "alpha", team.Limits{Mailbox: 2 << 20, Events: 32 << 20})
	if err != nil {
		t.Fatalf("raise within the store: %v", err)
	}
	if res.Mailbox == nil || res.Mailbox.Was != 1<<20 || res.Mailbox.Now != 2<<20 || res.Events == nil || res.Events.Now != 32<<20 {
		t.Fatalf("set limits = %+v %+v", res.Mailbox, res.Events)
	}
	if _, err := tm2.Send(ctx, teamapi.SendRequest{To: teambus.Lead, Body: "room again"}); err != nil {
		t.Fatalf("send after the raise: %v", err)
	}
	if _, err := tm2.JoinSession(ctx); err != nil {
		t.Fatalf("join after the raise: %v", err)
	}
	// Idempotent: the same raise again changes nothing.
	if res, err := svc.SetLimits(ctx, "alpha", team.Limits{Mailbox: 2 << 20}); err != nil || res.Mailbox.Was != res.Mailbox.Now {
		t.Fatalf("the same raise again: %+v, %v", res, err)
	}
}
