// Package transcript carries Claude Code transcripts into the bus and back
// out, so a crashed member's conversation can resume on any host with
// `claude --resume <session>`.
//
// A team's transcripts live in one stream, TBT_<team>, on subjects built
// only from validated ids:
//
//	tb.<team>.tr.<member>.<session>.<gen>  data chunks of a generation (at most ChunkSize bytes each)
//	tb.<team>.tr.<member>.<session>.c      the session's commits: a manifest (header Tb-Manifest)
//	                                       and the sync's last bytes (at most 64 KiB)
//
// Every message carries its bytes' offset in the file (header Tb-Off).
//
// A sync reads the session's newest commit (one direct get), reads only
// the bytes appended to the file since, up to its last complete line,
// hashes only them (the manifest saves the sha256 state, which crypto/sha256
// can marshal), and stores them. A sync of a few KB — every tool batch of a
// running session — is one message, hence one fsync: the commit with the
// new bytes and the new manifest {generation, size, sha256 state, hash of
// the last 4 KiB, working directory, and the project directory Claude Code
// used when it is not the one the working directory gives}, about 340
// bytes with the subject and headers. A larger one sends data chunks first, each after the previous
// one's ack and with the publish id <member>.<session>.<gen>.<offset>.<length>
// so a retried chunk is stored once, then the commit; a long one commits
// every 4 MiB. Every commit is a compare-and-set on the session's newest
// commit (Nats-Expected-Last-Subject-Sequence), so two syncs never both
// win.
//
// A kill -9 during a sync leaves data chunks no commit counts; the stored
// transcript is the one the newest commit describes, older or newer,
// never torn, and the next sync resends from there. Restore reads the
// newest commit of the member and the session's messages of its generation
// in stream order up to that commit, taking from each only the bytes not yet
// written (every message follows messages covering all bytes before its
// offset, because each is sent only after the previous one was stored),
// checks size and sha256, and renames a temporary file into
// ~/.claude/projects/<key>/<session>.jsonl only when both match
// (ErrCorrupt otherwise).
//
// A transcript that shrank, or whose last synced 4 KiB changed, starts a
// new generation: sent whole under the next generation number, and the old
// generation's data and commits are purged once the new one is committed.
// A transcript thus takes its size plus about 340 bytes per sync, never a
// copy per sync: 1.02× its size at 20 KB per sync, about 1.1× at 3.5 KB.
//
// The stream has no byte limit of its own (it reserves nothing of the
// node's store): transcripts stay as long as the team, and DeleteTeam
// removes them. It is created by Open, or by the first sync of a store
// made with New (no I/O, for the one-shot hooks).
package transcript
