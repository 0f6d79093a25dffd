// Package credstore is the store of member credentials the node's
// authenticator checks: the KV bucket TB_AUTH, one record per member
// holding the SHA-256 of its password (never the password), written by
// IssueCreds and RevokeCreds on the operator's connection and read by the
// authenticator at every connect. It is a package of its own so that the
// client build, which issues credentials for the operator, links no NATS
// server.
package credstore
