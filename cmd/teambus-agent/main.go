package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/internal/cliapp"
	"github.com/teambus/teambus/internal/sendcmd"
	"github.com/teambus/teambus/relay"
	"github.com/teambus/teambus/teamapi"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code, handOver := run(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr)
	stop()
	if handOver {
		code = execOther(os.Args, os.Stderr)
	}
	os.Exit(code)
}

// errHandOver says the command is not this build's to run: another build
// runs it from the start.
var errHandOver = errors.New("hand over to the client build")

// run runs args when this build can: `send` of one message through the
// sidecar relay. handOver is true when it can not and nothing was read
// or sent yet; then the exit code is meaningless.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (code int, handOver bool) {
	if len(args) < 2 || args[1] != "send" || os.Getenv(relay.DisableEnv) != "" {
		return 0, true
	}
	for _, a := range args[2:] {
		if a == "--" {
			break
		}
		if a == "-h" || a == "--help" || a == "-help" {
			return 0, true
		}
	}
	// committed is set once the command has read its body from stdin or
	// written its request: from then on it finishes here, whatever comes.
	committed := false
	app := &cli.App{
		Name:      "teambus",
		Writer:    stdout,
		ErrWriter: stderr,
		Reader:    stdin,
		Commands: []*cli.Command{sendcmd.Command(func(c *cli.Context) error {
			return send(c, &committed)
		})},
		DisableSliceFlagSeparator: true,
	}
	cliapp.Prepare(app, cliapp.Config{Version: func(io.Writer) error { return errHandOver }})
	err := cliapp.Run(ctx, app, args)
	if err == nil {
		return teambus.ExitOK, false
	}
	if !committed || errors.Is(err, errHandOver) {
		return 0, true
	}
	fmt.Fprintf(stderr, "teambus: %s\n", cliapp.ErrorText(ctx, err))
	return cliapp.ExitCode(err), false
}

// send is the full build's `send BODY` through the relay of the member's
// sidecar. Whatever the full build would do otherwise (--from, a
// credentials file, no relay to reach), and any error before the body is
// read, hands over: the other build then says it as it does.
func send(c *cli.Context, committed *bool) error {
	if c.IsSet("from") || c.String("creds") != "" {
		return errHandOver
	}
	if err := cliapp.ExactArgs(c, 1); err != nil {
		return err
	}
	a, err := actor(c)
	if err != nil {
		return err
	}
	server, auth, ok := relayAuth(c)
	if !ok {
		return errHandOver
	}
	ctx, cancel, err := cliapp.WithTimeout(c)
	if err != nil {
		return err
	}
	defer cancel()
	dctx, dcancel := context.WithTimeout(ctx, relay.DialTimeout)
	rc, err := relay.Dial(dctx, server, a.Team, a.Member, auth)
	dcancel()
	if err != nil {
		return errHandOver
	}
	defer rc.Close()
	cl, err := teamapi.NewWith(rc, teamapi.Config{Team: a.Team, Member: a.Member, Session: a.Session, Operator: auth.Token != ""})
	if err != nil {
		return err
	}
	*committed = true
	req, err := sendcmd.Request(c)
	if err != nil {
		return err
	}
	return sendcmd.Send(ctx, c, cl, req)
}

// actor is the member of --team, --member and --session, checked as the
// full build checks them (without a credentials file: that hands over).
func actor(c *cli.Context) (teamapi.Actor, error) {
	t, err := cliapp.FlagID(c, "team", "TEAMBUS_TEAM", nil)
	if err != nil {
		return teamapi.Actor{}, err
	}
	m, err := cliapp.FlagID(c, "member", "TEAMBUS_MEMBER", nil)
	if err != nil {
		return teamapi.Actor{}, err
	}
	a := teamapi.Actor{Team: t, Member: m, Session: c.String("session")}
	return a, a.Validate()
}

// discoveryFile is the node's discovery file in its directory (package
// bus, DiscoveryFile).
const discoveryFile = "bus.json"

// relayAuth is the bus and the secret the full build would connect with,
// as it picks them without a credentials file: a user and password with
// --server, a token with --server, or the token of the node directory's
// discovery file. ok is false when there is none to show a relay.
func relayAuth(c *cli.Context) (server string, auth relay.Auth, ok bool) {
	server = c.String("server")
	switch user, pass := c.String("user"), c.String("password"); {
	case user != "" && pass != "":
		return server, relay.Auth{User: user, Password: pass}, server != ""
	case server != "":
		return server, relay.Auth{Token: c.String("token")}, c.String("token") != ""
	}
	dir, err := cliapp.StateDir(c)
	if err != nil {
		return "", auth, false
	}
	b, err := os.ReadFile(filepath.Join(dir, discoveryFile))
	if err != nil {
		return "", auth, false
	}
	var d struct {
		URL   string `json:"url"`
		Token string `json:"token"`
	}
	if json.Unmarshal(b, &d) != nil || d.URL == "" || d.Token == "" {
		return "", auth, false
	}
	return d.URL, relay.Auth{Token: d.Token}, true
}

// execOther replaces this process with the client build beside it, else
// the full build, running args. It returns only when neither can run.
func execOther(args []string, stderr io.Writer) int {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		fmt.Fprintf(stderr, "teambus: find this binary: %v\n", err)
		return teambus.ExitPermanent
	}
	dir := filepath.Dir(exe)
	for _, name := range []string{"teambus-client", "teambus"} {
		other := filepath.Join(dir, name)
		if other == exe {
			continue
		}
		if fi, err := os.Stat(other); err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			continue
		}
		argv := append([]string{other}, args[1:]...)
		err := syscall.Exec(other, argv, os.Environ())
		fmt.Fprintf(stderr, "teambus: run %s: %v\n", other, err)
		return teambus.ExitTransient
	}
	fmt.Fprintf(stderr, "teambus: %s runs `teambus send` through a sidecar only: install teambus-client or teambus beside it (%s) for everything else\n", filepath.Base(exe), dir)
	return teambus.ExitPermanent
}
