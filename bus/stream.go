package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/internal/jserr"
)

// TeamStream is what a team's mailbox (package mailbox) and event log
// (package eventlog) share: the team, the JetStream context and the
// stream's config. Mailbox and Events embed it.
type TeamStream struct {
	js   jetstream.JetStream
	team string
	// what names the stream in its description and in errors: "mailbox",
	// "event log".
	what string
	sc   jetstream.StreamConfig
}

// NewTeamStream returns team's stream prefix+team. sc holds the subjects
// and limits; the rest of the config is the same for the mailbox and the
// event log.
func NewTeamStream(js jetstream.JetStream, team, prefix, what string, sc jetstream.StreamConfig) TeamStream {
	sc.Name = prefix + team
	sc.Description = "teambus " + what + " of team " + team
	sc.Retention = jetstream.LimitsPolicy
	// A full stream refuses new messages, it never drops old ones.
	sc.Discard = jetstream.DiscardNew
	sc.MaxMsgs = -1
	sc.Storage = jetstream.FileStorage
	sc.AllowDirect = true
	// An audit stream: no message is ever deleted or purged, not even by
	// the operator; only deleting the team removes it.
	sc.DenyDelete = true
	sc.DenyPurge = true
	// Batch writes (SendBatch, AppendBatch): stored whole or not at all,
	// one ack and a few fsyncs per batch.
	sc.AllowAtomicPublish = true
	return TeamStream{js: js, team: team, what: what, sc: sc}
}

// StreamDefaults sets the defaults the mailbox and the event log share: a
// dedupe window of 10m and one replica.
func StreamDefaults(duplicates *time.Duration, replicas *int) {
	if *duplicates <= 0 {
		*duplicates = 10 * time.Minute
	}
	if *replicas <= 0 {
		*replicas = 1
	}
}

// Stream returns the name of the team's stream.
func (s *TeamStream) Stream() string { return s.sc.Name }

// JS returns the JetStream context the stream is used through.
func (s *TeamStream) JS() jetstream.JetStream { return s.js }

// Team returns the team whose stream it is.
func (s *TeamStream) Team() string { return s.team }

// StreamConfig returns the stream's config as Declare sends it.
func (s *TeamStream) StreamConfig() jetstream.StreamConfig { return s.sc }

// Declare creates or updates the team's stream with the configured limits.
// It is idempotent.
func (s *TeamStream) Declare(ctx context.Context) error {
	if err := teambus.ValidateID("team", s.team); err != nil {
		return err
	}
	if _, err := s.js.CreateOrUpdateStream(ctx, s.sc); err != nil {
		return teambus.Unavailablef("declare %s of team %s: %w", s.what, s.team, err)
	}
	return nil
}

// Delete removes the team's stream and its consumers; a stream already
// gone is no error.
func (s *TeamStream) Delete(ctx context.Context) error {
	if err := s.js.DeleteStream(ctx, s.Stream()); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return teambus.Unavailablef("delete %s of team %s: %w", s.what, s.team, err)
	}
	return nil
}

// Refusal words a publish the stream refused as the mailbox and the event
// log both do: too large, full, or no stream. item is what was published
// ("message", "event"), done what did not happen ("sent", "stored") and
// flag the flag of `teambus team set` that raises the stream's limit. A
// full stream is a teambus.ErrFull, a bus node out of room a
// teambus.ErrNoSpace: both permanent until someone acts, and the message
// says who and how. Any other error is nil.
func (s *TeamStream) Refusal(err error, item, done, flag string) error {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return nil
	}
	switch apiErr.ErrorCode {
	case jetstream.JSErrCodeStreamMessageExceedsMaximum:
		return teambus.Invalidf("%s too large for the %s of team %s: nothing was %s", item, s.what, s.team, done)
	case jserr.StreamStoreFailed:
		// On these streams (no message count limits, messages far
		// below the store's block size) the store refuses a write
		// for one reason: the stream is at its byte limit.
		limit := s.liveMaxBytes()
		return teambus.Fullf("team %s's %s is full (%s): nothing was %s; the operator raises it with `teambus team set %s %s %s`",
			s.team, s.what, Size(limit), done, s.team, flag, Size(2*limit))
	case jetstream.JSErrCodeStreamNotFound:
		return teambus.NotFoundf("team %s has no %s: create the team first", s.team, s.what)
	case jserr.StorageResourcesExceeded, jserr.AccountResourcesExceeded, jserr.InsufficientResources, jserr.MemoryResourcesExceeded:
		return NoSpace(s.team, item, done, apiErr.Description)
	}
	return nil
}

// NoSpace is the error of a write the bus node could not store for want
// of room of its own (why: what the node reports): the operator's
// problem, named as such.
func NoSpace(team, item, done, why string) error {
	return teambus.NoSpacef("the bus node has no room to store the %s for team %s (%s): nothing was %s; this is for the bus's operator to fix: free disk space on the bus node and restart it, or give it a larger `teambus bus start --max-store`", item, team, why, done)
}

// liveMaxBytes is the stream's byte limit as the server has it (`team
// set` may have raised it since the stream was declared), or the
// configured one when the server does not say in time.
func (s *TeamStream) liveMaxBytes() int64 {
	if s.js == nil {
		return s.sc.MaxBytes
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if st, err := s.js.Stream(ctx, s.Stream()); err == nil && st.CachedInfo().Config.MaxBytes > 0 {
		return st.CachedInfo().Config.MaxBytes
	}
	return s.sc.MaxBytes
}

// Size writes a byte count the way the command line reads it: 32MiB,
// 1GiB, 1536KiB, 100B.
func Size(n int64) string {
	for _, u := range []struct {
		unit  string
		shift uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d%s", n>>u.shift, u.unit)
		}
	}
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", (n+1<<20-1)>>20)
	}
	return fmt.Sprintf("%dB", n)
}
