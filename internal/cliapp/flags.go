package cliapp

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
)

// Flags are built by functions, never shared: urfave writes into a flag
// while parsing (its value from the environment, whether it was set), so
// every app gets its own.

// Flags concatenates flag groups for a command:
// Flags(ConnFlags(), MemberFlags(), []cli.Flag{JSONFlag()}).
func Flags(groups ...[]cli.Flag) []cli.Flag {
	var out []cli.Flag
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// DirFlag is --dir, the state directory of the local node.
func DirFlag() cli.Flag {
	return &cli.StringFlag{
		Name:    "dir",
		Usage:   "state directory of the local bus node (its store and discovery file)",
		EnvVars: []string{"TEAMBUS_DIR"},
		Value:   DefaultDir(),
	}
}

// DefaultDir is $XDG_STATE_HOME/teambus, else ~/.local/state/teambus, else
// empty (then --dir is required).
func DefaultDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "teambus")
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return ""
	}
	return filepath.Join(home, ".local", "state", "teambus")
}

// TimeoutFlag is --timeout, the limit of a one-shot command.
func TimeoutFlag() cli.Flag {
	return &cli.DurationFlag{
		Name:    "timeout",
		Usage:   "give up after this long (connect and every request of a one-shot command)",
		EnvVars: []string{"TEAMBUS_TIMEOUT"},
		Value:   10 * time.Second,
	}
}

// ConnFlags are the flags of every command that talks to the bus: where it
// is and how to authenticate, and --timeout.
func ConnFlags() []cli.Flag {
	return []cli.Flag{
		DirFlag(),
		&cli.StringFlag{Name: "server", Usage: "NATS URL(s) of an external bus, comma separated (default: the local node found in --dir)", EnvVars: []string{"TEAMBUS_SERVER"}},
		&cli.StringFlag{Name: "creds", Usage: "credentials `FILE`: a member's from teambus team creds (it also sets --team and --member), or a NATS .creds file", EnvVars: []string{"TEAMBUS_CREDS"}},
		&cli.StringFlag{Name: "token", Usage: "auth token (default: the local node's, from its discovery file)", EnvVars: []string{"TEAMBUS_TOKEN"}},
		&cli.StringFlag{Name: "user", Usage: "NATS user name", EnvVars: []string{"TEAMBUS_USER"}},
		&cli.StringFlag{Name: "password", Usage: "NATS password", EnvVars: []string{"TEAMBUS_PASSWORD"}},
		&cli.StringFlag{Name: "inbox-prefix", Usage: "reply subject prefix (default: _INBOX; a member credential sets its own)", EnvVars: []string{"TEAMBUS_INBOX_PREFIX"}},
		&cli.StringFlag{Name: "tls-ca", Usage: "CA certificate file to verify the server", EnvVars: []string{"TEAMBUS_TLS_CA"}},
		&cli.StringFlag{Name: "tls-cert", Usage: "client certificate file", EnvVars: []string{"TEAMBUS_TLS_CERT"}},
		&cli.StringFlag{Name: "tls-key", Usage: "client key file", EnvVars: []string{"TEAMBUS_TLS_KEY"}},
		TimeoutFlag(),
	}
}

// TeamFlag is --team, the team a member command acts in.
func TeamFlag() cli.Flag {
	return &cli.StringFlag{Name: "team", Usage: "team id", EnvVars: []string{"TEAMBUS_TEAM"}}
}

// MemberFlag is --member, the member a command acts as.
func MemberFlag() cli.Flag {
	return &cli.StringFlag{Name: "member", Usage: "member id (lead for the lead)", EnvVars: []string{"TEAMBUS_MEMBER"}}
}

// SessionFlag is --session, the agent session of the member; a session that
// is not the member's current one is fenced (exit 3).
func SessionFlag() cli.Flag {
	return &cli.StringFlag{Name: "session", Usage: "agent session id of this incarnation", EnvVars: []string{"TEAMBUS_SESSION"}}
}

// MemberFlags are --team, --member and --session: an agent session sets
// TEAMBUS_TEAM, TEAMBUS_MEMBER and TEAMBUS_SESSION once.
func MemberFlags() []cli.Flag {
	return []cli.Flag{TeamFlag(), MemberFlag(), SessionFlag()}
}

// JSONFlag is --json: machine-readable output on stdout.
func JSONFlag() cli.Flag {
	return &cli.BoolFlag{Name: "json", Usage: "print JSON (one object, or JSON Lines for lists and streams)", EnvVars: []string{"TEAMBUS_JSON"}}
}

// StateDir returns --dir as an absolute path.
func StateDir(c *cli.Context) (string, error) {
	dir := c.String("dir")
	if dir == "" {
		return "", UsageError(c, "no state directory: set --dir or TEAMBUS_DIR (HOME is not set)")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", UsageError(c, "invalid --dir %q: %v", dir, err)
	}
	return abs, nil
}

// Timeout returns --timeout, which must be positive.
func Timeout(c *cli.Context) (time.Duration, error) {
	d := c.Duration("timeout")
	if d <= 0 {
		return 0, UsageError(c, "invalid --timeout %s: must be positive", d)
	}
	return d, nil
}

// WithTimeout returns the command's context limited by --timeout, for a
// one-shot command.
func WithTimeout(c *cli.Context) (context.Context, context.CancelFunc, error) {
	d, err := Timeout(c)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(c.Context, d)
	return ctx, cancel, nil
}

// FlagID returns the id flag name (--team, --member), checked against the
// id rule; env is the variable that also sets it. resolve, when not nil,
// takes the id from a member credential of --creds instead (the full
// build's: the lean build runs no command with --creds itself).
func FlagID(c *cli.Context, name, env string, resolve func(c *cli.Context, name, id string) (string, error)) (string, error) {
	id := c.String(name)
	if resolve != nil {
		var err error
		if id, err = resolve(c, name, id); err != nil {
			return "", err
		}
	}
	if id == "" {
		return "", UsageError(c, "missing --%s (or %s)", name, env)
	}
	return id, teambus.ValidateID(name, id)
}
