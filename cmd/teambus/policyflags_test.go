package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
)

// policyCommand is a test command with the policy flags that prints the
// policy it parsed as JSON.
func policyCommand() *cli.Command {
	return &cli.Command{
		Name:      "policy-test",
		Usage:     "print the policy of the flags",
		ArgsUsage: "T",
		Flags:     policyFlags(),
		Action: func(c *cli.Context) error {
			p, err := policyFromFlags(c)
			if err != nil {
				return err
			}
			return printJSON(c.App.Writer, p)
		},
	}
}

func runPolicy(t *testing.T, args ...string) (teambus.Policy, result) {
	t.Helper()
	r := runTest(t, []*cli.Command{policyCommand()}, append([]string{"policy-test"}, args...)...)
	var p teambus.Policy
	if r.code == 0 {
		if err := json.Unmarshal([]byte(r.stdout), &p); err != nil {
			t.Fatalf("decode policy %q: %v", r.stdout, err)
		}
	}
	return p, r
}

func TestPolicyFromFlags(t *testing.T) {
	t.Parallel()
	p, r := runPolicy(t, "alpha")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if want := teambus.DefaultPolicy(); p != want {
		t.Errorf("no flags: got %v, want the defaults %v", p, want)
	}

	p, r = runPolicy(t, "alpha", "--heartbeat", "5s", "--member-timeout=1m", "--ack-wait", "90s", "--crash-limit", "2", "--max-attempts=5")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	want := teambus.DefaultPolicy()
	want.Heartbeat, want.MemberTimeout, want.ProbeTimeout, want.AckWait, want.CrashLimit, want.MaxAttempts = 5*time.Second, time.Minute, 30*time.Second, 90*time.Second, 2, 5
	if p != want {
		t.Errorf("got %v, want %v", p, want)
	}
}

func TestPolicyFromFlags_Env(t *testing.T) {
	t.Setenv("TEAMBUS_POLICY_LEAD_TIMEOUT", "7m")
	t.Setenv("TEAMBUS_POLICY_CRASH_LIMIT", "4")
	p, r := runPolicy(t, "alpha", "--lead-timeout", "8m")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if p.LeadTimeout != 8*time.Minute || p.CrashLimit != 4 {
		t.Errorf("lead-timeout %s crash-limit %d, want 8m (flag over env) and 4 (env)", p.LeadTimeout, p.CrashLimit)
	}
}

func TestPolicyFromFlags_Invalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		args  []string
		parts []string
	}{
		{"not a duration", []string{"--heartbeat", "abc"}, []string{`invalid --heartbeat "abc"`, "Go duration"}},
		{"not a duration inline", []string{"--zombie-max=5"}, []string{`invalid --zombie-max "5"`}},
		{"negative", []string{"--probe-timeout", "-5s"}, []string{"probe-timeout", "positive"}},
		{"zero", []string{"--stuck-timeout", "0s"}, []string{"stuck-timeout", "positive"}},
		{"below a second", []string{"--member-timeout", "500ms"}, []string{"member-timeout", "at least 1s"}},
		{"too long", []string{"--takeover-after", "1000h"}, []string{"takeover-after", "720h"}},
		{"crash-limit not a number", []string{"--crash-limit", "x"}, []string{"--crash-limit"}},
		{"crash-limit negative", []string{"--crash-limit", "-1"}, []string{"crash-limit=-1"}},
		{"max-attempts zero", []string{"--max-attempts", "0"}, []string{"max-attempts=0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, r := runPolicy(t, append([]string{"alpha"}, tt.args...)...)
			r.wantError(t, 2, tt.parts...)
		})
	}
}

func TestPolicyFlags_Defaults(t *testing.T) {
	t.Parallel()
	r := runTest(t, []*cli.Command{policyCommand()}, "policy-test", "--help")
	for _, want := range []string{`--heartbeat value`, `(default: "30s")`, `(default: "10m")`, "[$TEAMBUS_POLICY_MEMBER_TIMEOUT]", "--crash-limit", "[$TEAMBUS_POLICY_MAX_ATTEMPTS]"} {
		if !contains(r.stdout, want) {
			t.Errorf("help does not contain %q:\n%s", want, r.stdout)
		}
	}
}
