package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/internal/jserr"
)

// ErrNoLeader marks a transient failure: a stream the operation needs
// exists but no server answered for it, as while its replicas elect a new
// leader after a node was lost, or while the cluster's meta leader is
// being elected. Nothing was stored; the same operation succeeds once a
// leader is elected. Every ErrNoLeader is also a teambus.ErrUnavailable
// (exit 1). Messages of these errors name no command-line flag: the
// command line adds its own hint. It is teambus.ErrNoLeader.
var ErrNoLeader = teambus.ErrNoLeader

// noLeaderError is an ErrNoLeader with its message.
type noLeaderError struct{ msg string }

func (e *noLeaderError) Error() string { return e.msg }

// Unwrap makes the error both an ErrNoLeader and a teambus.ErrUnavailable.
func (e *noLeaderError) Unwrap() []error { return []error{ErrNoLeader, teambus.ErrUnavailable} }

// NoLeaderf returns an ErrNoLeader with a message.
func NoLeaderf(format string, args ...any) error {
	return &noLeaderError{msg: fmt.Sprintf(format, args...)}
}

// ElectionWait bounds how long one operation waits in place for a stream
// that exists but has no leader before it returns an ErrNoLeader. It is
// shorter than a client's default timeout, so a client can retry it.
const ElectionWait = teambus.ElectionWait

// NoResponse reports an operation on a stream that no server answered:
// the stream does not exist, or it has no leader at the moment.
func NoResponse(err error) bool {
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders)
}

// Electing reports a JetStream API error that says the cluster can not
// answer now (its meta leader or the stream's leader is being elected, or
// the stream's servers are offline): transient, unlike a missing stream.
func Electing(err error) bool {
	c, ok := jserr.Code(err)
	return ok && (c == jserr.ClusterNotAvailable || c == jserr.StreamOffline)
}

// StreamMissing asks whether stream exists, after an operation on it got
// no answer (NoResponse): true only when the server says it does not
// (jetstream.ErrStreamNotFound). Any other answer, an Electing error or no
// answer in time, means it may exist and is false: a missing stream is
// permanent, and only the server's word makes it so.
func StreamMissing(ctx context.Context, js jetstream.JetStream, stream string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := js.Stream(ctx, stream)
	return errors.Is(err, jetstream.ErrStreamNotFound)
}

// ErrStreamMissing is what WhileElecting returns for a stream the server
// says does not exist.
var ErrStreamMissing = errors.New("stream not found")

// WhileElecting runs op, which failed with first, again while it fails
// because nobody answers for stream and the stream exists: a leader is
// being elected. It waits a little longer between attempts, at most
// ElectionWait in all and never past ctx. It returns op's last result,
// ErrStreamMissing when the server says stream does not exist, or an
// ErrNoLeader naming what when the wait ran out.
func WhileElecting[T any](ctx context.Context, js jetstream.JetStream, stream, what string, first error, op func(context.Context) (T, error)) (T, error) {
	var zero T
	err := first
	deadline := time.Now().Add(ElectionWait)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		// Leave a moment to answer before the caller gives up.
		deadline = dl.Add(-time.Until(dl) / 10)
	}
	wait := 100 * time.Millisecond
	for asked := false; ; {
		if !NoResponse(err) && !Electing(err) {
			return zero, err
		}
		// Asked once: a stream the server did not say is missing is
		// taken to exist, and only its leader is awaited.
		if NoResponse(err) && !asked {
			if StreamMissing(ctx, js, stream) {
				return zero, ErrStreamMissing
			}
			asked = true
		}
		if time.Now().Add(wait).After(deadline) {
			return zero, NoLeaderf("%s: the bus is electing a leader (no server answers for stream %s yet): nothing was stored", what, stream)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return zero, NoLeaderf("%s: the bus is electing a leader (no server answers for stream %s yet): nothing was stored", what, stream)
		case <-t.C:
		}
		wait = min(wait*2, time.Second)
		var res T
		if res, err = op(ctx); err == nil {
			return res, nil
		}
	}
}
