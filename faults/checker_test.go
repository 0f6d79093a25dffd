package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/node/nodetest"
)

func TestMsgID_RoundTrip(t *testing.T) {
	for _, tc := range []struct {
		sender string
		seq    uint64
	}{{"s1", 1}, {"sender-2", 42}, {"a:b", 7}} {
		id := MsgID(tc.sender, tc.seq)
		s, n, ok := ParseMsgID(id)
		if !ok || s != tc.sender || n != tc.seq {
			t.Errorf("ParseMsgID(%q) = %q, %d, %t; want %q, %d", id, s, n, ok, tc.sender, tc.seq)
		}
	}
	for _, bad := range []string{"", "x", ":1", "s:", "s:0", "s:-1", "s:x"} {
		if _, _, ok := ParseMsgID(bad); ok {
			t.Errorf("ParseMsgID(%q) ok, want not", bad)
		}
	}
}

// payload is the body a test sender sends for id.
func payload(id string) []byte { return []byte("body of " + id) }

// op is one step of a synthetic history.
type op struct {
	kind    string // invoke, ack, fail, unknown, read
	mailbox string
	id      string
	seq     uint64
	dup     bool
	rk      ReadKind
	body    []byte
}

// validHistory builds a clean history: senders send seqs 1..n in order to
// mailboxes round robin, each acked at the next stream sequence, then a
// stored scan and one delivery of every copy.
func validHistory(senders, mailboxes, n int) []op {
	var ops []op
	var seq uint64
	type stored struct {
		mb, id string
		seq    uint64
	}
	var copies []stored
	for i := 1; i <= n; i++ {
		for s := 0; s < senders; s++ {
			id := MsgID(fmt.Sprintf("s%d", s), uint64(i))
			mb := fmt.Sprintf("m%d", (i+s)%mailboxes)
			seq++
			ops = append(ops, op{kind: "invoke", mailbox: mb, id: id, body: payload(id)}, op{kind: "ack", id: id, seq: seq})
			copies = append(copies, stored{mb, id, seq})
		}
	}
	for _, c := range copies {
		ops = append(ops, op{kind: "read", rk: Stored, mailbox: c.mb, id: c.id, seq: c.seq, body: payload(c.id)})
	}
	for _, c := range copies {
		ops = append(ops, op{kind: "read", rk: Delivered, mailbox: c.mb, id: c.id, seq: c.seq, body: payload(c.id)})
	}
	return ops
}

func play(ops []op) *Result {
	h := NewHistory()
	for _, o := range ops {
		switch o.kind {
		case "invoke":
			h.Invoke(o.mailbox, o.id, o.body)
		case "ack":
			h.Ack(o.id, o.seq, o.dup)
		case "fail":
			h.Fail(o.id)
		case "unknown":
			h.Unknown(o.id)
		case "read":
			h.Read(Read{Kind: o.rk, Mailbox: o.mailbox, ID: o.id, Seq: o.seq, Digest: Digest(o.body)})
		}
	}
	return h.Check()
}

// reads returns the indexes of the read ops of id.
func readsOf(ops []op, id string) []int {
	var out []int
	for i, o := range ops {
		if o.kind == "read" && o.id == id {
			out = append(out, i)
		}
	}
	return out
}

func without(ops []op, drop []int) []op {
	skip := map[int]bool{}
	for _, i := range drop {
		skip[i] = true
	}
	var out []op
	for i, o := range ops {
		if !skip[i] {
			out = append(out, o)
		}
	}
	return out
}

func TestChecker_ValidHistory(t *testing.T) {
	r := play(validHistory(3, 2, 20))
	if !r.Valid {
		t.Fatalf("valid history judged invalid: %v", r.Err())
	}
	if r.Attempted != 60 || r.Acked != 60 || r.ReadIDs != 60 || r.StoredCopies != 60 || r.Deliveries != 60 {
		t.Errorf("counts: %s", r.Summary())
	}
	if len(r.Keys) != 6 {
		t.Errorf("%d keys, want 6 (3 senders x 2 mailboxes)", len(r.Keys))
	}
	if r.Err() != nil {
		t.Errorf("Err() = %v for a valid result", r.Err())
	}
}

