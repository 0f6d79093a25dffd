package main

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
)

// policyFlags are the team policy flags of `team create`: one string flag
// per entry of teambus.PolicyDurations (parsed by teambus.ParseDuration, so
// a bad value gets our message and exit 2), plus --crash-limit and
// --max-attempts. Defaults come from teambus.DefaultPolicy.
func policyFlags() []cli.Flag {
	def := teambus.DefaultPolicy()
	var out []cli.Flag
	for _, d := range teambus.PolicyDurations {
		out = append(out, &cli.StringFlag{
			Name:     d.Name,
			Usage:    d.Usage,
			EnvVars:  []string{policyEnv(d.Name)},
			Value:    formatDuration(*d.Get(&def)),
			Category: "policy",
		})
	}
	return append(out,
		&cli.IntFlag{Name: "crash-limit", Usage: "respawns allowed per member/task; the next crash pauses the task and escalates", EnvVars: []string{policyEnv("crash-limit")}, Value: def.CrashLimit, Category: "policy"},
		&cli.IntFlag{Name: "max-attempts", Usage: "failures of one task before it is paused and escalated", EnvVars: []string{policyEnv("max-attempts")}, Value: def.MaxAttempts, Category: "policy"},
		&cli.StringFlag{Name: "respawn", Usage: "after a crash with crash budget left: auto (a teambus host restarts the member), lead (the lead is told and decides), off", EnvVars: []string{policyEnv("respawn")}, Value: string(def.RespawnMode()), Category: "policy"},
	)
}

// policyEnv is the environment variable of a policy flag:
// member-timeout is TEAMBUS_POLICY_MEMBER_TIMEOUT.
func policyEnv(name string) string {
	return "TEAMBUS_POLICY_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// policyFromFlags returns teambus.DefaultPolicy with the policy flags that
// were set applied, validated.
func policyFromFlags(c *cli.Context) (teambus.Policy, error) {
	p := teambus.DefaultPolicy()
	if c.IsSet("member-timeout") && !c.IsSet("probe-timeout") {
		// The default probe timeout (2m) follows a shorter member timeout
		// down to half of it, so `--member-timeout 1m` alone is valid.
		if v, err := teambus.ParseDuration("--member-timeout", c.String("member-timeout")); err == nil && p.ProbeTimeout >= v {
			p.ProbeTimeout = v / 2
		}
	}
	if err := applyPolicyFlags(c, &p); err != nil {
		return teambus.Policy{}, err
	}
	return p, nil
}

// applyPolicyFlags changes the fields of p whose flags were set (on the
// command line or in the environment) and validates the result; a command
// that updates a stored policy starts from the stored one.
func applyPolicyFlags(c *cli.Context, p *teambus.Policy) error {
	for _, d := range teambus.PolicyDurations {
		if !c.IsSet(d.Name) {
			continue
		}
		v, err := teambus.ParseDuration("--"+d.Name, c.String(d.Name))
		if err != nil {
			return err
		}
		*d.Get(p) = v
	}
	if c.IsSet("crash-limit") {
		p.CrashLimit = c.Int("crash-limit")
	}
	if c.IsSet("max-attempts") {
		p.MaxAttempts = c.Int("max-attempts")
	}
	if c.IsSet("respawn") {
		r, err := teambus.ParseRespawn(c.String("respawn"))
		if err != nil {
			return err
		}
		p.Respawn = r
	}
	return p.Validate()
}
