package faults

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/team"
)

// S12 (soak only): a shifting mix of faults — kill -9 of the bus, SIGSTOP
// of the bus, short SIGSTOPs of teammate sidecars — with quiet periods,
// under the mailbox workload and a running team of real sidecars. At the
// end: the history is valid (nothing lost, nothing stored twice), every
// stream and consumer survived every restart, no live member was declared
// crashed and every sidecar still runs. TEAMBUS_SOAK_MINUTES sets the
// length (default 10).
func TestS12_CombinedSoak(t *testing.T) {
	if !soak() {
		t.Skip("soak tier: set TEAMBUS_SOAK=1")
	}
	minutes, _ := strconv.Atoi(os.Getenv("TEAMBUS_SOAK_MINUTES"))
	if minutes <= 0 {
		minutes = 10
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 12))

	node := newNodeProc(t, t.TempDir())
	node.start()
	admin := connectTCP(t, node.URL(), "admin")
	pol := fastPolicy()
	pol.MemberTimeout = 6 * time.Second
	pol.ProbeTimeout = 3 * time.Second
	pol.LeadTimeout = 15 * time.Second
	pol.AckWait = 2 * time.Second
	recipients := []string{"r1", "r2", "r3", "r4"}
	loadTeam(t, admin, "mix", recipients, pol)
	s := newSidecars(t, node.dir, admin)
	ctx := context.Background()
	if _, err := s.svc.CreateTeam(ctx, "crew", "", []team.MemberSpec{{ID: "tm1"}, {ID: "tm2"}}, pol); err != nil {
		t.Fatal(err)
	}
	openConsumers(t, s.svc, "crew", []string{"tm1", "tm2"})
	sides := map[string]*proc{"lead": s.lead("crew", "L1")}
	for _, m := range []string{"tm1", "tm2"} {
		_, sides[m] = s.teammate("crew", m, "s-"+m)
	}
	want := teamResources("mix", recipients)
	for k, v := range teamResources("crew", []string{"tm1", "tm2"}) {
		want[k] = v
	}

	w := startWorkload(t, node.URL(), "mix", 4, recipients, 150)
	counts := map[string]int{}
	end := time.Now().Add(time.Duration(minutes) * time.Minute)
	for time.Now().Before(end) {
		time.Sleep(time.Second + time.Duration(rng.Int64N(int64(3*time.Second))))
		switch rng.IntN(3) {
		case 0:
			node.kill9()
			node.start()
			checkResources(t, admin.JS, want)
			counts["bus kill -9"]++
		case 1:
			node.p.signal(syscall.SIGSTOP)
			time.Sleep(500*time.Millisecond + time.Duration(rng.Int64N(int64(1500*time.Millisecond))))
			node.p.signal(syscall.SIGCONT)
			counts["bus SIGSTOP"]++
		case 2:
			m := []string{"tm1", "tm2"}[rng.IntN(2)]
			sides[m].signal(syscall.SIGSTOP)
			time.Sleep(pol.MemberTimeout / 4)
			sides[m].signal(syscall.SIGCONT)
			counts["teammate SIGSTOP"]++
		}
		if err := noCrash(t, s.svc, "crew", sides); err != nil {
			t.Fatal(err)
		}
	}
	w.finishSending(2 * time.Minute)
	w.drain(3 * time.Minute)
	if _, err := scanMailbox(ctx, admin.JS, mailbox.MailboxPrefix+"mix", w.h); err != nil {
		t.Fatal(err)
	}
	stays(t, pol.MemberTimeout+pol.ProbeTimeout, "after the mix", func() error { return noCrash(t, s.svc, "crew", sides) })
	r := w.h.Check()
	result(t, "S12", "%d min, faults %v, seed %d: %s", minutes, counts, seed, r.Summary())
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"tm1", "tm2"} {
		if n := s.crashNotices("crew", m); n != 0 {
			t.Errorf("%d crash notices for the live member %s", n, m)
		}
	}
}
