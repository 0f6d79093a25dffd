// Package bus is the client side of teambus's connection: the connection
// to a bus (an embedded node of package node, or any NATS 2.11+ deployment
// with JetStream), the discovery file a local node writes (ReadDiscovery,
// Connect), the member credentials files a client reads and writes
// (Creds, ReadCreds, WriteCreds) and the subjects of the team service, the
// cluster (Replicas, AutoReplicas), bus status (Status), and the health
// question a client asks a node after a timeout (StorageTrouble).
//
// It also holds what the mailbox (package mailbox) and the event log
// (package eventlog) share: a team's stream declaration (TeamStream), the
// errors and retries of a stream whose leader is being elected
// (ErrNoLeader, WhileElecting), and reads through an ordered consumer
// (ReadOrdered). The node itself, its authentication and credential store,
// its store check and the team service are package node.
//
// A request the server refuses is never answered; Conn.Denied and
// Conn.DeniedC report the refusal. Conn.Replicas is 3 on a cluster of
// three nodes or more (AutoReplicas, from the client URLs the cluster
// advertises); Connect retries the JetStream check until the cluster has
// elected a meta leader, within its timeout.
package bus
