// Package transcript carries Claude Code transcripts into the bus and back
// out, so a crashed member's conversation can resume on any host with
// `claude --resume <session>`.
//
// A team's transcripts live in one stream, TBT_<team>, on subjects built
// only from validated ids:
//
//	tb.<team>.tr.<member>.<session>.<gen>.d  data chunks (at most ChunkSize bytes each)
//	tb.<team>.tr.<member>.<session>.<gen>.c  commits: the manifest (header Tb-Manifest)
//	                                         and the sync's last bytes (at most 64 KiB)
//
// Every message carries its bytes' offset in the file (header Tb-Off).
//
// A sync reads the session's newest commit (one direct get), reads only
// the bytes appended to the file since, up to its last complete line,
// hashes only them (the manifest saves the sha256 state, which crypto/sha256
// can marshal), and stores them. A sync of a few KB — every tool batch of a
// running session — is one message, hence one fsync: the commit with the
// new bytes and the new manifest {gen, size, sha256 state, hash of the last
// 4 KiB, working directory}. A larger one sends data chunks first, each
// after the previous one's ack and with the publish id
// <member>.<session>.<gen>.<offset>.<length> so a retried chunk is stored
// once, then the commit; a long one commits every 4 MiB. Every commit is a
// compare-and-set on the newest commit of the session in any generation
// (Nats-Expected-Last-Subject-Sequence with a subject filter), so two syncs
// never both win.
//
// A kill -9 during a sync leaves data chunks no commit counts; the stored
// transcript is the one the newest commit describes, older or newer,
// never torn, and the next sync resends from there. Restore reads the
// newest commit of the member and the messages of its generation in
// stream order up to that commit, taking from each only the bytes not yet
// written (every message follows messages covering all bytes before its
// offset, because each is sent only after the previous one was stored),
// checks size and sha256, and renames a temporary file into
// ~/.claude/projects/<key>/<session>.jsonl only when both match
// (ErrCorrupt otherwise).
//
// A transcript that shrank, or whose last synced 4 KiB changed, starts a
// new generation: sent whole under the next generation number, and the old
// generation is purged once the new one is committed. A transcript thus
// takes its size plus a few hundred bytes per sync (subject, headers,
// manifest), never a copy per sync.
//
// The stream has no byte limit of its own (it reserves nothing of the
// node's store): transcripts stay as long as the team, and DeleteTeam
// removes them. It is created by Open, or by the first sync of a store
// made with New (no I/O, for the one-shot hooks).
package transcript