// TestChecker_Flags feeds the checker broken histories: each must be
// flagged in its category and judged invalid (or, for the allowed
// anomalies, judged valid but counted).
func TestChecker_Flags(t *testing.T) {
	base := validHistory(2, 1, 10)
	// s0 sends to m{(i+0)%1} = m0; ids s0:1..s0:10, s1:1..s1:10.
	tests := []struct {
		name  string
		ops   func() []op
		valid bool
		check func(r *Result) error
	}{
		{"dropped middle", func() []op { return without(base, readsOf(base, "s0:5")) }, false, func(r *Result) error {
			if len(r.Lost) != 1 || r.Lost[0] != "s0:5" || r.LostMiddle() != 1 || r.LostPrefix() != 0 || r.LostPostfix() != 0 {
				return fmt.Errorf("lost %v, middle %d", r.Lost, r.LostMiddle())
			}
			return nil
		}},
		{"dropped first", func() []op { return without(base, readsOf(base, "s1:1")) }, false, func(r *Result) error {
			if r.LostPrefix() != 1 || len(r.Lost) != 1 {
				return fmt.Errorf("prefix %d lost %v", r.LostPrefix(), r.Lost)
			}
			return nil
		}},
		{"dropped last two", func() []op {
			return without(base, append(readsOf(base, "s1:9"), readsOf(base, "s1:10")...))
		}, false, func(r *Result) error {
			if r.LostPostfix() != 2 || len(r.Lost) != 2 {
				return fmt.Errorf("postfix %d lost %v", r.LostPostfix(), r.Lost)
			}
			return nil
		}},
		{"reordered", func() []op {
			ops := append([]op(nil), base...)
			// s0:3 and s0:4 swap their stored positions.
			a, b := readsOf(ops, "s0:3"), readsOf(ops, "s0:4")
			sa, sb := ops[a[0]].seq, ops[b[0]].seq
			for _, i := range a {
				ops[i].seq = sb
			}
			for _, i := range b {
				ops[i].seq = sa
			}
			return ops
		}, false, func(r *Result) error {
			if len(r.Reordered) == 0 {
				return fmt.Errorf("no reorder flagged")
			}
			return nil
		}},
		{"duplicated in storage", func() []op {
			return append(append([]op(nil), base...), op{kind: "read", rk: Stored, mailbox: "m0", id: "s0:2", seq: 999, body: payload("s0:2")})
		}, false, func(r *Result) error {
			if seqs := r.DuplicateStored["s0:2"]; len(seqs) != 2 || seqs[1] != 999 {
				return fmt.Errorf("duplicate-stored %v", r.DuplicateStored)
			}
			if r.RedeliveryCount() != 0 {
				return fmt.Errorf("a stored duplicate counted as redelivery: %v", r.Redelivered)
			}
			return nil
		}},
		{"unexpected value", func() []op {
			return append(append([]op(nil), base...), op{kind: "read", rk: Stored, mailbox: "m0", id: "ghost:1", seq: 500, body: []byte("boo")})
		}, false, func(r *Result) error {
			if len(r.Unexpected) != 1 || r.Unexpected[0] != "ghost:1" {
				return fmt.Errorf("unexpected %v", r.Unexpected)
			}
			return nil
		}},
		{"unparseable id", func() []op {
			return append(append([]op(nil), base...), op{kind: "read", rk: Delivered, mailbox: "m0", id: "", seq: 501})
		}, false, func(r *Result) error {
			if len(r.Unexpected) != 1 {
				return fmt.Errorf("unexpected %v", r.Unexpected)
			}
			return nil
		}},
		{"corrupt payload", func() []op {
			ops := append([]op(nil), base...)
			ops[readsOf(ops, "s1:3")[0]].body = []byte("bit flipped")
			return ops
		}, false, func(r *Result) error {
			if len(r.Corrupt) != 1 || r.Corrupt[0] != "s1:3" {
				return fmt.Errorf("corrupt %v", r.Corrupt)
			}
			return nil
		}},
		{"misrouted", func() []op {
			ops := append([]op(nil), base...)
			ops[readsOf(ops, "s1:4")[1]].mailbox = "m9"
			return ops
		}, false, func(r *Result) error {
			if len(r.Misrouted) != 1 {
				return fmt.Errorf("misrouted %v", r.Misrouted)
			}
			return nil
		}},
		{"failed but read", func() []op {
			return append(append([]op(nil), base...),
				op{kind: "invoke", mailbox: "m0", id: "s0:11", body: payload("s0:11")}, op{kind: "fail", id: "s0:11"},
				op{kind: "read", rk: Stored, mailbox: "m0", id: "s0:11", seq: 600, body: payload("s0:11")})
		}, false, func(r *Result) error {
			if len(r.FailedRead) != 1 || r.Failed != 1 {
				return fmt.Errorf("failed-read %v failed %d", r.FailedRead, r.Failed)
			}
			return nil
		}},
		{"acked copy missing", func() []op {
			ops := append([]op(nil), base...)
			for _, i := range readsOf(ops, "s0:7") {
				ops[i].seq = 700
			}
			return ops
		}, false, func(r *Result) error {
			if len(r.AckedCopyMissing) != 1 {
				return fmt.Errorf("acked-copy-missing %v", r.AckedCopyMissing)
			}
			return nil
		}},
		{"redelivered is allowed", func() []op {
			ops := append([]op(nil), base...)
			return append(ops, ops[readsOf(ops, "s0:6")[1]], ops[readsOf(ops, "s0:6")[1]])
		}, true, func(r *Result) error {
			if r.Redelivered["s0:6"] != 2 || len(r.DuplicateStored) != 0 {
				return fmt.Errorf("redelivered %v duplicate-stored %v", r.Redelivered, r.DuplicateStored)
			}
			return nil
		}},
		{"unknown recovered is allowed", func() []op {
			return append(append([]op(nil), base...),
				op{kind: "invoke", mailbox: "m0", id: "s1:11", body: payload("s1:11")}, op{kind: "unknown", id: "s1:11"},
				op{kind: "read", rk: Stored, mailbox: "m0", id: "s1:11", seq: 800, body: payload("s1:11")})
		}, true, func(r *Result) error {
			if len(r.Recovered) != 1 || r.Unknown != 1 {
				return fmt.Errorf("recovered %v unknown %d", r.Recovered, r.Unknown)
			}
			return nil
		}},
		{"unknown never stored is allowed", func() []op {
			return append(append([]op(nil), base...),
				op{kind: "invoke", mailbox: "m0", id: "s1:11", body: payload("s1:11")}) // never completed
		}, true, func(r *Result) error {
			if r.Unknown != 1 || len(r.Lost) != 0 {
				return fmt.Errorf("unknown %d lost %v", r.Unknown, r.Lost)
			}
			return nil
		}},
		{"retried then acked as duplicate", func() []op {
			ops := append([]op(nil), base...)
			return append(ops, op{kind: "invoke", mailbox: "m0", id: "s0:1", body: payload("s0:1")}, op{kind: "ack", id: "s0:1", seq: 1, dup: true})
		}, true, func(r *Result) error {
			if r.DupAcks != 1 || r.Attempts != 21 {
				return fmt.Errorf("dup-acks %d attempts %d", r.DupAcks, r.Attempts)
			}
			return nil
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := play(tc.ops())
			if r.Valid != tc.valid {
				t.Errorf("valid = %t, want %t: %s", r.Valid, tc.valid, r.Summary())
			}
			if (r.Err() == nil) != tc.valid {
				t.Errorf("Err() = %v, want nil iff valid", r.Err())
			}
			if err := tc.check(r); err != nil {
				t.Errorf("%v\n%s", err, r.Summary())
			}
		})
	}
}

