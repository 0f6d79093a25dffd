// Package node is the server side of teambus: the embedded NATS node
// (start, stop, cluster, accounts and credential checks, the discovery
// file, the store check, health) and the team service that members reach.
// Clients, the node's own connections included, use package bus; nothing
// but the command line (`teambus bus start`) and tests imports this
// package. Tests start nodes with package nodetest.
//
// # The node
//
// A node is an embedded nats-server with JetStream on a file store, run by
// `teambus bus start` (Run) or inside another process (Start). Everything
// it keeps lives in one directory:
//
//	bus.lock    flock held by the running node; holds its pid
//	bus.json    discovery file: URL, token, pid, version, store, sync (0600)
//	bus.token   the generated auth token, kept across restarts (0600)
//	store/      the JetStream store (the server adds "jetstream/")
//	bus.marks   high-water marks for the store check (0600)
//	bus.scrub   position of an interrupted `teambus bus scrub`
//	quarantine/ damaged consumer state the store check moved aside
//
// Only one node runs per directory: Start takes an exclusive, non-blocking
// flock on bus.lock and a second node is refused (teambus.ErrState, exit
// 2) with the pid and URL of the running one. The kernel drops the lock
// when the process dies, so a node killed with kill -9 never blocks its
// successor; its stale bus.json is overwritten by the next node, and Stop
// removes it. Clients find the node through bus.json (bus.ReadDiscovery,
// bus.Connect); the file is written atomically (temporary file, fsync, rename,
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
// The token is the operator's credential: every permission. A member of a
// team gets a credential of its own (IssueCreds, authstore.go, kept in
// the KV bucket TB_AUTH as a password hash): user <team>.<member>, a random
// password and the inbox prefix _TB_INBOX.<team>.<member>, written as a
// bus.Creds file that bus.Connect reads. The node's authenticator
// (server.Options.CustomClientAuthentication) checks the token, or looks
// the member's password hash up in the KV bucket TB_AUTH at every connect,
// and registers the member with MemberPermissions (auth.go): its own mail
// subjects, its own consumers, its team's buckets and event log, its own
// inbox prefix, nothing else. New credentials work at once and survive a
// restart; RevokeCreds closes the connections that use a credential.
// All teams share one account: the isolation is the permissions. A member
// may not create consumers (a consumer delivers to any subject it names),
// so whole-bucket reads use the direct get API (kv), and mail is acked only
// from the member's own consumer. A request the server refuses is never
// answered; bus.Conn.Denied and bus.Conn.DeniedC report the refusal.
//
// # Durability
//
// The default sync mode, bus.SyncModeAlways, makes the store fsync every write
// before the server acknowledges it: an acknowledged message survives a
// kill -9 of the node, an OS crash and a power loss. bus.SyncModeInterval
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
// name is the host name plus a hash of the directory). bus.Conn.Replicas is 3
// on a cluster of three nodes or more (bus.AutoReplicas, from the client URLs
// the cluster advertises), so a team created there keeps three copies of
// every stream and bucket. bus.Connect retries the JetStream check until the
// cluster has elected a meta leader, within its timeout.
//
// # Store check and health
//
// The server recovers damaged store files by dropping what it cannot read
// (a flipped byte loses a record; after a kill -9 it loses everything after
// it), and skips a record whose checksum fails, without a word. So every
// start runs a store check in the background (Node.checkStore): per stream
// teambus never deletes from (mailboxes, event logs) it trusts the
// stream's own state (sequences deleted or below the first) and reads
// only the messages written since the marks of the last run, so its cost
// does not grow with the history. The node records high water marks
// (MarksFile, bus.marks): the last sequence of those streams and the
// acknowledged position and configuration of their durable consumers,
// rewritten when they change while it runs (every second at most) and
// when it closes, then marked clean. After a clean stop nothing is read;
// after a kill -9 the last second's messages are; without marks (an old
// store, a cluster) everything is. Damage in old data is found by an
// explicit scrub (Scrub, scrub.go, `teambus bus scrub`): it reads every
// message, records its position in ScrubFile (bus.scrub) so an
// interrupted scrub continues, and reports what the start-up check would.
// The next start compares: a tail below the mark or a stream gone is
// reported; a durable consumer the server dropped because its state file
// was damaged is created again from its last acknowledged position (its
// unacknowledged mail is delivered again, none lost), its damaged state
// moved to quarantine/. Findings are logged as errors ("store damaged") and
// reported by Node.Health.
//
// A stream whose store failed to write (no space left on device) takes no
// message until the node restarts, and the server answers its publishes
// with nothing at all. The node answers health requests on bus.HealthSubject
// (Node.Health: the server's health with every stream's write error, and
// the store check's findings); a send that timed out asks (bus.StorageTrouble)
// and says why instead of only "timed out".
//
// # nats-server behaviour worth knowing
//
//   - Port 0 means the default port 4222 to nats-server; NodeConfig maps
//     port 0 to -1 (a random free port). The discovery file carries the
//     port the server really listens on.
//   - The server's Start reports a failure to listen or to open the store
//     only through Fatalf of its logger, whose default implementation
//     exits the process. The node's logger keeps that message and Start
//     returns it.
//   - s.ClientURL() and an in-process connection's ConnectedUrl() are not
//     trustworthy addresses; use Node.URL or the discovery file.
//
// # The team service
//
// The team service answers the member API (package teamapi) on the service
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
//
// # Liveness
//
// Beats are not verbs: a sidecar publishes them to tbsvc.<team>.beat (a
// member, tb.beat) and nobody answers. Every service instance receives
// every beat on a plain subscription and keeps the latest beat of each
// member in memory (liveness.go, the judge, which does no I/O; livebus.go,
// its subscriptions and workers). The heartbeat key is written when the
// incarnation or status changes and every half timeout, ended (purged,
// as an expiry) after a timeout of silence or at once when the beating
// connection closes (the system account's disconnect events, imported
// into the data account), and a stale beat is dropped and answered on the
// member's control subject tbctl.<team>.<member>, which the member account
// imports below the member's own inbox prefix.
package node
