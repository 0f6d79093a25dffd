package kv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/teambus/teambus/bus"
)

// Direct reads of a whole bucket.
//
// A KV watch creates a consumer on the bucket's stream, and whoever may
// create a consumer may also point its deliveries at any subject of the
// account. A member credential therefore can not create consumers, and
// whole-bucket reads go through the stream's direct get API instead
// ($JS.API.DIRECT.GET.KV_<bucket>), which a permission can confine to one
// bucket:
//
//   - multi_last returns the last message of every key in one isolated
//     read, up to 1024 keys, paged by start sequence when it exceeds the
//     server's byte limit;
//   - a bucket with more keys is scanned in batches of next_by_subj, every
//     revision in sequence order, the last one of each key winning.

// directBatch is the batch size of a bucket scan.
const directBatch = 1024

// entry is one key's last value read directly.
type entry struct {
	key     string
	value   []byte
	rev     uint64
	created time.Time // server time of the write
}

// errTooMany is the server's answer to a multi_last over more than 1024
// subjects.
var errTooMany = errors.New("too many results")

// readBucket calls fn with the last value of every live key of bucket, in
// no particular order.
func readBucket(ctx context.Context, nc *nats.Conn, bucket string, fn func(entry) error) error {
	_, err := readBucketAt(ctx, nc, bucket, fn)
	return err
}

// readBucketAt is readBucket that also returns the stream sequence the
// read is consistent at: every write up to it is seen, none after it. It
// is 0 when the bucket was too large for one isolated read (a scan).
// With filters it reads only the keys they match (readLastAt).
func readBucketAt(ctx context.Context, nc *nats.Conn, bucket string, fn func(entry) error, filters ...string) (uint64, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	last, upTo, err := readLastAt(ctx, nc, bucket, filters...)
	if errors.Is(err, errTooMany) {
		upTo = 0
		last, err = scan(ctx, nc, bucket)
	}
	if err != nil {
		return 0, err
	}
	for _, e := range last {
		if err := fn(e); err != nil {
			return 0, err
		}
	}
	return upTo, nil
}

type directRequest struct {
	Seq        uint64   `json:"seq,omitempty"`
	NextBySubj string   `json:"next_by_subj,omitempty"`
	Batch      int      `json:"batch,omitempty"`
	MultiLast  []string `json:"multi_last,omitempty"`
	UpToSeq    uint64   `json:"up_to_seq,omitempty"`
}

// readLast reads the last value of every key with multi_last requests.
func readLast(ctx context.Context, nc *nats.Conn, bucket string) ([]entry, error) {
	out, _, err := readLastAt(ctx, nc, bucket)
	return out, err
}

// readLastAt is readLast that also returns the stream sequence the pages
// were read up to (the server reads each page isolated from writes). With
// filters (subjects, wildcards allowed) it reads only the keys they match;
// without, every key.
func readLastAt(ctx context.Context, nc *nats.Conn, bucket string, filters ...string) ([]entry, uint64, error) {
	if len(filters) == 0 {
		filters = []string{"$KV." + bucket + ".>"}
	}
	var (
		out  []entry
		from uint64
		upTo uint64
	)
	for {
		req := directRequest{MultiLast: filters, Seq: from, UpToSeq: upTo}
		page, eob, err := direct(ctx, nc, bucket, req)
		if err != nil {
			return nil, 0, err
		}
		for _, e := range page {
			if e.live {
				out = append(out, e.entry)
			}
		}
		if upTo == 0 {
			upTo = eob.upTo
		}
		if eob.pending == 0 || len(page) == 0 {
			return out, upTo, nil
		}
		// More than the server sends at once: continue after the last
		// sequence, at the same upper bound.
		from = page[len(page)-1].rev + 1
	}
}

// scan reads every revision of the bucket in batches and keeps the last of
// each key.
func scan(ctx context.Context, nc *nats.Conn, bucket string) ([]entry, error) {
	last := map[string]directEntry{}
	var from uint64
	for {
		req := directRequest{Seq: from, NextBySubj: "$KV." + bucket + ".>", Batch: directBatch}
		page, eob, err := direct(ctx, nc, bucket, req)
		if err != nil {
			return nil, err
		}
		for _, e := range page {
			last[e.key] = e
		}
		if eob.pending == 0 || len(page) == 0 {
			break
		}
		from = page[len(page)-1].rev + 1
	}
	out := make([]entry, 0, len(last))
	for _, e := range last {
		if e.live {
			out = append(out, e.entry)
		}
	}
	return out, nil
}

type directEntry struct {
	entry
	live bool // not a delete or purge marker
}

type endOfBatch struct {
	pending uint64
	upTo    uint64
}

// direct sends one direct get request and collects its answer up to the
// end-of-batch message. No result is an empty page.
func direct(ctx context.Context, nc *nats.Conn, bucket string, req directRequest) ([]directEntry, endOfBatch, error) {
	var eob endOfBatch
	body, err := json.Marshal(req)
	if err != nil {
		return nil, eob, err
	}
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, eob, fmt.Errorf("read bucket %s: %w", bucket, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest("$JS.API.DIRECT.GET.KV_"+bucket, inbox, body); err != nil {
		return nil, eob, fmt.Errorf("read bucket %s: %w", bucket, err)
	}
	prefix := "$KV." + bucket + "."
	var page []directEntry
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return nil, eob, fmt.Errorf("read bucket %s: %w", bucket, err)
		}
		if status := m.Header.Get("Status"); status != "" {
			switch status {
			case "204": // end of batch
				eob.pending, _ = strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
				eob.upTo, _ = strconv.ParseUint(m.Header.Get("Nats-UpTo-Sequence"), 10, 64)
				return page, eob, nil
			case "404": // no (more) messages
				return page, eob, nil
			case "413":
				return nil, eob, errTooMany
			case "503":
				return nil, eob, noResponders(ctx, nc, bucket)
			default:
				return nil, eob, fmt.Errorf("read bucket %s: status %s %s", bucket, status, m.Header.Get("Description"))
			}
		}
		subj := m.Header.Get(jetstream.SubjectHeader)
		seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		key, ok := strings.CutPrefix(subj, prefix)
		if err != nil || !ok {
			return nil, eob, fmt.Errorf("read bucket %s: unexpected message %q seq %q", bucket, subj, m.Header.Get(jetstream.SequenceHeader))
		}
		created, _ := time.Parse(time.RFC3339Nano, m.Header.Get("Nats-Time-Stamp"))
		// Deletes, purges and the markers of keys expired by their TTL.
		op := m.Header.Get("KV-Operation")
		live := op != "DEL" && op != "PURGE" && m.Header.Get(jetstream.MarkerReasonHeader) == ""
		page = append(page, directEntry{entry: entry{key: key, value: m.Data, rev: seq, created: created}, live: live})
	}
}

// noResponders is the error of a direct read that no server answered
// (status 503): the bucket is missing only when the server says its stream
// does not exist; otherwise no replica could answer, as while a leader is
// elected, which is transient (bus.ErrNoLeader, exit 1), not "not found".
func noResponders(ctx context.Context, nc *nats.Conn, bucket string) error {
	if js, err := jetstream.New(nc); err == nil && bus.StreamMissing(ctx, js, "KV_"+bucket) {
		return fmt.Errorf("read bucket %s: %w", bucket, jetstream.ErrBucketNotFound)
	}
	return bus.NoLeaderf("read bucket %s: no server answered (a leader is being elected?)", bucket)
}
