//go:build teambus_agent

package teamapi

import "errors"

// The lean agent build (-tags teambus_agent, cmd/teambus-agent) links no
// NATS client: it has no Transport over a NATS connection (nats.go), and
// these errors stand in for the NATS client's, with its texts.

// ErrNoResponders is what a Transport reports when no team service
// answers.
var ErrNoResponders = errors.New("nats: no responders available for request")

var (
	errMaxPayload = errors.New("nats: maximum payload exceeded")
	errTimeout    = errors.New("nats: timeout")
)
