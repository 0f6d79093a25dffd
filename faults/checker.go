package faults

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// MsgID is the unique id of a send: sender:seq. It travels as the
// message id (and so, scoped by sender, as Nats-Msg-Id); a retry reuses it.
func MsgID(sender string, seq uint64) string {
	return sender + ":" + strconv.FormatUint(seq, 10)
}

// ParseMsgID splits a MsgID; ok is false for anything else.
func ParseMsgID(id string) (sender string, seq uint64, ok bool) {
	i := strings.LastIndexByte(id, ':')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.ParseUint(id[i+1:], 10, 64)
	if err != nil || n == 0 {
		return "", 0, false
	}
	return id[:i], n, true
}

// Digest is the content fingerprint the checker compares: what was sent
// against what was read.
func Digest(payload []byte) string {
	sum := sha256.Sum256(payload)
	return hex.EncodeToString(sum[:8])
}

// ReadKind says how a message was read.
type ReadKind int

// Read kinds.
const (
	// Stored is one copy found by a scan of the whole stream: each stored
	// copy is read once, so two reads of an id at two sequences are two
	// stored copies.
	Stored ReadKind = iota
	// Delivered is one delivery to a consumer; the same stored copy
	// delivered twice is a redelivery, not a duplicate.
	Delivered
)

// String returns "stored" or "delivered".
func (k ReadKind) String() string {
	if k == Stored {
		return "stored"
	}
	return "delivered"
}

// Read is a message seen by a reader.
type Read struct {
	Kind ReadKind
	// Mailbox is where it was read (a recipient).
	Mailbox string
	// ID is the message id found in the message, whatever it is.
	ID string
	// Seq is the stream sequence of the copy.
	Seq uint64
	// Digest is Digest of the payload read.
	Digest string
}

// send is everything the history knows about one id.
type send struct {
	id       string
	sender   string
	seq      uint64
	mailbox  string
	digest   string
	invoked  uint64 // logical time of the first attempt
	attempts int
	open     int    // attempts without an outcome yet
	acked    uint64 // logical time of the first ack; 0 = never acked
	ackSeqs  map[uint64]bool
	dupAcks  int
	unknown  int
	failed   int
}

// History records what the clients of a test attempted and what they saw,
// Jepsen style: every attempt of a send is invoked and then ends in an ack,
// a definite failure or an unknown (ambiguous) outcome; every read is
// recorded. Check compares both. A History is safe for concurrent use.
type History struct {
	mu    sync.Mutex
	clock uint64
	sends map[string]*send
	reads []Read
}

// NewHistory returns an empty history.
func NewHistory() *History {
	return &History{sends: map[string]*send{}}
}

func (h *History) tick() uint64 {
	h.clock++
	return h.clock
}

// Invoke records an attempt to send id to mailbox with payload. A retry
// invokes the same id again; its mailbox and payload must not change.
func (h *History) Invoke(mailbox, id string, payload []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.tick()
	s := h.sends[id]
	if s == nil {
		sender, seq, _ := ParseMsgID(id)
		s = &send{id: id, sender: sender, seq: seq, mailbox: mailbox, digest: Digest(payload), invoked: now, ackSeqs: map[uint64]bool{}}
		h.sends[id] = s
	}
	s.attempts++
	s.open++
}

func (h *History) complete(id string) *send {
	s := h.sends[id]
	if s == nil {
		// An outcome without an invoke is a bug of the test, not of the
		// system: record it so Check reports it as an unexpected ack.
		s = &send{id: id, ackSeqs: map[uint64]bool{}}
		h.sends[id] = s
	}
	if s.open > 0 {
		s.open--
	}
	return s
}

// Ack records that an attempt of id was acknowledged as stored at stream
// sequence seq; duplicate is the server's word that an earlier attempt
// stored it.
func (h *History) Ack(id string, seq uint64, duplicate bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.tick()
	s := h.complete(id)
	if s.acked == 0 {
		s.acked = now
	}
	s.ackSeqs[seq] = true
	if duplicate {
		s.dupAcks++
	}
}

