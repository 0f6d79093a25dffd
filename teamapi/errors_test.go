package teamapi_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/teamapi"
)

// TestError_RoundTrip: an error classed on the service side comes back,
// through its JSON, as an error that matches the same sentinels and
// exits with the same code.
func TestError_RoundTrip(t *testing.T) {
	cases := []struct {
		err  error
		code teamapi.Code
		is   []error
	}{
		{teambus.Invalidf("bad"), teamapi.CodeInvalid, []error{teambus.ErrInvalid}},
		{teambus.NotFoundf("gone"), teamapi.CodeNotFound, []error{teambus.ErrNotFound}},
		{teambus.Statef("closed"), teamapi.CodeState, []error{teambus.ErrState}},
		{teambus.Conflictf("lost"), teamapi.CodeConflict, []error{teambus.ErrConflict}},
		{teambus.Fencedf("old"), teamapi.CodeFenced, []error{teambus.ErrFenced}},
		{fmt.Errorf("wrapped: %w", teambus.Fencedf("old")), teamapi.CodeFenced, []error{teambus.ErrFenced}},
		{teamapi.Refusedf("not yours"), teamapi.CodeRefused, []error{teamapi.ErrRefused, teambus.ErrInvalid}},
		{bus.NoLeaderf("electing"), teamapi.CodeNoLeader, []error{bus.ErrNoLeader, teambus.ErrUnavailable}},
		{teamapi.NoTaskf("later"), teamapi.CodeNoTask, []error{teamapi.ErrNoTask, teambus.ErrUnavailable}},
		{teamapi.TooBigf("replay answer is 2 MiB"), teamapi.CodeTooBig, []error{teamapi.ErrTooBig, teambus.ErrInvalid}},
		{errors.New("disk"), teamapi.CodeUnavailable, []error{teambus.ErrUnavailable}},
	}
	for _, tt := range cases {
		e := teamapi.ErrorOf(tt.err)
		if e.Code != tt.code {
			t.Errorf("%v: code %q, want %q", tt.err, e.Code, tt.code)
		}
		b, err := json.Marshal(teamapi.ErrorReply{Error: *e})
		if err != nil {
			t.Fatal(err)
		}
		var back teamapi.ErrorReply
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		got := error(&back.Error)
		for _, s := range tt.is {
			if !errors.Is(got, s) {
				t.Errorf("%v: after the wire %v is not %v", tt.err, got, s)
			}
		}
		if teambus.ExitCode(got) != teambus.ExitCode(tt.err) {
			t.Errorf("%v: exit %d after the wire, %d before", tt.err, teambus.ExitCode(got), teambus.ExitCode(tt.err))
		}
		if got.Error() != tt.err.Error() {
			t.Errorf("message %q after the wire, %q before", got, tt.err)
		}
		var te *teamapi.Error
		if !errors.As(got, &te) || te.Code != tt.code {
			t.Errorf("%v: errors.As gives %v", got, te)
		}
	}
}

// TestError_UnknownCode: a code this client does not know is read by its
// class.
func TestError_UnknownCode(t *testing.T) {
	for class, want := range map[string]int{teamapi.ClassPermanent: teambus.ExitPermanent, teamapi.ClassConflict: teambus.ExitConflict, teamapi.ClassTransient: teambus.ExitTransient, "": teambus.ExitTransient} {
		e := &teamapi.Error{Code: "newer", Class: class, Message: "m"}
		if got := teambus.ExitCode(e); got != want {
			t.Errorf("class %q: exit %d, want %d", class, got, want)
		}
	}
}

// TestVerbs: each verb once, each a subject token.
func TestVerbs(t *testing.T) {
	seen := map[string]bool{}
	for _, n := range teamapi.VerbNames() {
		if seen[n] || n == "" || !teamapi.IsVerb(n) {
			t.Errorf("verb %q twice, empty or unknown", n)
		}
		seen[n] = true
	}
	if teamapi.IsVerb("purge") {
		t.Error("purge is no verb")
	}
}
