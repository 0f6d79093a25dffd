// Package jserr names the JetStream API error codes teambus acts on, in
// one place, and matches them. nats.go/jetstream exports constants for
// some (jetstream.JSErrCode…); the others are named here after the
// server's identifiers (nats-server/v2/server/jetstream_errors_generated.go),
// so no bare number appears elsewhere.
package jserr
