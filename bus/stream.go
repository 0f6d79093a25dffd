package bus

import (
	"context"
	"errors"
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
// export the command that exports the stream. Any other error is nil.
func (s *TeamStream) Refusal(err error, item, done, export string) error {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return nil
	}
	switch apiErr.ErrorCode {
	case jetstream.JSErrCodeStreamMessageExceedsMaximum:
		return teambus.Invalidf("%s too large for the %s of team %s: nothing was %s", item, s.what, s.team, done)
	case jserr.StreamStoreFailed, jserr.StorageResourcesExceeded:
		return teambus.Unavailablef("%s of team %s is full (limit %d bytes): nothing was %s; export it (`%s`) and raise the limit", s.what, s.team, s.sc.MaxBytes, done, export)
	case jetstream.JSErrCodeStreamNotFound:
		return teambus.NotFoundf("team %s has no %s: create the team first", s.team, s.what)
	}
	switch apiErr.ErrorCode {
	case jserr.AccountResourcesExceeded, jserr.InsufficientResources, jserr.MemoryResourcesExceeded:
		return teambus.Unavailablef("%s of team %s is full: nothing was %s: %s", s.what, s.team, done, apiErr.Description)
	}
	return nil
}
