package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/mailbox"
)

// workload is the mailbox load of the bus scenarios: senders that connect
// over TCP, send sender:seq ids one at a time and retry every failed or
// ambiguous attempt with the same id until it is acknowledged; and one
// consumer per recipient that fetches, records and acks (AckSync). All of
// it goes into one History.
type workload struct {
	t          testing.TB
	h          *History
	team       string
	recipients []string

	stopSend chan struct{} // no new ids after this
	giveUp   chan struct{} // stop retrying (test over)
	senders  sync.WaitGroup

	stopRead  chan struct{}
	consumers sync.WaitGroup

	mu        sync.Mutex
	delivered map[string]bool

	sendErrs  atomic.Int64
	fetchErrs atomic.Int64
}

// startWorkload starts senders and consumers against the node at url. Each
// sender pauses between sends so the load stays near rate msg/s in total.
func startWorkload(t testing.TB, url, team string, senders int, recipients []string, rate int) *workload {
	t.Helper()
	w := &workload{
		t: t, h: NewHistory(), team: team, recipients: recipients,
		stopSend: make(chan struct{}), giveUp: make(chan struct{}), stopRead: make(chan struct{}),
		delivered: map[string]bool{},
	}
	pause := time.Duration(senders) * time.Second / time.Duration(rate)
	for i := 1; i <= senders; i++ {
		name := fmt.Sprintf("s%d", i)
		conn := connectTCP(t, url, "sender-"+name)
		w.senders.Add(1)
		go w.send(conn, name, uint64(i), pause)
	}
	for _, r := range recipients {
		conn := connectTCP(t, url, "consumer-"+r)
		w.consumers.Add(1)
		go w.consume(conn, r)
	}
	t.Cleanup(func() {
		w.stop()
	})
	return w
}

func (w *workload) send(conn *bus.Conn, name string, seed uint64, pause time.Duration) {
	defer w.senders.Done()
	rng := rand.New(rand.NewPCG(seed, 99))
	mb := mailbox.NewMailbox(conn.JS, w.team, mailbox.MailboxConfig{})
	ctx := context.Background()
	for seq := uint64(1); ; seq++ {
		select {
		case <-w.stopSend:
			return
		default:
		}
		id := MsgID(name, seq)
		to := w.recipients[rng.IntN(len(w.recipients))]
		body := sendBody(id, 64+rng.IntN(256))
		for {
			_, err := sendOnce(ctx, w.h, mb, name, to, id, body, 2*time.Second, nil)
			if err == nil {
				break
			}
			w.sendErrs.Add(1)
			select {
			case <-w.giveUp:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		time.Sleep(pause)
	}
}

func (w *workload) consume(conn *bus.Conn, recipient string) {
	defer w.consumers.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-w.stopRead
		cancel()
	}()
	for ctx.Err() == nil {
		cons, err := conn.JS.Consumer(ctx, mailbox.MailboxPrefix+w.team, mailbox.InboxConsumer(recipient))
		if err != nil {
			w.fetchErrs.Add(1)
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		for ctx.Err() == nil {
			batch, err := cons.Fetch(50, jetstream.FetchMaxWait(500*time.Millisecond))
			if err != nil {
				w.fetchErrs.Add(1)
				sleepCtx(ctx, 100*time.Millisecond)
				break
			}
			for jm := range batch.Messages() {
				w.record(ctx, recipient, jm)
			}
			if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) {
				w.fetchErrs.Add(1)
				sleepCtx(ctx, 100*time.Millisecond)
				break
			}
		}
	}
}

// record notes a delivery and acks it; an ack lost to a fault means a
// redelivery, which the checker counts.
func (w *workload) record(ctx context.Context, recipient string, jm jetstream.Msg) {
	md, err := jm.Metadata()
	if err != nil {
		return
	}
	m, err := mailbox.DecodeMessage(jm.Data(), md.Sequence.Stream, jm.Subject())
	id := m.ID
	if err != nil {
		id = fmt.Sprintf("undecodable@%d", md.Sequence.Stream)
	}
	w.h.Read(Read{Kind: Delivered, Mailbox: recipient, ID: id, Seq: md.Sequence.Stream, Digest: Digest([]byte(m.Body))})
	// Delivered is what drain waits for: an ack whose confirmation a kill
	// lost may still have reached the server, and then the message never
	// comes again (the checker counts redeliveries either way).
	w.mu.Lock()
	w.delivered[id] = true
	w.mu.Unlock()
	actx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_ = jm.DoubleAck(actx)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// finishSending stops new sends and waits until every sender has its last
// id acknowledged (or gives up at the deadline, leaving it unknown).
func (w *workload) finishSending(within time.Duration) {
	w.t.Helper()
	close(w.stopSend)
	done := make(chan struct{})
	go func() {
		w.senders.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(within):
		close(w.giveUp)
		<-done
		w.t.Errorf("senders did not get their last sends acknowledged within %s", within)
	}
}

// drain waits until every acknowledged id was delivered and acked by its
// consumer, then stops the consumers.
func (w *workload) drain(within time.Duration) {
	w.t.Helper()
	deadline := time.Now().Add(within)
	for {
		missing := 0
		var first string
		w.mu.Lock()
		for _, id := range w.h.Acked() {
			if !w.delivered[id] {
				if missing == 0 {
					first = id
				}
				missing++
			}
		}
		w.mu.Unlock()
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			w.t.Errorf("drain: %d acknowledged ids never delivered after %s (first %s)", missing, within, first)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	w.stop()
}

func (w *workload) stop() {
	select {
	case <-w.stopRead:
	default:
		close(w.stopRead)
	}
	select {
	case <-w.stopSend:
	default:
		close(w.stopSend)
	}
	select {
	case <-w.giveUp:
	default:
		close(w.giveUp)
	}
	w.senders.Wait()
	w.consumers.Wait()
}
