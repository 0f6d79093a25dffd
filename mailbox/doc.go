// Package mailbox is a team's durable mailbox on the bus: the stream
// TBM_<team> of its messages (Mailbox, NewMailbox), sending one message or
// a batch stored whole or not at all (Send, SendBatch, SendAsync, and the
// fenced variants that fail once the sender's incarnation marker moved),
// reading a member's inbox and acking it (Inbox, Ack), leases that keep
// messages in flight until acked or released (Lease, LeaseToken), replay
// and tail of the whole stream through an ordered consumer (Replay,
// Tail), and held mail. The connection, the stream declaration it shares with the event
// log (bus.TeamStream) and the election-aware retries (bus.WhileElecting)
// are package bus's; who may send what is package team's.
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
package mailbox
