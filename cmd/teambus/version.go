package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

// version is the teambus version, set at build time with
// -ldflags "-X main.version=v1.2.3"; otherwise the module version.
var version = ""

// versionCommand is `teambus version`.
func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the versions of teambus and of the embedded NATS server",
		Flags: []cli.Flag{jsonFlag()},
		Action: func(c *cli.Context) error {
			if err := exactArgs(c, 0); err != nil {
				return err
			}
			return printVersion(c.App.Writer, c.Bool("json"))
		},
	}
}

// buildVersion is version, else the main module version, else "dev".
func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// printVersion prints the versions of teambus, the embedded NATS server and
// Go, as text or as JSON.
func printVersion(w io.Writer, asJSON bool) error {
	v := struct {
		Version    string `json:"version"`
		NATSServer string `json:"nats_server"`
		Go         string `json:"go"`
	}{buildVersion(), natsServerVersion(), runtime.Version()}
	if asJSON {
		return printJSON(w, v)
	}
	_, err := fmt.Fprintf(w, "teambus %s (nats-server %s, %s)\n", v.Version, v.NATSServer, v.Go)
	return err
}
