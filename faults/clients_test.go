package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node"
	"github.com/teambus/teambus/node/nodetest"
)

// Environment of the sender and consumer helper processes.
const (
	envURL        = "TEAMBUS_FAULTS_URL"
	envTeam       = "TEAMBUS_FAULTS_TEAM"
	envName       = "TEAMBUS_FAULTS_NAME"
	envTo         = "TEAMBUS_FAULTS_TO"
	envFile       = "TEAMBUS_FAULTS_FILE"
	envTotal      = "TEAMBUS_FAULTS_TOTAL"
	envCrashAfter = "TEAMBUS_FAULTS_CRASH_AFTER"
	envBucket     = "TEAMBUS_FAULTS_BUCKET"
	envWorkMS     = "TEAMBUS_FAULTS_WORK_MS"
)

func envInt(name string) int {
	n, _ := strconv.Atoi(os.Getenv(name))
	return n
}

func fatal(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

// journal is an append-only file of records, each fsynced before the
// writer goes on: the sender's outbox and the consumer's execution log.
type journal struct {
	f *os.File
}

func openJournal(path string) (*journal, [][]string) {
	var recs [][]string
	if b, err := os.ReadFile(path); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 0 {
				recs = append(recs, f)
			}
		}
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		fatal("open journal: %v", err)
	}
	// A kill -9 may have cut the last record short: end it.
	_, _ = f.WriteString("\n")
	return &journal{f: f}, recs
}

func (j *journal) add(fields ...any) {
	if _, err := fmt.Fprintln(j.f, fields...); err != nil {
		fatal("write journal: %v", err)
	}
	if err := j.f.Sync(); err != nil {
		fatal("sync journal: %v", err)
	}
}

