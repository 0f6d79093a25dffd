package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/team"
)

// benchTask is task i of a team of members: 40% complete, 10% in
// progress, 10% waiting on a dependency, the rest available.
func benchTask(i, members int, now time.Time) *teambus.Task {
	t := &teambus.Task{ID: fmt.Sprintf("t%05d", i), Description: fmt.Sprintf("task %d of the bench team: implement and test one module", i),
		Priority: i % 5, Dependencies: []string{}, Status: teambus.TaskAvailable, CreatedAt: now, UpdatedAt: now}
	m := fmt.Sprintf("m%d", i%max(members, 1))
	switch i % 10 {
	case 0, 1, 2, 3:
		t.Status, t.AssignedTo, t.Attempts = teambus.TaskComplete, m, 1
		t.StartedAt, t.CompletedAt = teambus.TimePtr(now), teambus.TimePtr(now)
		t.Checkpoint = &teambus.Checkpoint{TasksCompleted: []string{"design", "code", "tests"}, LastAction: "ran the tests", Files: []string{"pkg/a.go", "pkg/a_test.go"}}
	case 4:
		if i/10 < members {
			t.Status, t.AssignedTo, t.Attempts, t.Epoch = teambus.TaskInProgress, m, 1, 1
			t.StartedAt = teambus.TimePtr(now)
			t.Checkpoint = &teambus.Checkpoint{TasksCompleted: []string{"design"}, TasksRemaining: []string{"code", "tests"}, LastAction: "wrote the design"}
		}
	case 5:
		if i > 0 {
			t.Status, t.Dependencies = teambus.TaskPending, []string{fmt.Sprintf("t%05d", i-1)}
		}
	}
	return t
}

// resumeMailboxBytes sizes a mailbox for n messages of size bytes.
func resumeMailboxBytes(n, size int) int64 {
	return int64(float64(n)*float64(size+400)*1.25) + 64<<20
}

