// Package bus is the client side of teambus: the connection to a bus (an
// embedded node of package node, or any NATS 2.11+ deployment with
// JetStream), the discovery file a local node writes (ReadDiscovery,
// Connect), member credentials files and the credential store the node
// checks (Creds, IssueCreds, RevokeCreds), the stream declarations, the
// mailbox (send, lease, ack, replay), the event stream, ordered consumers,
// bus status, and the health question a client asks a node after a
// timeout (StorageTrouble). The node itself, its authentication, store
// check and the team service are package node.
//
// A request the server refuses is never answered; Conn.Denied and
// Conn.DeniedC report the refusal. Conn.Replicas is 3 on a cluster of
// three nodes or more (AutoReplicas, from the client URLs the cluster
// advertises); Connect retries the JetStream check until the cluster has
// elected a meta leader, within its timeout.
//
// # The event log
//
// Every team has an event stream, TBE_<team> (events.go), in the envelope
// of package eventlog ({v, ts, sid, seq, type, feature, agent, pane_id, data}):
// subjects tb.<team>.evt.<sid token>.<type token>, where the sid token is
// a hash of the sid and the type token the type with dots as dashes (a
// hash for types outside the rule), so user text never forms a subject;
// file storage, DiscardNew with an explicit MaxBytes, and a dedupe window
// on the message id ev/<hash of sid>/<seq>. An event without a seq gets
// the session's next one: the last event of the session (a direct get,
// last by subject over the session's wildcard) plus one, published with
// an expected-last-subject-sequence on that wildcard, retried when
// another writer won. Imported lines are stored exactly as written, so
// Export returns them byte for byte; Import checks the stream itself as
// well as the dedupe window, so importing a file twice stores it once.
// Replay reads through an ordered consumer (constant memory), filtering
// type and session on the server and agent and times on the client.
//
// # Recipients' consumers
//
// A recipient's two durable consumers on the mailbox, its agent inbox and
// its sidecar's, exist only while in use: the first read creates one, and
// the server removes it after MailboxConfig.ConsumerIdle unused. What it
// knew, which of its mail was acked, is kept in a recipient record in the
// team's state bucket, updated with compare-and-set after each ack, from
// which the next read creates it again (recipient.go). An idle team holds
// no consumer.
package bus
