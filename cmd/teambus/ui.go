//go:build !teambus_client

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/teambus/teambus"
	"github.com/teambus/teambus/kv"
	"github.com/teambus/teambus/mailbox"
	"github.com/teambus/teambus/team"
	"github.com/teambus/teambus/ui"
)

func uiCommand() *cli.Command {
	return &cli.Command{
		Name:  "ui",
		Usage: "serve a live web view of the teams (foreground)",
		Description: "Prints the page's URL, with its access token, as the first line of stdout; the token stays\n" +
			"valid while the command runs. The page shows each team's members, tasks (a dependency graph),\n" +
			"mail and events, updated live from the bus. Read-only unless --allow-actions. A --listen address\n" +
			"that is not loopback needs --http-tls-cert and --http-tls-key, or --insecure.",
		Flags: flags(connFlags(), logFlags(), []cli.Flag{
			&cli.StringFlag{Name: "listen", Usage: "address to serve on", EnvVars: []string{"TEAMBUS_UI_LISTEN"}, Value: "127.0.0.1:0"},
			&cli.StringFlag{Name: "team", Usage: "open this team's page directly", EnvVars: []string{"TEAMBUS_TEAM"}},
			&cli.BoolFlag{Name: "open", Usage: "open the page in a browser, where one is available", EnvVars: []string{"TEAMBUS_UI_OPEN"}},
			&cli.BoolFlag{Name: "allow-actions", Usage: "allow operator actions: release or pause a task, probe a member (each logged as an event)", EnvVars: []string{"TEAMBUS_UI_ALLOW_ACTIONS"}},
			&cli.StringFlag{Name: "http-tls-cert", Usage: "certificate file to serve the page over HTTPS", EnvVars: []string{"TEAMBUS_UI_TLS_CERT"}},
			&cli.StringFlag{Name: "http-tls-key", Usage: "key file of --http-tls-cert", EnvVars: []string{"TEAMBUS_UI_TLS_KEY"}},
			&cli.StringSliceFlag{Name: "allow-host", Usage: "a host name the page may be opened under, beside IP addresses, localhost and the --listen name (requests for any other Host are refused: DNS rebinding), repeatable", EnvVars: []string{"TEAMBUS_UI_ALLOW_HOST"}},
			&cli.BoolFlag{Name: "insecure", Usage: "serve plain HTTP on an address that is not loopback", EnvVars: []string{"TEAMBUS_UI_INSECURE"}},
		}),
		Action: runUI,
	}
}

func runUI(c *cli.Context) error {
	if err := exactArgs(c, 0); err != nil {
		return err
	}
	teamID := c.String("team")
	if teamID != "" {
		if err := teambus.ValidateID("team", teamID); err != nil {
			return err
		}
	}
	cert, key := c.String("http-tls-cert"), c.String("http-tls-key")
	if (cert == "") != (key == "") {
		return usageError(c, "--http-tls-cert and --http-tls-key go together")
	}
	listen := c.String("listen")
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return usageError(c, "invalid --listen %q: %v", listen, err)
	}
	if !loopback(host) && cert == "" && !c.Bool("insecure") {
		return usageError(c, "--listen %s is not a loopback address: pass --http-tls-cert and --http-tls-key, or --insecure", listen)
	}
	log, conn, err := logConn(c)
	if err != nil {
		return err
	}
	defer conn.Close()
	r := conn.Replicas()
	svc := team.New(conn.JS, team.Config{Logger: log, Mailbox: mailbox.MailboxConfig{Replicas: r}, KV: kv.Config{Replicas: r}})
	srv, err := ui.New(ui.Config{Service: svc, Token: ui.NewToken(), AllowActions: c.Bool("allow-actions"), Secure: cert != "", Logger: log, Reachable: conn.NC.IsConnected, Hosts: append([]string{host}, c.StringSlice("allow-host")...)})
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return teambus.Invalidf("listen on %s: %w", listen, err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, ErrorLog: nil}
	scheme := "http"
	if cert != "" {
		scheme = "https"
	}
	addr := ln.Addr().(*net.TCPAddr)
	shown := addr.IP.String()
	if addr.IP.IsUnspecified() {
		shown = "127.0.0.1"
	}
	u := srv.URL(fmt.Sprintf("%s://%s", scheme, net.JoinHostPort(shown, fmt.Sprint(addr.Port))), teamID)
	fmt.Fprintln(c.App.Writer, u)
	if c.Bool("open") {
		openBrowser(u, log.Warn)
	}
	errc := make(chan error, 1)
	go func() {
		if cert != "" {
			errc <- hs.ServeTLS(ln, cert, key)
		} else {
			errc <- hs.Serve(ln)
		}
	}()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return teambus.Unavailablef("serve ui: %w", err)
	case <-c.Context.Done():
	}
	// Live streams never end on their own: close the feeds first, then
	// give requests a moment.
	_ = srv.Close() // shutting down: the listener's error is the one to report
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = hs.Shutdown(ctx)
	return nil
}

// loopback reports whether host names only this machine.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// openBrowser starts the desktop's URL opener, if there is one.
func openBrowser(u string, warn func(string, ...any)) {
	name, args := "xdg-open", []string{u}
	switch runtime.GOOS {
	case "darwin":
		name = "open"
	case "windows":
		name, args = "rundll32", []string{"url.dll,FileProtocolHandler", u}
	}
	if _, err := exec.LookPath(name); err != nil {
		warn("no browser to open: open the URL by hand", "opener", name)
		return
	}
	cmd := exec.Command(name, args...)
	if err := cmd.Start(); err != nil {
		warn("open browser", "err", err)
		return
	}
	go func() { _ = cmd.Wait() }()
}
