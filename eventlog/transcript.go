package eventlog

// Event types of the transcripts teambus carries for a Claude member
// (package transcript). Both carry data.name (the member), session, size,
// sha256 and gen.
const (
	// EvTranscriptSynced: a final sync (PreCompact, SessionEnd) stored the
	// member's transcript: data.via (the hook event), sent.
	EvTranscriptSynced = "transcript.synced"
	// EvTranscriptRestored: a respawn wrote the member's newest transcript
	// on its host (data.ok true, data.path), or could not and fell back to
	// a fresh session with the brief (data.ok false, data.reason "none" or
	// "corrupt" or "unavailable", data.fallback "brief").
	EvTranscriptRestored = "transcript.restored"
)
