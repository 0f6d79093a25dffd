package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/internal/atomicfile"
)

// ScrubFile is where `teambus bus scrub` records its position, in the
// node directory, so that a scrub that was interrupted continues where it
// stopped. It is removed when a scrub completes.
const ScrubFile = "bus.scrub"

// ScrubConfig says what Scrub reads and where it keeps its position.
type ScrubConfig struct {
	// Stream limits the scrub to one stream teambus never deletes from;
	// empty: all of them.
	Stream string
	// PositionFile records the position of the scrub (ScrubFile in the
	// node directory), rewritten every second; a scrub of the same
	// streams continues from it. Empty: the scrub starts from the
	// beginning and records nothing.
	PositionFile string
	// Progress, when set, is called now and then with the progress.
	Progress func(ScrubProgress)
}

// ScrubProgress is how far a scrub is, over all its streams.
type ScrubProgress struct {
	Stream string
	// Done counts the sequences read, by this run and the runs it
	// continues, of Total.
	Done, Total uint64
}

// ScrubResult is what a scrub read and found.
type ScrubResult struct {
	Streams int `json:"streams"`
	// Read counts the sequences this run read; a continued scrub
	// does not read again what the interrupted one did.
	Read uint64 `json:"read"`
	// Total counts the sequences of all the streams scrubbed.
	Total uint64 `json:"total"`
	// Resumed is set when the run continued an interrupted one.
	Resumed bool `json:"resumed"`
	// Damage is what the streams lost, the interrupted runs' findings
	// included, as the start-up check reports it.
	Damage []StoreDamage `json:"damage"`
}

// scrubPosition is the content of ScrubFile.
type scrubPosition struct {
	Stream  string                `json:"stream,omitempty"`
	Streams map[string]*scrubMark `json:"streams"`
}

// scrubMark is a stream's position in a scrub: the next sequence to read
// of 1..Last (Last as it was when the scrub began) and the losses found.
type scrubMark struct {
	Next uint64     `json:"next"`
	Last uint64     `json:"last"`
	Lost []seqRange `json:"lost,omitempty"`
}

// Scrub reads every message of the streams teambus never deletes from
// (or of cfg.Stream), in sequence order, and reports the sequences they
// lost: the full verification of old data that the start-up check leaves
// out. It is resumable: with cfg.PositionFile it records how far it got
// and a later scrub of the same streams continues there. It runs beside a
// working node; messages stored after it began are not looked at.
func Scrub(ctx context.Context, js jetstream.JetStream, cfg ScrubConfig) (ScrubResult, error) {
	var res ScrubResult
	names, err := neverDeleteStreams(ctx, js)
	if err != nil {
		return res, err
	}
	if cfg.Stream != "" {
		if !neverDeletes(cfg.Stream) {
			return res, teambus.Invalidf("scrub: stream %q is not one teambus never deletes from (a mailbox or an event log)", cfg.Stream)
		}
		found := false
		for _, n := range names {
			found = found || n == cfg.Stream
		}
		if !found {
			return res, teambus.NotFoundf("scrub: stream %q not found", cfg.Stream)
		}
		names = []string{cfg.Stream}
	}
	pos, err := readScrubPosition(cfg.PositionFile)
	if err != nil {
		return res, err
	}
	if pos != nil && pos.Stream == cfg.Stream {
		res.Resumed = true
	} else {
		pos = &scrubPosition{Stream: cfg.Stream, Streams: map[string]*scrubMark{}}
	}
	streams := map[string]jetstream.Stream{}
	var done uint64
	for _, name := range names {
		st, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return res, fmt.Errorf("scrub stream %s: %w", name, err)
		}
		streams[name] = st
		if pos.Streams[name] == nil {
			pos.Streams[name] = &scrubMark{Next: 1, Last: st.CachedInfo().State.LastSeq}
		}
		m := pos.Streams[name]
		res.Total += m.Last
		done += min(m.Next, m.Last+1) - 1
	}
	res.Streams = len(streams)
	saved := time.Now()
	save := func(force bool) error {
		if cfg.PositionFile == "" || (!force && time.Since(saved) < time.Second) {
			return nil
		}
		saved = time.Now()
		if err := atomicfile.WriteJSON(cfg.PositionFile, pos, 0o600); err != nil {
			return fmt.Errorf("scrub: record position: %w", err)
		}
		return nil
	}
	for _, name := range names {
		st, m := streams[name], pos.Streams[name]
		if st == nil || m == nil {
			continue
		}
		base, from, prev := done, m.Next, m.Lost[:len(m.Lost):len(m.Lost)]
		lost, err := readRange(ctx, st, m.Next, m.Last, func(next uint64, lost []seqRange) {
			m.Next, m.Lost = next, append(prev, lost...)
			done = base + next - from
			if cfg.Progress != nil {
				cfg.Progress(ScrubProgress{Stream: name, Done: done, Total: res.Total})
			}
			if err := save(false); err != nil {
				return // tried again at the next step and at the end
			}
		})
		if m.Next > from {
			res.Read += m.Next - from
		}
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue // deleted meanwhile
		}
		m.Lost = append(prev, lost...)
		if err != nil {
			if serr := save(true); serr != nil {
				return res, errors.Join(fmt.Errorf("scrub stream %s: %w", name, err), serr)
			}
			return res, fmt.Errorf("scrub stream %s: %w", name, err)
		}
		// What the stream's state says it lost, within what was scrubbed.
		_, sl, err := stateLosses(ctx, st)
		if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return res, fmt.Errorf("scrub stream %s: %w", name, err)
		}
		for _, r := range sl {
			if r.From <= m.Last {
				m.Lost = append(m.Lost, seqRange{r.From, min(r.To, m.Last)})
			}
		}
		m.Next = m.Last + 1
		if err := save(true); err != nil {
			return res, err
		}
	}
	for _, name := range names {
		m := pos.Streams[name]
		if m == nil {
			continue
		}
		d := StoreDamage{Stream: name}
		mergeLosses(&d, m.Lost)
		if d.Lost > 0 {
			res.Damage = append(res.Damage, d)
		}
	}
	if cfg.PositionFile != "" {
		if err := os.Remove(cfg.PositionFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			return res, fmt.Errorf("scrub: remove position: %w", err)
		}
	}
	return res, nil
}

func readScrubPosition(path string) (*scrubPosition, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("scrub: read position: %w", err)
	}
	var p scrubPosition
	if err := json.Unmarshal(b, &p); err != nil || p.Streams == nil {
		return nil, nil // damaged: start again from the beginning
	}
	return &p, nil
}
