package faults

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/lead"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
	"github.com/teambus/teambus/teammate"
)

// skewed is a clock off by d.
func skewed(d time.Duration) func() time.Time {
	return func() time.Time { return time.Now().Add(d) }
}

// inProcess runs a sidecar in a goroutine until the test stops it.
type inProcess struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

func (p *inProcess) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *inProcess) stop() {
	p.cancel()
	<-p.done
}

func runInProcess(t *testing.T, run func(ctx context.Context) error) *inProcess {
	ctx, cancel := context.WithCancel(context.Background())
	p := &inProcess{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.err = run(ctx)
	}()
	t.Cleanup(p.stop)
	return p
}

// S8: clock skew. The lead's clock and the teammates' clocks are ten
// minutes apart, each way. Liveness is judged on the receiver's own clock
// and the server's TTLs, so nobody is declared dead, stuck or gone while
// everyone works; a member that stops working is still found (no false
// alive); mail is ordered by stream sequence whatever its timestamps say.
func TestS8_ClockSkew(t *testing.T) {
	for _, sk := range []struct {
		name        string
		lead, mates time.Duration
	}{
		{"lead -10m, teammates +10m", -10 * time.Minute, 10 * time.Minute},
		{"lead +10m, teammates -10m", 10 * time.Minute, -10 * time.Minute},
	} {
		t.Run(sk.name, func(t *testing.T) { clockSkew(t, sk.lead, sk.mates) })
	}
}