// resume fills teams of each size on a node with sync interval, reopens
// the store with sync always and times team.Service.Resume (a forced
// takeover by a new lead session) against the file-based resume.
func (r *run) resume(ctx context.Context) error {
	cfg := r.cfg
	nodeDir := "node-resume"
	fill, err := r.node(ctx, nodeDir, bus.SyncModeInterval)
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			fill.Close()
		}
	}()
	// Setup goes over an in-process connection: it is not measured.
	conn, err := fill.Connect(ctx)
	if err != nil {
		return err
	}
	mbBytes := cfg.MailboxMaxBytes
	if mbBytes == 0 {
		mbBytes = resumeMailboxBytes(cfg.ResumeMessages, cfg.MsgSize)
	}
	svc := team.New(conn.JS, bigMailbox(mbBytes))
	var sizes []int
	var fillErrs []error
	for _, m := range cfg.ResumeMembers {
		t0 := time.Now()
		if err := fillTeam(ctx, conn, svc, fmt.Sprintf("r%d", m), m, cfg.ResumeTasks, cfg.ResumeMessages, cfg.MsgSize, mbBytes); err != nil {
			// The other sizes are still measured; the run reports the failure.
			fillErrs = append(fillErrs, fmt.Errorf("team of %d members: %w", m, err))
			cfg.Progress("  team of %d members could not be set up: %v", m, err)
			continue
		}
		sizes = append(sizes, m)
		cfg.Progress("  filled team of %d members, %d tasks, %d messages in %s", m, cfg.ResumeTasks, cfg.ResumeMessages, time.Since(t0).Round(100*time.Millisecond))
	}
	conn.Close()
	closed = true
	if err := fill.Close(); err != nil {
		return err
	}

	t0 := time.Now()
	node, err := r.node(ctx, nodeDir, bus.SyncModeAlways)
	if err != nil {
		return fmt.Errorf("reopen with sync always: %w", err)
	}
	defer node.Close()
	restart := time.Since(t0)
	r.res.add(Row{Group: "resume", Key: "tb.restart", Name: fmt.Sprintf("node restart on the store of %d teams (%s msgs each)", len(cfg.ResumeMembers), thousands(float64(cfg.ResumeMessages))),
		Value: ms(restart), Unit: UnitMs, N: 1, Note: "node.Start until ready for clients, page cache warm; the server reads the messages stored within the 10 min dedupe window (all of them, right after the fill) before a stream is ready"})
	if conn, err = connect(ctx, node); err != nil {
		return err
	}
	defer conn.Close()
	svc = team.New(conn.JS, team.Config{})

	// A resume right after the restart runs beside the node's start-up
	// store check, which reads every mailbox through; it is timed once,
	// then the check is waited for and the steady state timed.
	first := map[int]time.Duration{}
	for _, m := range sizes {
		t0 := time.Now()
		if _, err := svc.Resume(ctx, fmt.Sprintf("r%d", m), "lead-restart", true, false); err != nil {
			return fmt.Errorf("resume r%d after the restart: %w", m, err)
		}
		first[m] = time.Since(t0)
	}
	if err := poll(ctx, 10*time.Minute, func() (bool, error) {
		_, done := node.StoreDamage()
		return done, nil
	}); err != nil {
		return fmt.Errorf("store check after the restart: %w", err)
	}
	r.res.add(Row{Group: "resume", Key: "tb.storecheck", Name: "node start-up store check of those teams (stream state, messages since the marks)", Value: ms(time.Since(t0)), Unit: UnitMs, N: 1,
		Note: "from the start of node.Start until the node's store check reports done; the resumes below run after it"})
	cfg.Progress("  start-up store check done %s after the restart", time.Since(t0).Round(100*time.Millisecond))

	files := filepath.Join(r.dir, "files")
	if err := mkdir(files); err != nil {
		return err
	}
	jsonl := filepath.Join(files, "resume-mailbox.jsonl")
	if err := writeMailboxJSONL(jsonl, cfg.ResumeMessages, cfg.MsgSize); err != nil {
		return fmt.Errorf("peer mailbox: %w", err)
	}
	for _, m := range sizes {
		id := fmt.Sprintf("r%d", m)
		var lat []time.Duration
		for i := 0; i < cfg.ResumeRuns; i++ {
			t0 := time.Now()
			rep, err := svc.Resume(ctx, id, fmt.Sprintf("lead-%d", i+1), true, false)
			d := time.Since(t0)
			if err != nil {
				return fmt.Errorf("resume %s: %w", id, err)
			}
			if len(rep.Members) != m || len(rep.MailboxTail) != 10 {
				return fmt.Errorf("resume %s: report has %d members and %d tail messages", id, len(rep.Members), len(rep.MailboxTail))
			}
			lat = append(lat, d)
		}
		s := sample{n: len(lat), lat: lat}
		r.res.add(Row{Group: "resume", Key: fmt.Sprintf("tb.resume.%d", m),
			Name:  fmt.Sprintf("team resume (Service.Resume, forced takeover): %d members, %s tasks, %s msgs", m, thousands(float64(cfg.ResumeTasks)), thousands(float64(cfg.ResumeMessages))),
			Value: ms(s.pct(0.5)), Unit: UnitMs, P50: ms(s.pct(0.5)), P99: ms(s.pct(0.99)), N: s.n,
			Note: fmt.Sprintf("the first resume right after the node restart, beside its store check: %.1f ms", ms(first[m]))})
		cfg.Progress("  resume of %d members: p50 %.1f ms (right after the restart %.1f ms)", m, ms(s.pct(0.5)), ms(first[m]))

		state := filepath.Join(files, fmt.Sprintf("resume-state-%d.json", m))
		b, err := json.Marshal(newFileState(m, cfg.ResumeTasks))
		if err != nil {
			return err
		}
		if err := writeAtomic(state, b); err != nil {
			return err
		}
		ps, err := loop(ctx, 0, cfg.ResumeRuns, cfg.ResumeRuns, func(i int) error {
			return resumePeer(state, jsonl, fmt.Sprintf("lead-%d", i))
		})
		if err != nil {
			return fmt.Errorf("file resume: %w", err)
		}
		r.res.add(Row{Group: "peer", Key: fmt.Sprintf("peer.resume.%d", m), Short: "file resume",
			Name:  fmt.Sprintf("file resume: state.json (%d members, %s tasks) read + rewritten, tail of a %s-line JSONL", m, thousands(float64(cfg.ResumeTasks)), thousands(float64(cfg.ResumeMessages))),
			Value: ms(ps.pct(0.5)), Unit: UnitMs, P50: ms(ps.pct(0.5)), P99: ms(ps.pct(0.99)), N: ps.n})
	}
	return errors.Join(fillErrs...)
}

