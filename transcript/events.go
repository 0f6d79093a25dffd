package transcript

import (
	"errors"

	"github.com/teambus/teambus"
)

// SyncedData is the data of a transcript.synced event: a sync of member's
// transcript by the hook event via.
func SyncedData(member, via string, r SyncResult) map[string]any {
	return map[string]any{"name": member, "session": r.SessionID, "size": r.Size, "sent": r.Sent,
		"sha256": r.SHA256, "gen": r.Gen, "via": via, "took_ms": r.Took.Milliseconds()}
}

// RestoredData is the data of a transcript.restored event for the outcome
// of Restore: info and path on success; on failure the reason ("none",
// "corrupt" or "unavailable") and the fallback, a fresh session with the
// brief.
func RestoredData(member string, info Info, path string, err error) map[string]any {
	d := map[string]any{"name": member, "ok": err == nil}
	if info.SessionID != "" {
		d["session"], d["size"], d["sha256"], d["gen"] = info.SessionID, info.Size, info.SHA256, info.Gen
	}
	if err == nil {
		d["path"], d["kept"] = path, info.Kept
		return d
	}
	d["reason"], d["fallback"] = Reason(err), "brief"
	return d
}

// Reason names why a restore failed: "none" (no transcript synced),
// "corrupt" (it failed its checks), "invalid" (bad input) or
// "unavailable".
func Reason(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrNone):
		return "none"
	case errors.Is(err, ErrCorrupt):
		return "corrupt"
	case errors.Is(err, teambus.ErrInvalid):
		return "invalid"
	}
	return "unavailable"
}
