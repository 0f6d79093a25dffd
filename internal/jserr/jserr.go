package jserr

import (
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// Codes the server returns that nats.go/jetstream has no constant for.
const (
	// StorageResourcesExceeded is JSStorageResourcesExceededErr:
	// "insufficient storage resources available".
	StorageResourcesExceeded jetstream.ErrorCode = 10047
	// StreamStoreFailed is JSStreamStoreFailedF: the stream's store
	// refused the write (a full stream with DiscardNew among others).
	StreamStoreFailed jetstream.ErrorCode = 10077
	// AtomicPublishDisabled is JSAtomicPublishDisabledErr: the stream does
	// not allow atomic batch publish.
	AtomicPublishDisabled jetstream.ErrorCode = 10174
	// ClusterNotAvailable is JSClusterNotAvailErr: "JetStream system
	// temporarily unavailable", as while the cluster elects its meta
	// leader.
	ClusterNotAvailable jetstream.ErrorCode = 10008
	// StreamOffline is JSStreamOfflineErr: every server of the stream is
	// offline.
	StreamOffline jetstream.ErrorCode = 10118
	// AccountResourcesExceeded is JSAccountResourcesExceededErr:
	// "resource limits exceeded for account".
	AccountResourcesExceeded jetstream.ErrorCode = 10002
	// InsufficientResources is JSInsufficientResourcesErr: "insufficient
	// resources".
	InsufficientResources jetstream.ErrorCode = 10023
	// MemoryResourcesExceeded is JSMemoryResourcesExceededErr:
	// "insufficient memory resources available".
	MemoryResourcesExceeded jetstream.ErrorCode = 10028
)

// Code returns the JetStream API error code in err's chain, if any.
func Code(err error) (jetstream.ErrorCode, bool) {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode, true
	}
	return 0, false
}

// Is reports whether err carries the JetStream API error code c.
func Is(err error, c jetstream.ErrorCode) bool {
	got, ok := Code(err)
	return ok && got == c
}

// WrongLastSequence reports a failed expected-last-sequence check: a
// compare-and-set lost. Replicated streams answer with the constant form
// (10164), single-replica ones with the sequence in the text (10071).
func WrongLastSequence(err error) bool {
	c, ok := Code(err)
	return ok && (c == jetstream.JSErrCodeStreamWrongLastSequence || c == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// StoreFull reports a write refused because a stream or the server's
// store is full.
func StoreFull(err error) bool {
	c, ok := Code(err)
	return ok && (c == StreamStoreFailed || c == StorageResourcesExceeded)
}

// BatchDuplicate is JSAtomicPublishContainsDuplicateMessageErr: a message
// of an atomic batch carries a message id the stream stored before (or
// another message of the batch carries), so the batch was refused whole.
const BatchDuplicate jetstream.ErrorCode = 10201
