package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/agent/initclaude"
	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/node/credstore"
)

// checkExit is the exit of `init claude --check`: 0 current, 1 outdated
// or the bus does not answer, 2 missing or the team or member is not on
// the bus.
func checkExit(rep *initclaude.Result) error {
	switch {
	case rep.Status == initclaude.StatusMissing:
		return cli.Exit("init claude --check: missing: "+rep.Detail, teambus.ExitPermanent)
	case rep.ProblemExit != teambus.ExitOK:
		return cli.Exit("init claude --check: "+rep.Problem, rep.ProblemExit)
	case rep.Status == initclaude.StatusOutdated:
		return cli.Exit("init claude --check: outdated: "+rep.Detail+" (rerun `teambus init claude` with the same flags)", teambus.ExitTransient)
	}
	return nil
}

// initBus answers the installer's questions (is a team, a member on the
// bus) and issues, checks and revokes credentials, on the operator's
// connection.
type initBus struct {
	s       *session
	servers []string
}

// openInitBus connects to the bus of the command line's flags; its error
// reads as the command line words a bus that does not answer.
func openInitBus(c *cli.Context) (initclaude.Bus, func(), error) {
	s, err := open(c)
	if err != nil {
		return nil, nil, &initBusError{line: errorLine(c.Context, err), err: err}
	}
	return initBus{s: s, servers: credsServers(c)}, s.close, nil
}

// Servers are the URLs of the bus a credential issued now names.
func (b initBus) Servers() []string { return b.servers }

// Accepts reads the credential's record within the session's deadline.
func (b initBus) Accepts(_ context.Context, cr *bus.Creds) (bool, error) {
	return credstore.Accepts(b.s.ctx, b.s.conn, cr)
}

// Issue issues member's credential within the session's deadline.
func (b initBus) Issue(_ context.Context, team, member string, servers []string) (*bus.Creds, error) {
	return credstore.IssueCreds(b.s.ctx, b.s.conn, team, member, servers)
}

// Revoke revokes member's credential within the session's deadline.
func (b initBus) Revoke(_ context.Context, team, member string) error {
	return credstore.RevokeCreds(b.s.ctx, b.s.conn, team, member)
}

// initBusError is a connection error with the command line's wording.
type initBusError struct {
	line string
	err  error
}

func (e *initBusError) Error() string { return e.line }
func (e *initBusError) Unwrap() error { return e.err }

// Team asks within the session's deadline, as every command does.
func (b initBus) Team(_ context.Context, team string) error {
	_, err := b.s.svc.Team(b.s.ctx, team)
	return err
}

// Member asks within the session's deadline, as every command does.
func (b initBus) Member(_ context.Context, team, member string) error {
	_, err := b.s.svc.Member(b.s.ctx, team, member)
	return err
}

// printCheck writes the --check report as text.
func printCheck(w io.Writer, rep *initclaude.Result) error {
	for _, l := range rep.Locations {
		line := fmt.Sprintf("%-8s %s: %s", l.Scope, l.Path, l.Status)
		if l.Status == initclaude.StatusMissing {
			line = fmt.Sprintf("%-8s %s: not installed", l.Scope, l.Path)
		} else if l.Detail != "" {
			line += " (" + l.Detail + ")"
		}
		if l.Identity != "" {
			line += ", identity " + l.Identity
		}
		if l.Bin != "" {
			line += ", runs " + l.Bin
		}
		switch {
		case l.Bus != "":
			line += ", bus " + l.Bus
		case l.Credential != nil && l.Credential.Source != initclaude.SourceToken && l.Credential.Problem == "":
			line += ", bus named by the credential"
		case l.Status != initclaude.StatusMissing:
			line += ", bus of the terminal (TEAMBUS_DIR/TEAMBUS_SERVER)"
		}
		fmt.Fprintln(w, line)
		if u := l.Credential; u != nil {
			fmt.Fprintf(w, "         uses %s\n", u)
			if u.Problem != "" {
				fmt.Fprintf(w, "         refused: %s\n         fix: %s\n", u.Problem, u.Fix)
			}
		}
	}
	for _, m := range rep.MCP {
		where := m.Scope
		if m.Project != "" {
			where += " (" + m.Project + ")"
		}
		who := "identity from the session's hook binding"
		if m.Identity != "" {
			who = "identity " + m.Identity
		}
		if m.Creds != "" {
			who += ", credential " + m.Creds
		} else if m.Identity != "" {
			who += ", the node token"
		}
		if !m.Owned {
			who = "not registered by teambus"
		}
		fmt.Fprintf(w, "mcp      %s: %s, runs %s\n", where, who, strings.Join(append([]string{m.Command}, m.Args...), " "))
	}
	if rep.Claude != "" {
		fmt.Fprintf(w, "claude   %s\n", rep.Claude)
	}
	if b := rep.Bus; b != nil {
		switch {
		case !b.Answers:
			fmt.Fprintln(w, "bus      does not answer")
		case b.Team == "":
			fmt.Fprintln(w, "bus      answers (no team to check: pass --team)")
		case !b.TeamExists:
			fmt.Fprintf(w, "bus      answers; team %s not found\n", b.Team)
		case b.Member != "" && !b.MemberExists:
			fmt.Fprintf(w, "bus      answers; team %s exists; member %s not found\n", b.Team, b.Member)
		default:
			fmt.Fprintf(w, "bus      answers; team %s exists%s\n", b.Team, map[bool]string{true: "; member " + b.Member + " exists", false: ""}[b.Member != ""])
		}
	}
	if rep.Problem != "" {
		fmt.Fprintf(w, "status   %s handlers, but %s\n", rep.Status, rep.Problem)
		return nil
	}
	fmt.Fprintf(w, "status   %s\n", rep.Status)
	return nil
}
