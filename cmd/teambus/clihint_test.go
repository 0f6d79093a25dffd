package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/team"
)

// The library's errors name no flag; the command line adds what to run.
func TestCLIHint_NamesTheCommand(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{&team.NoLeadError{Team: "alpha", Session: "L"}, "`teambus lead --team alpha --session L`"},
		{&team.NoLeadError{Team: "alpha", Session: "L", Other: "X"}, "`teambus lead --team alpha --session L`, or use --force"},
		{&team.StaleLeadError{Team: "alpha", Session: "X", Epoch: 2}, "`teambus team resume alpha --session X`"},
		{&bus.DamagedCredsError{Team: "alpha", Member: "tm1"}, "`teambus team creds alpha --member tm1`"},
	} {
		err := fmt.Errorf("wrapped: %w", tt.err)
		if strings.Contains(err.Error(), "--") {
			t.Errorf("library text names a flag: %q", err)
		}
		if got := cliHint(err); !strings.Contains(got, tt.want) {
			t.Errorf("cliHint(%v) = %q, want %q", err, got, tt.want)
		}
	}
}