// TestChecker_Mutations breaks random valid histories in one way each and
// fails if the checker still calls any of them valid.
func TestChecker_Mutations(t *testing.T) {
	mutations := map[string]func(rng *rand.Rand, ops []op) []op{
		"drop": func(rng *rand.Rand, ops []op) []op {
			id := pickAcked(rng, ops)
			return without(ops, readsOf(ops, id))
		},
		"duplicate": func(rng *rand.Rand, ops []op) []op {
			id := pickAcked(rng, ops)
			r := ops[readsOf(ops, id)[0]]
			r.seq += 100000
			return append(ops, r)
		},
		"unexpected": func(rng *rand.Rand, ops []op) []op {
			return append(ops, op{kind: "read", rk: Stored, mailbox: "m0", id: MsgID("intruder", uint64(rng.IntN(100)+1)), seq: 99999, body: []byte("?")})
		},
		"reorder": func(rng *rand.Rand, ops []op) []op {
			// Swap the stored sequences of two acked sends of one sender to
			// one mailbox, sent one after the other.
			var keys [][2]string
			last := map[Key]string{}
			for _, o := range ops {
				if o.kind != "invoke" {
					continue
				}
				s, _, _ := ParseMsgID(o.id)
				k := Key{s, o.mailbox}
				if prev, ok := last[k]; ok {
					keys = append(keys, [2]string{prev, o.id})
				}
				last[k] = o.id
			}
			pair := keys[rng.IntN(len(keys))]
			ra, rb := readsOf(ops, pair[0]), readsOf(ops, pair[1])
			sa, sb := ops[ra[0]].seq, ops[rb[0]].seq
			for _, i := range ra {
				ops[i].seq = sb
			}
			for _, i := range rb {
				ops[i].seq = sa
			}
			// The ack sequences follow the copies: only the order is wrong.
			for i, o := range ops {
				if o.kind == "ack" && o.id == pair[0] {
					ops[i].seq = sb
				} else if o.kind == "ack" && o.id == pair[1] {
					ops[i].seq = sa
				}
			}
			return ops
		},
		"corrupt": func(rng *rand.Rand, ops []op) []op {
			id := pickAcked(rng, ops)
			ops[readsOf(ops, id)[0]].body = []byte("garbage")
			return ops
		},
	}
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, seed*7))
		base := validHistory(1+rng.IntN(4), 1+rng.IntN(3), 5+rng.IntN(30))
		if r := play(base); !r.Valid {
			t.Fatalf("seed %d: valid history judged invalid: %v", seed, r.Err())
		}
		for name, mutate := range mutations {
			ops := mutate(rng, append([]op(nil), base...))
			if r := play(ops); r.Valid {
				t.Errorf("seed %d: history with a %s judged valid: %s", seed, name, r.Summary())
			}
		}
	}
}

