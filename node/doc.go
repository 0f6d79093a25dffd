// Package node is the server side of teambus that members reach: the team
// service. It answers the member API (package member) on the service
// subjects of the data account, tbsvc.<team>.<verb>, as a nats.go micro
// service in a queue group, so every node of a cluster (and every
// `teambus serve` beside an external NATS) shares the load.
//
// Identity comes from the server, never from the payload: a member's
// request arrives through its team's member account's service import, and
// the server sets the Nats-Request-Info header (looked up by its exact
// key) with the calling account and user. The account must be the member
// account of the subject's team and the user <team>.<member>; the
// operator's requests (published inside the data account, with no such
// header) name the member in the payload. Anything else is refused.
//
// Every verb calls the team.Service method everyone uses, with the
// team.Actor of the caller: one code path for members, sidecars and the
// command line. The service sets the sender of mail, scopes message ids
// per sender, lets only the lead ask a teammate to shut down, and answers
// only the caller (micro's respond on the server-made reply subject). A
// refused request is answered to the caller and logged in the node's log,
// never written into any team's streams.
package node
