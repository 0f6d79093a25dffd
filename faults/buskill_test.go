package faults

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/team"
)

// loadTeam creates a team whose members are the recipients of a workload.
func loadTeam(t testing.TB, conn *bus.Conn, id string, recipients []string, pol teambus.Policy) *team.Service {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc := team.New(conn.JS, team.Config{})
	var specs []team.MemberSpec
	for _, r := range recipients {
		specs = append(specs, team.MemberSpec{ID: r})
	}
	if _, err := svc.CreateTeam(ctx, id, "", specs, pol); err != nil {
		t.Fatalf("create team %s: %v", id, err)
	}
	openConsumers(t, svc, id, recipients)
	return svc
}

// openConsumers makes the consumers of the lead and recipients of team
// id: they are made when first read, and the workloads read them directly.
func openConsumers(t testing.TB, svc *team.Service, id string, recipients []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mb := svc.Mailbox(id)
	for _, r := range append([]string{teambus.Lead}, recipients...) {
		if _, err := mb.AgentInbox(ctx, r); err != nil {
			t.Fatalf("inbox of %s: %v", r, err)
		}
		if _, err := mb.SidecarInbox(ctx, r); err != nil {
			t.Fatalf("sidecar inbox of %s: %v", r, err)
		}
	}
}

// teamResources lists the streams and durable consumers a team must keep.
func teamResources(id string, members []string) map[string][]string {
	cons := []string{mailbox.InboxConsumer(teambus.Lead), mailbox.SidecarConsumer(teambus.Lead)}
	for _, m := range members {
		cons = append(cons, mailbox.InboxConsumer(m), mailbox.SidecarConsumer(m))
	}
	return map[string][]string{
		mailbox.MailboxPrefix + id: cons,
		"KV_TBS_" + id:             nil,
		"KV_TBH_" + id:             nil,
	}
}

// checkResources asserts that every stream and consumer exists. Errors
// other than "not found" (the node still starting, the connection still
// reconnecting) are retried; "not found" fails at once.
func checkResources(t testing.TB, js jetstream.JetStream, want map[string][]string) {
	t.Helper()
	checkFor(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		for stream, consumers := range want {
			st, err := js.Stream(ctx, stream)
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				t.Fatalf("stream %s is gone after the restart", stream)
			}
			if err != nil {
				return err
			}
			for _, c := range consumers {
				_, err := st.Consumer(ctx, c)
				if errors.Is(err, jetstream.ErrConsumerNotFound) {
					t.Fatalf("durable consumer %s of %s is gone after the restart", c, stream)
				}
				if err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// S1: kill -9 of the bus in a loop under load from several senders over
// TCP that reconnect and retry with the same id.
func TestS1_BusKill9Loop(t *testing.T) {
	t.Parallel() // no timing criterion: runs beside the other parallel scenarios
	cycles := tier(5, 25)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	node := newNodeProc(t, t.TempDir())
	node.start()
	admin := connectTCP(t, node.URL(), "admin")
	pol := teambus.DefaultPolicy()
	pol.AckWait = 2 * time.Second
	recipients := []string{"r1", "r2", "r3", "r4"}
	loadTeam(t, admin, "k9", recipients, pol)
	want := teamResources("k9", recipients)

	w := startWorkload(t, node.URL(), "k9", 4, recipients, 200)
	var downtime time.Duration
	for c := 1; c <= cycles; c++ {
		time.Sleep(500*time.Millisecond + time.Duration(rng.Int64N(int64(1500*time.Millisecond))))
		node.kill9()
		start := time.Now()
		node.start()
		downtime += time.Since(start)
		checkResources(t, admin.JS, want)
	}
	time.Sleep(500 * time.Millisecond)
	w.finishSending(60 * time.Second)
	w.drain(90 * time.Second)
	if _, err := scanMailbox(ctx, admin.JS, mailbox.MailboxPrefix+"k9", w.h); err != nil {
		t.Fatal(err)
	}
	r := w.h.Check()
	result(t, "S1", "cycles=%d restart-avg=%s send-errors=%d %s", cycles, (downtime / time.Duration(cycles)).Round(time.Millisecond), w.sendErrs.Load(), r.Summary())
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if r.Acked == 0 {
		t.Fatal("nothing was acknowledged: the workload did not run")
	}
	if r.Unknown != 0 {
		t.Errorf("%d sends still ambiguous after the drain: every send is retried until acknowledged", r.Unknown)
	}
}