func clockSkew(t *testing.T, leadSkew, mateSkew time.Duration) {
	node := nodetest.NewServer(t)
	ctx := context.Background()
	pol := teambus.DefaultPolicy()
	pol.Heartbeat = 300 * time.Millisecond
	pol.MemberTimeout = 2 * time.Second
	pol.ProbeTimeout = time.Second
	pol.LeadTimeout = 2 * time.Second
	pol.StuckTimeout = 4 * time.Second
	pol.CheckpointEvery = time.Second
	admin := team.New(nodetest.Connect(t, node).JS, team.Config{})
	if _, err := admin.CreateTeam(ctx, "sk", "", []team.MemberSpec{{ID: "tm1"}, {ID: "tm2"}}, pol); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.AddTask(ctx, "sk", team.TaskSpec{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(&tlog{t: t}, &slog.HandlerOptions{Level: slog.LevelInfo}))

	leadSvc := team.New(nodetest.Connect(t, node).JS, team.Config{Now: skewed(leadSkew)})
	ld, err := lead.New(leadSvc.SidecarAPI(), lead.Config{Team: "sk", Session: "L1", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	sides := map[string]*inProcess{"lead": runInProcess(t, ld.Run)}
	checkFor(t, 10*time.Second, func() error {
		tm, _, err := admin.Store().Team(ctx, "sk")
		if err != nil || tm.LeadSession != "L1" {
			return fmt.Errorf("lead not attached: %v", err)
		}
		return nil
	})
	mates := map[string]*team.Service{}
	for _, id := range []string{"tm1", "tm2"} {
		svc := team.New(nodetest.Connect(t, node).JS, team.Config{Now: skewed(mateSkew)})
		mates[id] = svc
		sc, err := teammate.New(svc.SidecarAPI(), teammate.Config{Team: "sk", Member: id, Session: "s-" + id, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		sides[id] = runInProcess(t, func(ctx context.Context) error {
			out, err := sc.Run(ctx)
			if err == nil && out != teammate.OutcomeShutdown {
				err = fmt.Errorf("stopped: %s", out)
			}
			return err
		})
		checkFor(t, 10*time.Second, func() error {
			m, _, err := admin.Store().Member(ctx, "sk", id)
			if err != nil || m.Session != "s-"+id || m.Status == teambus.MemberSpawned {
				return fmt.Errorf("%s not registered: %v", id, err)
			}
			return nil
		})
	}
	tm1 := team.Actor{Team: "sk", Member: "tm1", Session: "s-tm1"}
	if _, err := mates["tm1"].Claim(ctx, tm1, "a"); err != nil {
		t.Fatal(err)
	}

	// Phase 1: everyone works and talks for several timeouts. tm1 keeps
	// checkpointing, every member sends mail.
	h := NewHistory()
	senders := map[string]struct {
		svc *team.Service
		a   team.Actor
	}{
		"lead": {leadSvc, team.Actor{Team: "sk", Member: teambus.Lead, Session: "L1"}},
		"tm1":  {mates["tm1"], tm1},
		"tm2":  {mates["tm2"], team.Actor{Team: "sk", Member: "tm2", Session: "s-tm2"}},
	}
	healthy := func() error {
		snap, err := admin.Store().Snapshot(ctx, "sk")
		if err != nil {
			return err
		}
		for id, m := range snap.Members {
			if m.Status == teambus.MemberCrashed || m.Status == teambus.MemberZombie || m.CrashCount > 0 {
				return fmt.Errorf("member %s is %s (crashes %d) under clock skew", id, m.Status, m.CrashCount)
			}
		}
		if len(snap.Team.Probes) > 0 {
			return fmt.Errorf("live members probed under clock skew: %v", snap.Team.Probes)
		}
		if snap.Team.LeadTimeoutDetectedAt != nil {
			return fmt.Errorf("teammates saw the live lead gone")
		}
		for name, p := range sides {
			if !p.running() {
				return fmt.Errorf("sidecar %s stopped: %v", name, p.err)
			}
		}
		return nil
	}
	phase := 3 * (pol.MemberTimeout + pol.ProbeTimeout)
	deadline := time.Now().Add(phase)
	seq := uint64(0)
	for time.Now().Before(deadline) {
		seq++
		for _, name := range []string{"lead", "tm1", "tm2"} {
			s := senders[name]
			id := MsgID(name, seq)
			to := map[string]string{"lead": "tm1", "tm1": "tm2", "tm2": teambus.Lead}[name]
			h.Invoke(to, id, []byte(id))
			res, err := s.svc.Send(ctx, teamapi.SendRequest{Actor: s.a, To: to, ID: id, Body: id})
			if err != nil {
				t.Fatalf("send %s: %v", id, err)
			}
			h.Ack(id, res.Seq, res.Duplicate)
		}
		if _, err := mates["tm1"].Checkpoint(ctx, teamapi.CheckpointRequest{Actor: tm1, LastAction: fmt.Sprintf("step %d", seq)}); err != nil {
			t.Fatalf("checkpoint: %v", err)
		}
		if err := healthy(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(250 * time.Millisecond)
	}

	// Mail: read back in stream order; the timestamps disagree with it.
	var msgs []teambus.Message
	if err := admin.Mailbox("sk").Replay(ctx, mailbox.ReplayFilter{}, func(m teambus.Message) error {
		if _, _, ok := ParseMsgID(m.ID); ok {
			msgs = append(msgs, m)
			h.Read(Read{Kind: Stored, Mailbox: m.To, ID: m.ID, Seq: m.Seq, Digest: Digest([]byte(m.Body))})
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tsInversions := 0
	for i := 1; i < len(msgs); i++ {
		if msgs[i].Seq <= msgs[i-1].Seq {
			t.Fatalf("replay out of sequence order: %d after %d", msgs[i].Seq, msgs[i-1].Seq)
		}
		if msgs[i].TS.Before(msgs[i-1].TS) {
			tsInversions++
		}
	}
	if tsInversions == 0 {
		t.Error("no timestamp inversions in the mailbox: the clocks were not skewed")
	}
	r := h.Check()
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}

	// Phase 2: tm1 stops working while holding its task. The lead must find
	// it stuck (probe) on its own clock; tm1's sidecar answers, so it is
	// not crashed.
	checkFor(t, 30*time.Second, func() error {
		n := 0
		err := admin.Mailbox("sk").Replay(ctx, mailbox.ReplayFilter{To: "tm1", Type: teambus.MsgStatusCheck}, func(teambus.Message) error {
			n++
			return nil
		})
		if err != nil {
			return err
		}
		if n == 0 {
			return errors.New("the idle member was never probed: a skewed clock hid it (false alive)")
		}
		return nil
	})
	stays(t, pol.ProbeTimeout+2*time.Second, "the probed member answers", func() error {
		m, _, err := admin.Store().Member(ctx, "sk", "tm1")
		if err != nil {
			return err
		}
		if m.Status == teambus.MemberCrashed || m.CrashCount > 0 {
			return fmt.Errorf("tm1 declared crashed")
		}
		return nil
	})
	result(t, "S8", "lead %+v, teammates %+v for %s: 0 crashes, 0 zombies, 0 probes of working members; %d messages in seq order (%d timestamp inversions), %s; idle member probed and answered",
		leadSkew, mateSkew, phase, len(msgs), tsInversions, r.Summary())
}

// tlog writes log lines through t.
type tlog struct{ t *testing.T }

func (w *tlog) Write(p []byte) (int, error) {
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}
