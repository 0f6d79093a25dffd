package mcpserver_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/teambus/teambus"
)

// TestSend_BodyLimit: the send tool refuses a body over the team's limit
// with the message the command line gives, whether the request could
// carry it (300 KiB) or not (2 MiB), and an empty body; permanent,
// nothing stored, on either backend.
func TestSend_BodyLimit(t *testing.T) {
	forBackends(t, func(t *testing.T, newF fixtureFunc) {
		f := newF(t, 1)
		cs := f.client(member("tm1"))
		for _, n := range []int{300 << 10, 2 << 20} {
			fails(t, cs, "send", map[string]any{"to": "lead", "body": strings.Repeat("x", n)}, "[permanent]",
				fmt.Sprintf("message body is %d bytes, at most %d: nothing sent; put large content in a file and send its path", n, teambus.DefaultMaxBody))
		}
		for _, body := range []string{"", "  \n"} {
			fails(t, cs, "send", map[string]any{"to": "lead", "body": body}, "[permanent]", "message body is", "nothing sent")
		}
		if got := f.unacked("lead"); len(got) != 0 {
			t.Fatalf("refused sends stored mail: %v", got)
		}
	})
}