func killSelf() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// helperSender is a sender with a local fsynced outbox: it writes an intent
// ("I id") before the first attempt of a send and the ack ("A id seq dup")
// after it; on restart it re-sends every intent without an ack ("R id")
// with the same id before going on. With a crash point it publishes the
// n-th new send raw, waits for the bus to store it and kills itself before
// reading the ack: killed between send and ack.
func helperSender() {
	ctx, stop := signalContext()
	defer stop()
	team, name, to := os.Getenv(envTeam), os.Getenv(envName), os.Getenv(envTo)
	total, crashAfter := envInt(envTotal), envInt(envCrashAfter)
	out, recs := openJournal(os.Getenv(envFile))
	acked := map[string]bool{}
	var pending []string
	var next uint64 = 1
	for _, r := range recs {
		if len(r) < 2 {
			continue
		}
		switch r[0] {
		case "I":
			pending = append(pending, r[1])
			if _, seq, ok := ParseMsgID(r[1]); ok && seq >= next {
				next = seq + 1
			}
		case "A":
			acked[r[1]] = true
		}
	}
	conn, err := bus.Connect(ctx, bus.ConnectConfig{Server: os.Getenv(envURL), Token: testToken, Name: "sender-" + name, Timeout: 3 * time.Second})
	if err != nil {
		fatal("connect: %v", err)
	}
	mb := mailbox.NewMailbox(conn.JS, team, mailbox.MailboxConfig{})
	send := func(id string) {
		body := sendBody(id, 128)
		for ctx.Err() == nil {
			actx, cancel := context.WithTimeout(ctx, 3*time.Second)
			res, err := mb.Send(actx, &teambus.Message{ID: id, From: name, To: to, Type: teambus.MsgInfo, Body: body}, false)
			cancel()
			if err == nil {
				out.add("A", id, res.Seq, res.Duplicate)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		os.Exit(1)
	}
	for _, id := range pending {
		if !acked[id] {
			out.add("R", id)
			send(id)
		}
	}
	for n := 1; next <= uint64(total); next, n = next+1, n+1 {
		id := MsgID(name, next)
		out.add("I", id)
		if n == crashAfter {
			rawPublish(conn, team, name, to, id, sendBody(id, 128))
			killSelf()
		}
		send(id)
	}
	conn.Close()
}

// rawPublish publishes what Mailbox.Send would, subject and Nats-Msg-Id
// alike, and returns once the bus has stored it (its ack arrived), without
// anything recording the ack: the sender dies knowing only its intent.
func rawPublish(conn *bus.Conn, team, from, to, id, body string) {
	b, _ := json.Marshal(teambus.Message{ID: id, From: from, To: to, Type: teambus.MsgInfo, Body: body, TS: time.Now().UTC()})
	msg := nats.NewMsg(fmt.Sprintf("tb.%s.mbx.%s.%s.%s", team, to, teambus.MsgInfo, from))
	msg.Data = b
	msg.Header.Set(jetstream.MsgIDHeader, from+"/"+id)
	msg.Reply = conn.NC.NewRespInbox()
	sub, err := conn.NC.SubscribeSync(msg.Reply)
	if err != nil {
		fatal("subscribe: %v", err)
	}
	if err := conn.NC.PublishMsg(msg); err != nil {
		fatal("raw publish: %v", err)
	}
	_, _ = sub.NextMsg(10 * time.Second)
}

// S2: kill -9 of sender processes at random points and between a send and
// its ack; every sender keeps an fsynced outbox and re-sends with the same
// id when restarted. Exactly one stored copy per id.
func TestS2_SenderKill9(t *testing.T) {
	t.Parallel() // no timing criterion: runs beside the other parallel scenarios
	nd := nodetest.NewServerConfig(t, node.NodeConfig{Token: testToken})
	admin := nodetest.Connect(t, nd)
	loadTeam(t, admin, "s2", []string{"r1"}, teambus.DefaultPolicy())
	senders, total, kills := 3, tier(200, 1000), tier(6, 30)
	dir := t.TempDir()
	var wg sync.WaitGroup
	var mu sync.Mutex
	selfKills, extKills := 0, 0
	for i := 1; i <= senders; i++ {
		name := fmt.Sprintf("p%d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(i)))
			env := []string{envURL + "=" + nd.URL(), envTeam + "=s2", envName + "=" + name, envTo + "=r1",
				envFile + "=" + filepath.Join(dir, name+".outbox"), fmt.Sprintf("%s=%d", envTotal, total)}
			for k := 0; k < kills; k++ {
				if k%2 == 0 {
					p := startHelper(t, fmt.Sprintf("%s#%d", name, k), "sender", append(env, fmt.Sprintf("%s=%d", envCrashAfter, 1+rng.IntN(10)))...)
					if p.exitCode(t, 60*time.Second) == -1 { // it killed itself; 0: nothing left to send
						mu.Lock()
						selfKills++
						mu.Unlock()
					}
					continue
				}
				p := startHelper(t, fmt.Sprintf("%s#%d", name, k), "sender", env...)
				time.Sleep(20*time.Millisecond + time.Duration(rng.Int64N(int64(200*time.Millisecond))))
				p.kill()
				mu.Lock()
				extKills++
				mu.Unlock()
			}
			p := startHelper(t, name+"#final", "sender", env...)
			if code := p.exitCode(t, 120*time.Second); code != 0 {
				t.Errorf("final run of sender %s exited %d:\n%s", name, code, tail(p.out.String(), 3000))
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	h := NewHistory()
	for i := 1; i <= senders; i++ {
		name := fmt.Sprintf("p%d", i)
		_, recs := readJournal(t, filepath.Join(dir, name+".outbox"))
		for _, r := range recs {
			switch {
			case len(r) >= 2 && (r[0] == "I" || r[0] == "R"):
				h.Invoke("r1", r[1], []byte(sendBody(r[1], 128)))
			case len(r) >= 4 && r[0] == "A":
				seq, _ := strconv.ParseUint(r[2], 10, 64)
				h.Ack(r[1], seq, r[3] == "true")
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := scanMailbox(ctx, admin.JS, mailbox.MailboxPrefix+"s2", h); err != nil {
		t.Fatal(err)
	}
	r := h.Check()
	result(t, "S2", "senders=%d kills=%d (between send and ack %d, random %d) %s", senders, selfKills+extKills, selfKills, extKills, r.Summary())
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if want := senders * total; r.Acked != want || r.ReadIDs != want || r.StoredCopies != want {
		t.Errorf("acked %d, read %d ids in %d copies; want %d of each: exactly one stored copy per id", r.Acked, r.ReadIDs, r.StoredCopies, want)
	}
	if selfKills < senders {
		t.Errorf("%d kills between send and ack, want at least one per sender", selfKills)
	}
	if r.DupAcks < selfKills {
		t.Errorf("%d re-sends were acknowledged as duplicates, want at least %d (one per kill between send and ack): the outbox replay or dedupe is not exercised", r.DupAcks, selfKills)
	}
}

func readJournal(t testing.TB, path string) (int, [][]string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var recs [][]string
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 0 {
			recs = append(recs, f)
		}
	}
	return len(b), recs
}

// fxKey is the effects-table key of a message id.
func fxKey(id string) string {
	sender, seq, _ := ParseMsgID(id)
	return fmt.Sprintf("fx.%s.%d", sender, seq)
}

// helperConsumer applies the effect of every message of a member's inbox
// exactly once: it logs the execution ("X id seq digest"), creates the
// effect key (KV Create: a second apply fails), and acks. With a crash
// point it kills itself after the n-th effect, before the ack, so that
// message is redelivered after ack-wait.
func helperConsumer() {
	ctx, stop := signalContext()
	defer stop()
	team, member, crashAfter := os.Getenv(envTeam), os.Getenv(envName), envInt(envCrashAfter)
	log, _ := openJournal(os.Getenv(envFile))
	conn, err := bus.Connect(ctx, bus.ConnectConfig{Server: os.Getenv(envURL), Token: testToken, Name: "consumer-" + member, Timeout: 3 * time.Second})
	if err != nil {
		fatal("connect: %v", err)
	}
	fx, err := conn.JS.KeyValue(ctx, os.Getenv(envBucket))
	if err != nil {
		fatal("effects bucket: %v", err)
	}
	cons, err := conn.JS.Consumer(ctx, mailbox.MailboxPrefix+team, mailbox.InboxConsumer(member))
	if err != nil {
		fatal("consumer: %v", err)
	}
	applied := 0
	work := time.Duration(envInt(envWorkMS)) * time.Millisecond
	fmt.Fprintln(os.Stderr, "consumer started, crash after", crashAfter)
	for ctx.Err() == nil {
		batch, err := cons.Fetch(5, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for jm := range batch.Messages() {
			md, err := jm.Metadata()
			if err != nil {
				continue
			}
			m, err := mailbox.DecodeMessage(jm.Data(), md.Sequence.Stream, jm.Subject())
			if err != nil {
				log.add("U", md.Sequence.Stream)
				_ = jm.Term()
				continue
			}
			digest := Digest([]byte(m.Body))
			log.add("X", m.ID, md.Sequence.Stream, digest, md.NumDelivered)
			time.Sleep(work) // the task's work before its effect
			_, err = fx.Create(ctx, fxKey(m.ID), []byte(fmt.Sprintf("%s %d %s", m.ID, md.Sequence.Stream, digest)))
			if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
				_ = jm.Nak()
				continue
			}
			applied++
			if applied == crashAfter {
				log.add("K", m.ID)
				killSelf()
			}
			_ = jm.DoubleAck(ctx)
		}
	}
}

// S3: kill -9 of a consumer mid-task, between applying a message's effect
// and acking it, and at random points. After redelivery every effect is
// applied exactly once.
func TestS3_ConsumerKill9(t *testing.T) {
	t.Parallel() // no timing criterion: runs beside the other parallel scenarios
	nd := nodetest.NewServerConfig(t, node.NodeConfig{Token: testToken})
	admin := nodetest.Connect(t, nd)
	pol := teambus.DefaultPolicy()
	pol.AckWait = time.Second
	loadTeam(t, admin, "s3", []string{"worker"}, pol)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	fx, err := admin.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "FX_s3", Storage: jetstream.FileStorage, MaxBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	n, generations := tier(200, 2000), tier(8, 40)
	h := NewHistory()
	mb := mailbox.NewMailbox(admin.JS, "s3", mailbox.MailboxConfig{})
	for i := 1; i <= n; i++ {
		id := MsgID("lead", uint64(i))
		if _, err := sendOnce(ctx, h, mb, "lead", "worker", id, sendBody(id, 100), 5*time.Second, nil); err != nil {
			t.Fatal(err)
		}
	}
	execLog := filepath.Join(t.TempDir(), "exec.log")
	env := []string{envURL + "=" + nd.URL(), envTeam + "=s3", envName + "=worker", envFile + "=" + execLog, envBucket + "=FX_s3", envWorkMS + "=10"}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	selfKills, extKills := 0, 0
	for g := 0; g < generations; g++ {
		if g%2 == 0 {
			p := startHelper(t, fmt.Sprintf("consumer#%d", g), "consumer", append(env, fmt.Sprintf("%s=%d", envCrashAfter, 1+rng.IntN(15)))...)
			select {
			case <-p.done:
				if code := p.exitCode(t, 0); code != -1 {
					t.Fatalf("consumer exited %d before its crash point:\n%s", code, p.out.String())
				}
				selfKills++
			case <-time.After(30 * time.Second): // fewer messages left than its crash point
				p.kill()
				extKills++
			}
			continue
		}
		p := startHelper(t, fmt.Sprintf("consumer#%d", g), "consumer", env...)
		time.Sleep(100*time.Millisecond + time.Duration(rng.Int64N(int64(500*time.Millisecond))))
		p.kill()
		extKills++
	}
	final := startHelper(t, "consumer#final", "consumer", env...)
	cons, err := admin.JS.Consumer(ctx, mailbox.MailboxPrefix+"s3", mailbox.InboxConsumer("worker"))
	if err != nil {
		t.Fatal(err)
	}
	checkFor(t, 2*time.Minute, func() error {
		if final.exited() {
			t.Fatalf("final consumer exited: %v\n%s", final.err, final.out.String())
		}
		ci, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		if ci.NumPending != 0 || ci.NumAckPending != 0 {
			return fmt.Errorf("%d pending, %d awaiting ack", ci.NumPending, ci.NumAckPending)
		}
		return nil
	})
	checkFor(t, 30*time.Second, func() error { // its signal handler is set
		if !strings.Contains(final.out.String(), "consumer started") {
			return fmt.Errorf("final consumer not started yet")
		}
		return nil
	})
	final.signal(syscall.SIGTERM)
	if code := final.exitCode(t, 30*time.Second); code != 0 {
		t.Errorf("final consumer exit %d", code)
	}

	// Effects: exactly one per message, with the message's content.
	effects := map[string]string{}
	keys, err := fx.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys.Keys() {
		e, err := fx.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if e.Revision() == 0 {
			t.Fatalf("effect %s has no revision", k)
		}
		effects[k] = string(e.Value())
	}
	// Executions, from the consumer's log, are deliveries.
	_, recs := readJournal(t, execLog)
	execs := map[string]int{}
	killedAt := map[string]int{} // id -> executions logged before a kill between its effect and its ack
	for _, r := range recs {
		if r[0] == "K" && len(r) > 1 {
			killedAt[r[1]] = execs[r[1]]
			continue
		}
		if r[0] == "U" {
			t.Errorf("undecodable message at seq %s", r[1])
			continue
		}
		if r[0] != "X" || len(r) < 5 {
			continue
		}
		seq, _ := strconv.ParseUint(r[2], 10, 64)
		execs[r[1]]++
		h.Read(Read{Kind: Delivered, Mailbox: "worker", ID: r[1], Seq: seq, Digest: r[3]})
	}
	if _, err := scanMailbox(ctx, admin.JS, mailbox.MailboxPrefix+"s3", h); err != nil {
		t.Fatal(err)
	}
	r := h.Check()
	repeated := 0
	for _, c := range execs {
		if c > 1 {
			repeated++
		}
	}
	result(t, "S3", "messages=%d kills=%d (after effect before ack %d, random %d) effects=%d executed-more-than-once=%d %s",
		n, selfKills+extKills, selfKills, extKills, len(effects), repeated, r.Summary())
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if len(effects) != n {
		t.Errorf("%d effects for %d messages, want exactly one each", len(effects), n)
	}
	for i := 1; i <= n; i++ {
		id := MsgID("lead", uint64(i))
		v, ok := effects[fxKey(id)]
		if !ok {
			t.Errorf("message %s: effect never applied", id)
			continue
		}
		if !strings.HasPrefix(v, id+" ") || !strings.HasSuffix(v, " "+Digest([]byte(sendBody(id, 100)))) {
			t.Errorf("message %s: effect %q does not match it", id, v)
		}
		if execs[id] == 0 {
			t.Errorf("message %s: never executed", id)
		}
	}
	if len(killedAt) == 0 {
		t.Error("no consumer was killed between an effect and its ack: the scenario did not run")
	}
	for id, n := range killedAt {
		if execs[id] <= n {
			t.Errorf("message %s: killed between effect and ack, never redelivered and executed again", id)
		}
	}
}
