// Command teambus-agent is the `teambus` an agent's shell runs in a session
// bound by the hooks: the SessionStart hook links $TEAMBUS_DIR/bin/teambus
// to it when it is installed beside teambus. It starts in a few
// milliseconds less than the client build because it links no NATS client
// and none of the team's state: it runs one command itself, `teambus send`
// of one message through the relay of the member's sidecar (package
// relay), with the very code of the full build (packages cliapp and
// sendcmd). Everything else — another command, help, --from, --creds, no
// sidecar relay to reach, TEAMBUS_NO_RELAY — it hands over, before it has
// read or sent anything, to the client build beside it (teambus-client),
// else the full build (teambus): same arguments, environment and standard
// streams, so every command behaves exactly as there.
//
// Build it with the teambus_agent tag, which leaves the NATS client out of
// packages teamapi and relay:
//
//	CGO_ENABLED=0 go build -tags teambus_agent,urfave_cli_no_docs -o teambus-agent ./cmd/teambus-agent
package main
