package mailbox

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/internal/jserr"
)

// TestPublishErr_Refusal checks that the mailbox words the refusals it
// shares with the event log (TeamStream.Refusal) in its own terms.
func TestPublishErr_Refusal(t *testing.T) {
	mb := NewMailbox(nil, "alpha", MailboxConfig{MaxBytes: 4096})
	api := func(code jetstream.ErrorCode, desc string) error {
		return &jetstream.APIError{ErrorCode: code, Description: desc}
	}
	const (
		fullMail = "team alpha's mailbox is full (4KiB): nothing was sent; the operator raises it with `teambus team set alpha --mailbox-max-bytes 8KiB`"
		fullEv   = "team alpha's event log is full (8KiB): nothing was stored; the operator raises it with `teambus team set alpha --events-max-bytes 16KiB`"
		byDesc   = "resource limits exceeded for account"
		noSpace  = "insufficient storage resources available"
		opFix    = "; this is for the bus's operator to fix: free disk space on the bus node and restart it, or give it a larger `teambus bus start --max-store`"
	)
	tests := []struct {
		name     string
		err      error
		mail, ev string
		is       error
	}{
		{"too large", api(jetstream.JSErrCodeStreamMessageExceedsMaximum, "message size exceeds maximum allowed"),
			"message too large for the mailbox of team alpha: nothing was sent", "event too large for the event log of team alpha: nothing was stored", teambus.ErrInvalid},
		{"store failed", api(jserr.StreamStoreFailed, "maximum bytes exceeded"), fullMail, fullEv, teambus.ErrFull},
		{"no resources", api(jserr.StorageResourcesExceeded, noSpace),
			"the bus node has no room to store the message for team alpha (" + noSpace + "): nothing was sent" + opFix,
			"the bus node has no room to store the event for team alpha (" + noSpace + "): nothing was stored" + opFix, teambus.ErrNoSpace},
		{"no stream", api(jetstream.JSErrCodeStreamNotFound, "stream not found"),
			"team alpha has no mailbox: create the team first", "team alpha has no event log: create the team first", teambus.ErrNotFound},
		{"full by its code", api(jserr.AccountResourcesExceeded, byDesc),
			"the bus node has no room to store the message for team alpha (" + byDesc + "): nothing was sent" + opFix,
			"the bus node has no room to store the event for team alpha (" + byDesc + "): nothing was stored" + opFix, teambus.ErrNoSpace},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range []struct {
				got  error
				want string
			}{{mb.publishErr(tc.err), tc.mail}} {
				if c.got == nil || c.got.Error() != c.want || !errors.Is(c.got, tc.is) {
					t.Errorf("publishErr(%v) = %v, want %q (%v)", tc.err, c.got, c.want, tc.is)
				} else if errors.Is(tc.is, teambus.ErrFull) && teambus.ExitCode(c.got) != teambus.ExitPermanent {
					t.Errorf("publishErr(%v) exits %d, want %d: no room is permanent until someone acts", tc.err, teambus.ExitCode(c.got), teambus.ExitPermanent)
				}
			}
		})
	}
	// Errors are matched by their code, never by their text.
	err := api(9999, "message size too big")
	if got := mb.publishErr(err); errors.Is(got, teambus.ErrInvalid) {
		t.Errorf("mailbox publishErr(%v) = %v, want no ErrInvalid", err, got)
	}
	// No answer is transient until the server said the stream is missing.
	if got := mb.publishErr(jetstream.ErrNoStreamResponse); !errors.Is(got, bus.ErrNoLeader) || teambus.ExitCode(got) != teambus.ExitTransient {
		t.Errorf("mailbox publishErr(no responders) = %v, want bus.ErrNoLeader, exit 1", got)
	}
	if got := mb.publishErr(bus.ErrStreamMissing); !errors.Is(got, teambus.ErrNotFound) || got.Error() != "team alpha has no mailbox: create the team first" {
		t.Errorf("mailbox publishErr(missing) = %v, want ErrNotFound has no mailbox", got)
	}
}
