// Package teamapi is the member API of a team, defined once: the table of
// verbs (Verbs), the request and reply types, the Actor every request
// acts as, the typed errors that travel on the wire, the subjects of the
// team service, the API interface, and Client, the API's calls over a
// Transport (a NATS connection, or the sidecar relay of package relay).
//
// team.Service implements the API locally (Service.API) with these very
// types; the team service of package node answers it on the bus: one
// endpoint per verb, each request decoded once into its type, the actor
// decided by the server.
//
// A member's credential lands in its team's member account, which holds no
// JetStream and nothing else that answers: the only subjects it may
// publish are tb.<verb>, which the account imports as the service subjects
// of its own team (tbsvc.<team>.<verb> in the data account). The service
// learns who calls from the Nats-Request-Info header the server sets,
// never from the payload. The holder of the node token (the operator)
// publishes to tbsvc.<team>.<verb> directly and names the member in the
// request.
//
// A refused request comes back as an *Error: its Code (invalid,
// not_found, state, refused, conflict, fenced, unavailable, no_leader,
// no_task) travels in the Nats-Service-Error-Code header and the body, and
// the error matches with errors.Is the same sentinel errors (teambus.Err*,
// bus.ErrNoLeader, ErrRefused, ErrNoTask) as the error the service met,
// so a command exits with the code of the contract (1 transient, 2
// permanent, 3 conflict) and a caller never reads the text.
package teamapi
