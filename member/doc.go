// Package member is the member API of a team: the requests a member (or
// the operator on a member's behalf) sends to the team service, and
// Client, the typed calls over a NATS connection.
//
// A member's credential lands in its team's member account, which holds no
// JetStream and nothing else that answers: the only subjects it may
// publish are tb.<verb>, which the account imports as the service subjects
// of its own team (tbsvc.<team>.<verb> in the data account). The service
// (package node) learns who calls from the Nats-Request-Info header the
// server sets, never from the payload, and performs the operation with
// the team.Service code everyone uses. The holder of the node token (the
// operator) publishes to tbsvc.<team>.<verb> directly and names the member
// in the request.
//
// Errors come back classed: the client turns them into the teambus
// sentinel errors with the service's one-line text, so a command exits
// with the code of the contract (1 transient, 2 permanent, 3 conflict).
package member
