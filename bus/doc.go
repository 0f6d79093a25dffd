// Package bus owns the NATS side of teambus: the embedded bus node, the
// connection to a bus (the embedded node or any NATS 2.11+ deployment with
// JetStream), the stream declarations, the mailbox and the event stream.
//
// # The node
//
// A node is an embedded nats-server with JetStream on a file store, run by
// `teambus bus start` (Run) or inside another process (Open). Everything
// it keeps lives in one directory:
//
//	bus.lock    flock held by the running node; holds its pid
//	bus.json    discovery file: URL, token, pid, version, store, sync (0600)
//	bus.token   the generated auth token, kept across restarts (0600)
//	store/      the JetStream store (the server adds "jetstream/")
//
// Only one node runs per directory: Open takes an exclusive, non-blocking
// flock on bus.lock and a second node is refused (teambus.ErrState, exit
// 2) with the pid and URL of the running one. The kernel drops the lock
// when the process dies, so a node killed with kill -9 never blocks its
// successor; its stale bus.json is overwritten by the next node, and Stop
// removes it. Clients find the node through bus.json (ReadDiscovery,
// Connect); the file is written atomically (temporary file, fsync, rename,
// fsync of the directory) after the server accepts clients, and removed by
// Close before the server shuts down.
//
// # Security
//
// The node listens on loopback only unless NodeConfig.AllowRemote is set,
// and every client, in-process ones included, must present the token. The
// token is NodeConfig.Token or, when that is empty, a random 32-byte token
// kept in bus.token, so clients that reconnect after a node restart are
// still let in. The monitoring endpoint (NodeConfig.HTTP, off by default)
// has no authentication and is accepted on loopback only.
//
// # Durability
//
// The default sync mode, SyncModeAlways, makes the store fsync every write
// before the server acknowledges it: an acknowledged message survives a
// kill -9 of the node, an OS crash and a power loss. SyncModeInterval
// writes every message to the OS before acknowledging it and fsyncs every
// SyncInterval (default 2m): acknowledged messages still survive a process
// crash, but up to one interval of them may be lost on power loss or an OS
// crash. It is several times faster on slow disks. The mode is server
// wide; streams must not set AsyncPersistMode, which acknowledges before
// writing and loses acknowledged messages on kill -9. Node.CheckSync
// verifies that the running JetStream uses the configured mode.
//
// # Clustering
//
// NodeConfig.ClusterListen and Routes join nodes into a NATS cluster with
// clustered JetStream (replicated streams need three nodes). Routes are
// authenticated with the node token, so every node of a cluster needs the
// same NodeConfig.Token, and each a distinct server name (the default
// name is the host name plus a hash of the directory).
//
// # nats-server behaviour worth knowing
//
//   - Port 0 means the default port 4222 to nats-server; NodeConfig maps
//     port 0 to -1 (a random free port). The discovery file carries the
//     port the server really listens on.
//   - Start reports a failure to listen or to open the store only through
//     Fatalf of its logger, whose default implementation exits the
//     process. The node's logger keeps that message and Open returns it.
//   - s.ClientURL() and an in-process connection's ConnectedUrl() are not
//     trustworthy addresses; use Node.URL or the discovery file.
package bus
