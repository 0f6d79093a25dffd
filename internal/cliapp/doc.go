// Package cliapp is the command line of teambus that links no NATS client:
// what teambus adds to urfave/cli v2 (flags after positionals, help, one-line
// usage errors, required flags, examples), the connection and identity flags
// of the one-shot commands, the usage errors of their arguments, and how an
// error becomes one line on stderr and an exit code. The full build
// (cmd/teambus) and the lean agent build (cmd/teambus-agent) parse a
// command line with the same code, so a command means the same in both.
package cliapp