// Fail records that an attempt of id definitely failed: the server refused
// it and stored nothing.
func (h *History) Fail(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tick()
	h.complete(id).failed++
}

// Unknown records an ambiguous attempt: a timeout or a lost connection,
// after which the message may or may not be stored.
func (h *History) Unknown(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tick()
	h.complete(id).unknown++
}

// Read records a message seen by a reader.
func (h *History) Read(r Read) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tick()
	h.reads = append(h.reads, r)
}

// Acked returns the ids acknowledged so far, sorted.
func (h *History) Acked() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for id, s := range h.sends {
		if s.acked != 0 {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// Key names one (sender, mailbox) pair, the unit of FIFO and of the
// lost-prefix/middle/postfix classification.
type Key struct {
	Sender, Mailbox string
}

// String returns sender->mailbox.
func (k Key) String() string { return k.Sender + "->" + k.Mailbox }

// KeyResult is the result for one (sender, mailbox).
type KeyResult struct {
	Attempted, Acked, Read int
	// LostPrefix are lost ids before the first id read, LostMiddle between
	// ids read, LostPostfix after the last id read (sorted by sender seq).
	LostPrefix, LostMiddle, LostPostfix []string
}

// Result is the verdict of Check. Valid is false when anything below the
// line "invalid" is non-empty.
type Result struct {
	Valid bool

	// Ids by final outcome: acked if any attempt was, else unknown if any
	// attempt was ambiguous or never ended, else failed.
	Attempted, Acked, Unknown, Failed int
	// Attempts counts every attempt, retries included.
	Attempts int
	// DupAcks counts acks the server flagged as duplicates of an earlier
	// attempt: retries it deduplicated.
	DupAcks int
	// ReadIDs counts the distinct ids read; StoredCopies the distinct
	// (id, seq) copies read; Deliveries the deliveries.
	ReadIDs, StoredCopies, Deliveries int
	// Recovered are unknown ids that turned up: stored although the client
	// never learned it.
	Recovered []string
	// Redelivered counts, per id, the deliveries of a stored copy after its
	// first: harmless for idempotent consumers.
	Redelivered map[string]int
	// Keys holds the per (sender, mailbox) results.
	Keys map[Key]*KeyResult

	// invalid:

	// Lost are acked ids never read.
	Lost []string
	// DuplicateStored maps ids stored more than once to their sequences.
	DuplicateStored map[string][]uint64
	// Unexpected are reads of ids nobody attempted (or not parseable).
	Unexpected []string
	// FailedRead are ids whose every attempt definitely failed, yet read.
	FailedRead []string
	// Misrouted are ids read in another mailbox than the one sent to.
	Misrouted []string
	// Corrupt are ids read with a payload different from the one sent.
	Corrupt []string
	// Reordered are FIFO violations per (sender, mailbox): "a>b" where a was
	// acked before b was attempted, yet b is stored before a.
	Reordered []string
	// AckedCopyMissing are acked ids whose acknowledged sequence was never
	// read although another copy was.
	AckedCopyMissing []string
}

// Check compares the history's sends with its reads. It is meant to run
// after the faults have stopped and a full drain: every acknowledged id
// must have been read by then.
func (h *History) Check() *Result {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := &Result{
		Redelivered:     map[string]int{},
		DuplicateStored: map[string][]uint64{},
		Keys:            map[Key]*KeyResult{},
	}

	type seen struct {
		seqs       map[uint64]int // seq -> deliveries (stored reads count 0)
		mailboxes  map[string]bool
		badDigest  bool
		firstStore uint64 // lowest sequence read
	}
	reads := map[string]*seen{}
	for _, rd := range h.reads {
		sn := reads[rd.ID]
		if sn == nil {
			sn = &seen{seqs: map[uint64]int{}, mailboxes: map[string]bool{}}
			reads[rd.ID] = sn
		}
		if _, ok := sn.seqs[rd.Seq]; !ok {
			sn.seqs[rd.Seq] = 0
			r.StoredCopies++
		}
		if rd.Kind == Delivered {
			sn.seqs[rd.Seq]++
			r.Deliveries++
		}
		sn.mailboxes[rd.Mailbox] = true
		if s := h.sends[rd.ID]; s != nil && s.digest != "" && rd.Digest != s.digest {
			sn.badDigest = true
		}
		if sn.firstStore == 0 || rd.Seq < sn.firstStore {
			sn.firstStore = rd.Seq
		}
	}
	r.ReadIDs = len(reads)

	for id, sn := range reads {
		s := h.sends[id]
		if s == nil || s.attempts == 0 {
			r.Unexpected = append(r.Unexpected, id)
			continue
		}
		if len(sn.seqs) > 1 {
			seqs := make([]uint64, 0, len(sn.seqs))
			for q := range sn.seqs {
				seqs = append(seqs, q)
			}
			sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
			r.DuplicateStored[id] = seqs
		}
		for _, n := range sn.seqs {
			if n > 1 {
				r.Redelivered[id] += n - 1
			}
		}
		for mb := range sn.mailboxes {
			if mb != s.mailbox {
				r.Misrouted = append(r.Misrouted, id)
				break
			}
		}
		if sn.badDigest {
			r.Corrupt = append(r.Corrupt, id)
		}
	}

	// Final outcomes and per-key classification.
	byKey := map[Key][]*send{}
	for id, s := range h.sends {
		if s.attempts == 0 {
			if s.acked != 0 {
				r.Unexpected = append(r.Unexpected, id+" (acked, never attempted)")
			}
			continue
		}
		r.Attempted++
		r.Attempts += s.attempts
		r.DupAcks += s.dupAcks
		sn := reads[id]
		switch {
		case s.acked != 0:
			r.Acked++
			if sn == nil {
				r.Lost = append(r.Lost, id)
			} else {
				found := false
				for q := range s.ackSeqs {
					if _, ok := sn.seqs[q]; ok {
						found = true
					}
				}
				if !found {
					r.AckedCopyMissing = append(r.AckedCopyMissing, id)
				}
			}
		case s.unknown > 0 || s.open > 0:
			r.Unknown++
			if sn != nil {
				r.Recovered = append(r.Recovered, id)
			}
		default:
			r.Failed++
			if sn != nil {
				r.FailedRead = append(r.FailedRead, id)
			}
		}
		k := Key{s.sender, s.mailbox}
		byKey[k] = append(byKey[k], s)
	}

	for k, sends := range byKey {
		kr := &KeyResult{}
		r.Keys[k] = kr
		sort.Slice(sends, func(i, j int) bool { return sends[i].seq < sends[j].seq })
		var firstRead, lastRead = -1, -1
		for i, s := range sends {
			kr.Attempted++
			if s.acked != 0 {
				kr.Acked++
			}
			if reads[s.id] != nil {
				kr.Read++
				if firstRead < 0 {
					firstRead = i
				}
				lastRead = i
			}
		}
		for i, s := range sends {
			if s.acked == 0 || reads[s.id] != nil {
				continue
			}
			switch {
			case firstRead < 0 || i < firstRead:
				kr.LostPrefix = append(kr.LostPrefix, s.id)
			case i > lastRead:
				kr.LostPostfix = append(kr.LostPostfix, s.id)
			default:
				kr.LostMiddle = append(kr.LostMiddle, s.id)
			}
		}
		// FIFO: in stream order, no copy may come before one that was acked
		// before it was even attempted.
		var stored []*send
		for _, s := range sends {
			if reads[s.id] != nil {
				stored = append(stored, s)
			}
		}
		sort.Slice(stored, func(i, j int) bool { return reads[stored[i].id].firstStore < reads[stored[j].id].firstStore })
		var maxInv *send
		for _, s := range stored {
			if maxInv != nil && s.acked != 0 && maxInv.invoked > s.acked {
				r.Reordered = append(r.Reordered, fmt.Sprintf("%s>%s", s.id, maxInv.id))
			}
			if maxInv == nil || s.invoked > maxInv.invoked {
				maxInv = s
			}
		}
	}

	for _, l := range [][]string{r.Lost, r.Unexpected, r.FailedRead, r.Misrouted, r.Corrupt, r.Reordered, r.AckedCopyMissing, r.Recovered} {
		sort.Strings(l)
	}
	r.Valid = len(r.Lost) == 0 && len(r.DuplicateStored) == 0 && len(r.Unexpected) == 0 &&
		len(r.FailedRead) == 0 && len(r.Misrouted) == 0 && len(r.Corrupt) == 0 &&
		len(r.Reordered) == 0 && len(r.AckedCopyMissing) == 0
	return r
}

// LostPrefix counts the lost ids, over all keys, sent before the first id
// read of their (sender, mailbox).
func (r *Result) LostPrefix() int {
	return r.sumKeys(func(k *KeyResult) []string { return k.LostPrefix })
}

// LostMiddle counts the lost ids, over all keys, sent between two ids read:
// a hole in the middle of a FIFO.
func (r *Result) LostMiddle() int {
	return r.sumKeys(func(k *KeyResult) []string { return k.LostMiddle })
}

// LostPostfix counts the lost ids, over all keys, sent after the last id
// read of their (sender, mailbox): a lost tail.
func (r *Result) LostPostfix() int {
	return r.sumKeys(func(k *KeyResult) []string { return k.LostPostfix })
}

func (r *Result) sumKeys(f func(*KeyResult) []string) int {
	n := 0
	for _, k := range r.Keys {
		n += len(f(k))
	}
	return n
}

// RedeliveryCount is the number of redeliveries over all ids.
func (r *Result) RedeliveryCount() int {
	n := 0
	for _, c := range r.Redelivered {
		n += c
	}
	return n
}

// Summary is one line with every count, for test logs and the README.
func (r *Result) Summary() string {
	return fmt.Sprintf("valid=%t attempted=%d attempts=%d acked=%d unknown=%d failed=%d dup-acks=%d read=%d copies=%d deliveries=%d "+
		"lost=%d (prefix %d, middle %d, postfix %d) duplicate-stored=%d redelivered=%d recovered=%d unexpected=%d "+
		"failed-read=%d misrouted=%d corrupt=%d reordered=%d acked-copy-missing=%d",
		r.Valid, r.Attempted, r.Attempts, r.Acked, r.Unknown, r.Failed, r.DupAcks, r.ReadIDs, r.StoredCopies, r.Deliveries,
		len(r.Lost), r.LostPrefix(), r.LostMiddle(), r.LostPostfix(), len(r.DuplicateStored), r.RedeliveryCount(), len(r.Recovered),
		len(r.Unexpected), len(r.FailedRead), len(r.Misrouted), len(r.Corrupt), len(r.Reordered), len(r.AckedCopyMissing))
}

// Err returns nil for a valid result, else an error listing the first few
// offenders of each kind.
func (r *Result) Err() error {
	if r.Valid {
		return nil
	}
	var b strings.Builder
	b.WriteString("history invalid: " + r.Summary())
	list := func(name string, ids []string) {
		if len(ids) == 0 {
			return
		}
		if len(ids) > 10 {
			ids = append(ids[:10:10], "…")
		}
		fmt.Fprintf(&b, "\n  %s: %s", name, strings.Join(ids, " "))
	}
	list("lost", r.Lost)
	var dups []string
	for id, seqs := range r.DuplicateStored {
		dups = append(dups, fmt.Sprintf("%s@%v", id, seqs))
	}
	sort.Strings(dups)
	list("duplicate-stored", dups)
	list("unexpected", r.Unexpected)
	list("failed-read", r.FailedRead)
	list("misrouted", r.Misrouted)
	list("corrupt", r.Corrupt)
	list("reordered", r.Reordered)
	list("acked-copy-missing", r.AckedCopyMissing)
	return fmt.Errorf("%s", b.String())
}
