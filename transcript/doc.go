// Package transcript carries Claude Code transcripts into the bus and back
// out, so a crashed member's conversation can resume on any host with
// `claude --resume <session>`.
//
// A team's transcripts live in one stream, TBT_<team>, on two kinds of
// subjects built only from validated ids:
//
//	tb.<team>.trc.<member>.<session>.<gen>  chunks: bytes of the file, at most ChunkSize each,
//	                                        header Tb-Off = their offset in the file
//	tb.<team>.trm.<member>.<session>        the manifest: the last message of the subject
//
// A sync reads the manifest of (member, session), sends only the bytes
// appended to the file since (up to its last complete line), each chunk
// with the publish id <member>.<session>.<gen>.<offset>.<length> so a
// retried chunk is stored once, and only then writes the new manifest:
// size, sha256 of the first size bytes, the sha256 state that lets the
// next sync hash only the new bytes, a hash of the last 4 KiB, the working
// directory and the time. The manifest is a compare-and-set on the
// subject's last sequence with a subject rollup, so one manifest per
// session is kept and two syncs never both win.
//
// A kill -9 during a sync leaves chunks the manifest does not count; the
// stored transcript is the one the manifest describes, older or newer,
// never torn. The next sync resends from the manifest's size. Restore
// reads the manifest and the chunks of its generation in stream order,
// taking from each only the bytes not yet written, hashes them, and writes
// a temporary file it renames into place only when the size and sha256
// match (ErrCorrupt otherwise). Chunks are published one at a time, each
// after the previous one's ack, so every chunk in the stream is preceded
// by chunks covering all bytes before its offset.
//
// A transcript that shrank, or whose last synced 4 KiB changed, starts a
// new generation: sent whole under the next generation number, and the
// old generation's chunks are purged once the new manifest is written. So
// a transcript takes its size plus a few hundred bytes per sync (message
// headers, one manifest), never a copy per sync.
//
// The stream has no byte limit of its own (it reserves nothing of the
// node's store): transcripts stay as long as the team, and DeleteTeam
// removes them.
package transcript