// fillTeam creates team id with members, tasks, a heartbeat per member,
// messages in its mailbox, and attaches a first lead: setup on a node with
// sync interval.
func fillTeam(ctx context.Context, conn *bus.Conn, svc *team.Service, id string, members, tasks, msgs, size int, mbBytes int64) error {
	var specs []team.MemberSpec
	for i := 0; i < members; i++ {
		specs = append(specs, team.MemberSpec{ID: fmt.Sprintf("m%d", i), Role: "dev"})
	}
	if _, err := svc.CreateTeam(ctx, id, "", specs, teambus.DefaultPolicy()); err != nil {
		return fmt.Errorf("create team %s: %w", id, err)
	}
	// The records are written as they are, below the team service: a
	// fixture of members at work, tasks in every state and live beats.
	store := kv.New(conn.JS, kv.Config{Replicas: bus.AutoReplicas(conn.NC), Board: team.BoardLayout()})
	if err := inParallel(ctx, 16, members, func(i int) error {
		mid := fmt.Sprintf("m%d", i)
		m, rev, err := store.Member(ctx, id, mid)
		if err != nil {
			return err
		}
		m.Register(fmt.Sprintf("s%d", i), store.Now())
		if _, err := store.PutMember(ctx, id, m, rev); err != nil {
			return err
		}
		hb := &kv.Heartbeat{Member: mid, Session: m.Session, Epoch: m.Epoch, Status: teambus.MemberInProgress}
		_, err = store.Beat(ctx, id, kv.MemberKey(mid), hb, time.Hour, 0)
		return err
	}); err != nil {
		return fmt.Errorf("register members of %s: %w", id, err)
	}
	if err := putTasks(ctx, store, id, tasks, func(i int, now time.Time) *teambus.Task { return benchTask(i, members, now) }); err != nil {
		return err
	}
	if err := fillMailbox(ctx, conn, benchMailbox(conn, id, mbBytes), members, msgs, size); err != nil {
		return fmt.Errorf("fill mailbox of %s: %w", id, err)
	}
	if _, err := svc.Resume(ctx, id, "lead-0", false, true); err != nil {
		return fmt.Errorf("first lead of %s: %w", id, err)
	}
	return nil
}

// fillMailbox stores msgs messages between the members and the lead. The
// first message of every sender and recipient pair goes through
// Mailbox.SendAsync, which gives the subject; the rest are the same JSON
// published straight to that subject without a dedupe id, so a million
// messages neither re-encode a body each nor fill the node's dedupe table.
func fillMailbox(ctx context.Context, conn *bus.Conn, mb *mailbox.Mailbox, members, msgs, size int) error {
	js, err := jetstream.New(conn.NC, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return err
	}
	bodyJSON, _ := json.Marshal(body(size))
	ts, _ := json.Marshal(time.Now().UTC())
	subjects := map[[2]string]string{}
	var buf []byte
	for i := 0; i < msgs; i++ {
		if i%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		from := fmt.Sprintf("m%d", i%members)
		to := teambus.Lead
		if i%3 != 0 && members > 1 {
			to = fmt.Sprintf("m%d", (i+1)%members)
		}
		id := fmt.Sprintf("f%d", i)
		subj, ok := subjects[[2]string{from, to}]
		if !ok {
			m := &teambus.Message{ID: id, From: from, To: to, Type: teambus.MsgInfo, Body: body(size), Epoch: 1}
			f, err := mb.SendAsync(m, false)
			if err != nil {
				return err
			}
			subjects[[2]string{from, to}] = f.Msg().Subject
			continue
		}
		buf = fmt.Appendf(buf[:0], `{"seq":0,"id":%q,"from":%q,"to":%q,"type":"info","body":%s,"data":null,"epoch":1,"ts":%s}`, id, from, to, bodyJSON, ts)
		if _, err := js.PublishAsync(subj, append([]byte(nil), buf...), jetstream.WithStallWait(mailbox.AsyncStallWait)); err != nil {
			return err
		}
	}
	for _, j := range []jetstream.JetStream{js, conn.JS} {
		select {
		case <-j.PublishAsyncComplete():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
