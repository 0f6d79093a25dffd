// Package relay carries a member's one-shot commands to the team service
// through the sidecar that already runs beside the member's session.
//
// A sidecar listens on a Unix socket named after its bus, team and member,
// in a directory only its user may enter. A one-shot command of that
// member (`teambus send`, `inbox`, `ack`, `checkpoint`, `join`) finds the
// socket, shows the secret it would have connected with, sends its
// request and gets the service's answer back — no TCP connect, no NATS
// handshake, no credential check by the node of its own: about a
// millisecond of a one-shot command of a few.
//
// The relay adds no authority. A caller with the operator's token (which
// the relay compares with its own) is forwarded on the sidecar's
// connection as the operator, as it would have connected. A caller with
// the member's credential is forwarded on a connection the relay opens
// with that very credential (the node checks it, and the team service
// acts as the credential's member, as ever) and keeps for the next
// caller. Only the user who runs the sidecar may connect (the directory
// is 0700; on Linux the peer's uid is checked too). When no sidecar
// listens the command connects itself; once a request is written to a
// relay its outcome is final (it is not retried elsewhere, which could
// store a message twice).
//
// The caller's side (Dial, Conn, relay.go) links no NATS client; the
// sidecar's side (Server, Listen, server.go) does and is left out of the
// lean agent build (-tags teambus_agent, cmd/teambus-agent).
package relay
