package main

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/internal/cliapp"
)

// The flags of the one-shot commands are package cliapp's, shared with
// the lean agent build.
func flags(groups ...[]cli.Flag) []cli.Flag { return cliapp.Flags(groups...) }
func dirFlag() cli.Flag                     { return cliapp.DirFlag() }
func defaultDir() string                    { return cliapp.DefaultDir() }
func timeoutFlag() cli.Flag                 { return cliapp.TimeoutFlag() }
func connFlags() []cli.Flag                 { return cliapp.ConnFlags() }
func teamFlag() cli.Flag                    { return cliapp.TeamFlag() }
func memberFlag() cli.Flag                  { return cliapp.MemberFlag() }
func sessionFlag() cli.Flag                 { return cliapp.SessionFlag() }
func memberFlags() []cli.Flag               { return cliapp.MemberFlags() }
func jsonFlag() cli.Flag                    { return cliapp.JSONFlag() }

// logFlags are --log-level and --log-format for foreground processes (the
// bus node, the sidecars); logs go to stderr.
func logFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "log-level", Usage: "debug, info, warn or error", EnvVars: []string{"TEAMBUS_LOG_LEVEL"}, Value: "info"},
		&cli.StringFlag{Name: "log-format", Usage: "text or json", EnvVars: []string{"TEAMBUS_LOG_FORMAT"}, Value: "text"},
	}
}

// newLogger builds the slog logger of --log-level and --log-format, writing
// to the app's stderr.
func newLogger(c *cli.Context) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return nil, usageError(c, "invalid --log-level %q: one of debug, info, warn, error", c.String("log-level"))
	}
	opts := &slog.HandlerOptions{Level: level}
	switch c.String("log-format") {
	case "text", "":
		return slog.New(slog.NewTextHandler(c.App.ErrWriter, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(c.App.ErrWriter, opts)), nil
	default:
		return nil, usageError(c, "invalid --log-format %q: text or json", c.String("log-format"))
	}
}

func stateDir(c *cli.Context) (string, error)       { return cliapp.StateDir(c) }
func timeout(c *cli.Context) (time.Duration, error) { return cliapp.Timeout(c) }
func withTimeout(c *cli.Context) (context.Context, context.CancelFunc, error) {
	return cliapp.WithTimeout(c)
}

// connConfig builds the bus connection settings from connFlags.
func connConfig(c *cli.Context) (bus.ConnectConfig, error) {
	dir, err := stateDir(c)
	if err != nil {
		return bus.ConnectConfig{}, err
	}
	d, err := timeout(c)
	if err != nil {
		return bus.ConnectConfig{}, err
	}
	return bus.ConnectConfig{
		Dir:         dir,
		Server:      c.String("server"),
		Creds:       c.String("creds"),
		Token:       c.String("token"),
		User:        c.String("user"),
		Pass:        c.String("password"),
		TLSCA:       c.String("tls-ca"),
		TLSCert:     c.String("tls-cert"),
		TLSKey:      c.String("tls-key"),
		InboxPrefix: c.String("inbox-prefix"),
		Name:        strings.TrimSpace("teambus " + strings.TrimPrefix(c.Command.HelpName, "teambus")),
		Timeout:     d,
	}, nil
}

// connect opens a connection to the bus described by connFlags. The caller
// closes it.
func connect(c *cli.Context) (*bus.Conn, error) {
	cfg, err := connConfig(c)
	if err != nil {
		return nil, err
	}
	return bus.Connect(c.Context, cfg)
}

// teamID returns --team, checked against the id rule.
func teamID(c *cli.Context) (string, error) {
	return flagID(c, "team", "TEAMBUS_TEAM")
}

// memberID returns --member, checked against the id rule ("lead" passes;
// a command that needs a teammate checks teambus.ValidateMemberID).
func memberID(c *cli.Context) (string, error) {
	return flagID(c, "member", "TEAMBUS_MEMBER")
}

// sessionID returns --session, checked by teambus.ValidateSession.
func sessionID(c *cli.Context) (string, error) {
	s := c.String("session")
	if s == "" {
		return "", usageError(c, "missing --session (or TEAMBUS_SESSION)")
	}
	return s, teambus.ValidateSession(s)
}

func flagID(c *cli.Context, name, env string) (string, error) {
	return cliapp.FlagID(c, name, env, credsID)
}

func exactArgs(c *cli.Context, n int) error { return cliapp.ExactArgs(c, n) }
func minArgs(c *cli.Context, n int) error   { return cliapp.MinArgs(c, n) }