func pickAcked(rng *rand.Rand, ops []op) string {
	var ids []string
	for _, o := range ops {
		if o.kind == "ack" {
			ids = append(ids, o.id)
		}
	}
	return ids[rng.IntN(len(ids))]
}

func TestHistory_Concurrent(t *testing.T) {
	h := NewHistory()
	var wg sync.WaitGroup
	for s := 0; s < 8; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := uint64(1); i <= 200; i++ {
				id := MsgID(fmt.Sprintf("s%d", s), i)
				h.Invoke("m", id, payload(id))
				h.Ack(id, uint64(s)*1000+i, false)
				h.Read(Read{Kind: Delivered, Mailbox: "m", ID: id, Seq: uint64(s)*1000 + i, Digest: Digest(payload(id))})
			}
		}()
	}
	wg.Wait()
	if r := h.Check(); !r.Valid || r.Acked != 1600 || len(h.Acked()) != 1600 {
		t.Fatalf("concurrent history: %s", r.Summary())
	}
}

// TestChecker_SabotagedBus runs the checker against a real bus that the
// test sabotages: it deletes an acknowledged message, stores a second copy
// of another under a fresh Nats-Msg-Id, and stores one nobody sent. The
// checker must flag each; the untouched run must be valid.
func TestChecker_SabotagedBus(t *testing.T) {
	node := nodetest.NewServer(t)
	conn := nodetest.Connect(t, node)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mb := mailbox.NewMailbox(conn.JS, "sab", mailbox.MailboxConfig{})
	// A mailbox denies deleting messages; this one is made by hand so the
	// test can sabotage it.
	if _, err := conn.JS.CreateStream(ctx, jetstream.StreamConfig{Name: mb.Stream(), Subjects: []string{"tb.sab.mbx.>", "tb.sab.ctl.>", "tb.sab.held.>"}, Storage: jetstream.FileStorage, Duplicates: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	h := NewHistory()
	for i := uint64(1); i <= 30; i++ {
		id := MsgID("s1", i)
		m := &teambus.Message{ID: id, From: "s1", To: "m1", Type: teambus.MsgInfo, Body: string(payload(id))}
		h.Invoke("m1", id, []byte(m.Body))
		res, err := mb.Send(ctx, m, false)
		if err != nil {
			t.Fatal(err)
		}
		h.Ack(id, res.Seq, res.Duplicate)
	}
	if r := scanHistory(t, ctx, conn.JS, mb, h.clone()); !r.Valid {
		t.Fatalf("untouched bus judged invalid: %v", r.Err())
	}

	st, err := conn.JS.Stream(ctx, mb.Stream())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(ctx, 17); err != nil { // s1:17
		t.Fatal(err)
	}
	// A second stored copy of s1:5, as a broken dedupe would store it.
	copy5, _ := json.Marshal(teambus.Message{ID: "s1:5", From: "s1", To: "m1", Type: teambus.MsgInfo, Body: string(payload("s1:5"))})
	msg := nats.NewMsg("tb.sab.mbx.m1.info.s1")
	msg.Data = copy5
	msg.Header.Set(jetstream.MsgIDHeader, "other-id")
	if _, err := conn.JS.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	ghost, _ := json.Marshal(teambus.Message{ID: "ghost:1", From: "ghost", To: "m1", Type: teambus.MsgInfo, Body: "boo"})
	if _, err := conn.JS.Publish(ctx, "tb.sab.mbx.m1.info.ghost", ghost); err != nil {
		t.Fatal(err)
	}
	r := scanHistory(t, ctx, conn.JS, mb, h)
	if r.Valid {
		t.Fatalf("sabotaged bus judged valid: %s", r.Summary())
	}
	if len(r.Lost) != 1 || r.Lost[0] != "s1:17" || r.LostMiddle() != 1 {
		t.Errorf("lost %v (middle %d), want s1:17 in the middle", r.Lost, r.LostMiddle())
	}
	if len(r.DuplicateStored["s1:5"]) != 2 {
		t.Errorf("duplicate-stored %v, want s1:5 twice", r.DuplicateStored)
	}
	if len(r.Unexpected) != 1 || r.Unexpected[0] != "ghost:1" {
		t.Errorf("unexpected %v, want ghost:1", r.Unexpected)
	}
}

// clone copies a history, for checking it twice.
func (h *History) clone() *History {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := NewHistory()
	c.clock = h.clock
	for id, s := range h.sends {
		cs := *s
		cs.ackSeqs = map[uint64]bool{}
		for q := range s.ackSeqs {
			cs.ackSeqs[q] = true
		}
		c.sends[id] = &cs
	}
	c.reads = append(c.reads, h.reads...)
	return c
}

func scanHistory(t *testing.T, ctx context.Context, js jetstream.JetStream, mb *mailbox.Mailbox, h *History) *Result {
	t.Helper()
	if _, err := scanMailbox(ctx, js, mb.Stream(), h); err != nil {
		t.Fatal(err)
	}
	return h.Check()
}
