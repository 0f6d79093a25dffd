package team_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/teamapi"
)

// TestService_FenceAndWrite_RaceJoin races a write of a member's current
// incarnation (a send, a claim, a checkpoint) against a re-registration
// of the member (Join, epoch+1), 1,000 times on a real node. The write may
// land before the new incarnation registered, or be refused as fenced
// (exit 3); it must never land after: a task record written by the old
// epoch has a lower revision than the member record that took the new
// epoch, and a message of the old epoch a lower sequence than the new
// incarnation's marker (which Join stores before it returns).
func TestService_FenceAndWrite_RaceJoin(t *testing.T) {
	// The issue's 1,000 rounds: `go test -run TestService_FenceAndWrite_RaceJoin
	// ./team`. Under the race detector (CI's run) each round costs ten
	// times as much and the team grows by a task a round, so it runs 150.
	rounds := 1000
	if testing.Short() {
		rounds = 90
	} else if raceEnabled {
		rounds = 150
	}
	f := newFixture(t, team.Config{})
	f.create(t, "fence", "L", testPolicy(), "tm1", "tm2")
	// A round is a few writes; the whole race gets a second a round.
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rounds)*time.Second)
	defer cancel()

	session := func(e int) string { return "s-tm1-" + strconv.Itoa(e) }
	if _, err := f.svc.Join(ctx, "fence", "tm1", session(0)); err != nil {
		t.Fatal(err)
	}
	kinds := []string{"send", "claim", "checkpoint"}
	landed := map[string]int{}
	fenced := map[string]int{}
	for r := 0; r < rounds; r++ {
		kind := kinds[r%len(kinds)]
		old := team.Actor{Team: "fence", Member: "tm1", Session: session(r)}
		before := f.member(t, "fence", "tm1")
		task := fmt.Sprintf("%s%04d", kind[:2], r)
		if kind != "send" {
			f.addTask(t, "fence", task, 0)
		}
		if kind == "checkpoint" {
			if _, err := f.svc.Claim(ctx, old, task); err != nil {
				t.Fatalf("round %d: claim before the race: %v", r, err)
			}
		}

		var (
			wg                sync.WaitGroup
			start             = make(chan struct{})
			writeErr, joinErr error
			sent              mailbox.SendResult
		)
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			switch kind {
			case "send":
				sent, writeErr = f.svc.Send(ctx, teamapi.SendRequest{Actor: old, To: "tm2", ID: "m" + strconv.Itoa(r), Body: "from epoch " + strconv.FormatInt(before.Epoch, 10)})
			case "claim":
				_, writeErr = f.svc.Claim(ctx, old, task)
			case "checkpoint":
				_, writeErr = f.svc.Checkpoint(ctx, teamapi.CheckpointRequest{Actor: old, Task: task, LastAction: "round " + strconv.Itoa(r)})
			}
		}()
		go func() {
			defer wg.Done()
			<-start
			_, joinErr = f.svc.Join(ctx, "fence", "tm1", session(r+1))
		}()
		close(start)
		wg.Wait()
		if joinErr != nil {
			t.Fatalf("round %d: join: %v", r, joinErr)
		}
		if writeErr != nil {
			if !errors.Is(writeErr, teambus.ErrFenced) || teambus.ExitCode(writeErr) != teambus.ExitConflict {
				t.Fatalf("round %d: %s of the old epoch failed with %v (exit %d), want fenced (exit 3)", r, kind, writeErr, teambus.ExitCode(writeErr))
			}
			fenced[kind]++
		}

		after, afterRev, err := f.svc.Store().Member(ctx, "fence", "tm1")
		if err != nil {
			t.Fatal(err)
		}
		if after.Epoch != before.Epoch+1 {
			t.Fatalf("round %d: epoch %d after join, want %d", r, after.Epoch, before.Epoch+1)
		}
		switch kind {
		case "send":
			if writeErr == nil {
				landed[kind]++
				if after.Marker == 0 || sent.Seq >= after.Marker {
					t.Fatalf("round %d: mail of epoch %d stored at seq %d, after the marker of epoch %d at seq %d", r, before.Epoch, sent.Seq, after.Epoch, after.Marker)
				}
			}
		default:
			tk, rev, err := f.svc.Store().Task(ctx, "fence", task)
			if err != nil {
				t.Fatal(err)
			}
			wrote := kind == "claim" && tk.AssignedTo == "tm1" && tk.Epoch == before.Epoch
			if kind == "checkpoint" {
				wrote = tk.Checkpoint != nil && tk.Checkpoint.Epoch == before.Epoch
			}
			if wrote != (writeErr == nil) {
				t.Fatalf("round %d: %s returned %v but the task shows it written: %v (%+v)", r, kind, writeErr, wrote, tk)
			}
			if wrote {
				landed[kind]++
				if join := epochRev(t, f, "fence", "tm1", after.Epoch, afterRev); rev >= join {
					t.Fatalf("round %d: %s of epoch %d stored at revision %d, after the member took epoch %d at revision %d", r, kind, before.Epoch, rev, after.Epoch, join)
				}
			}
			if tk.Active() && tk.AssignedTo == "tm1" {
				if _, err := f.svc.Release(ctx, team.Actor{Team: "fence", Member: "tm1", Session: session(r + 1)}, task); err != nil {
					t.Fatalf("round %d: release: %v", r, err)
				}
			}
		}
	}
	t.Logf("%d races: landed before the new epoch %v, fenced %v", rounds, landed, fenced)
	// The mailbox agrees: no message of an epoch after the marker of the
	// next one.
	markers := map[int64]uint64{}
	var mail []teambus.Message
	mb := f.svc.Mailbox("fence")
	if err := mb.Replay(ctx, mailbox.ReplayFilter{From: "tm1"}, func(m teambus.Message) error {
		mail = append(mail, m)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, m := range markerSeqs(t, f, "fence", "tm1") {
		markers[m.epoch] = m.seq
	}
	for _, m := range mail {
		if next, ok := markers[m.Epoch+1]; ok && m.Seq > next {
			t.Errorf("mail %s of epoch %d at seq %d lands after the marker of epoch %d (seq %d)", m.ID, m.Epoch, m.Seq, m.Epoch+1, next)
		}
	}
}

// epochRev returns the revision at which member's record took epoch: the
// current revision rev, or the one before it when the record was written
// again since (Join records its marker's sequence in a second write).
func epochRev(t *testing.T, f *fixture, teamID, member string, epoch int64, rev uint64) uint64 {
	t.Helper()
	req, _ := json.Marshal(map[string]any{"multi_last": []string{"$KV.TBS_" + teamID + ".member." + member}, "up_to_seq": rev - 1})
	nc := f.conn.NC
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest("$JS.API.DIRECT.GET.KV_TBS_"+teamID, inbox, req); err != nil {
		t.Fatal(err)
	}
	out := rev
	for {
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Get("Status") != "" {
			return out
		}
		var rec teambus.Member
		seq, _ := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		if json.Unmarshal(m.Data, &rec) == nil && rec.Epoch == epoch && seq < out {
			out = seq
		}
	}
}

type marker struct {
	epoch int64
	seq   uint64
}

// markerSeqs returns every incarnation marker of member in the mailbox.
func markerSeqs(t *testing.T, f *fixture, teamID, member string) []marker {
	t.Helper()
	ctx := testCtx(t)
	st, err := f.conn.JS.Stream(ctx, mailbox.MailboxPrefix+teamID)
	if err != nil {
		t.Fatal(err)
	}
	var out []marker
	var seq uint64
	for {
		m, err := st.GetMsg(ctx, seq+1, jetstream.WithGetMsgSubject(f.svc.Mailbox(teamID).MarkerSubject(member)))
		if err != nil {
			return out
		}
		var body struct {
			Epoch int64 `json:"epoch"`
		}
		_ = json.Unmarshal(m.Data, &body)
		out = append(out, marker{epoch: body.Epoch, seq: m.Sequence})
		seq = m.Sequence
	}
}
