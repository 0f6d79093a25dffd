package teamapi

import (
	"encoding/json"
	"time"

	"github.com/teambus/teambus"
)

// SendRequest is a message to send. From is never part of it: the
// service sets it to the caller.
type SendRequest struct {
	Actor
	To   string              `json:"to,omitempty"`
	Type teambus.MessageType `json:"type,omitempty"`
	ID   string              `json:"id,omitempty"`
	Body string              `json:"body"`
	Data json.RawMessage     `json:"data,omitempty"`
}

// BatchMessage is one message of a SendBatchRequest, as a SendRequest
// without the caller. Line, when set, is where the message came from (a
// line of a file): errors name it.
type BatchMessage struct {
	To   string              `json:"to,omitempty"`
	Type teambus.MessageType `json:"type,omitempty"`
	ID   string              `json:"id,omitempty"`
	Body string              `json:"body"`
	Data json.RawMessage     `json:"data,omitempty"`
	Line int                 `json:"line,omitempty"`
}

// SendBatchRequest stores several messages from the caller, in order, in
// atomic batches (at most team.MaxSendBatch a request): every message is
// checked before any is stored. Check only checks them and stores
// nothing, so a caller with more than one request of messages checks them
// all first.
type SendBatchRequest struct {
	Actor
	Messages []BatchMessage `json:"messages"`
	Check    bool           `json:"check,omitempty"`
}

// SendBatchReply is one result per message, in order (none for Check).
type SendBatchReply struct {
	Results []SendResult `json:"results"`
}

// Inbox read modes.
const (
	// InboxPeek lists the unacknowledged mail and returns it at once: it
	// comes back on the next read.
	InboxPeek = "peek"
	// InboxLease fetches the mail without returning it: each message
	// comes with a token to ack (or release) it by; unacked it is
	// redelivered after the inbox ack wait.
	InboxLease = "lease"
	// InboxAck acknowledges what it returns (final).
	InboxAck = "ack"
)

// InboxRequest reads the caller's inbox.
type InboxRequest struct {
	Actor
	Mode string `json:"mode,omitempty"` // InboxPeek (default), InboxLease, InboxAck
	Max  int    `json:"max,omitempty"`
	// WaitMS blocks up to this many milliseconds for mail when none is
	// there.
	WaitMS int64 `json:"wait_ms,omitempty"`
}

// Leased is a message of an inbox read with the token that acks it
// (InboxLease only).
type Leased struct {
	teambus.Message
	Token string `json:"token,omitempty"`
}

// InboxReply is the mail read: at most Max messages, and fewer when more
// would take more than half of what an answer of the bus carries (the
// rest stay in the inbox for the next read; the first message always
// comes).
type InboxReply struct {
	Messages []Leased `json:"messages"`
}

// Token acks or releases one leased message: the token of the lease and
// the message's sequence (checked against the token).
type Token struct {
	Seq   uint64 `json:"seq"`
	Token string `json:"token"`
}

// AckRequest acknowledges mail by sequence (as `teambus ack` does) or by
// the tokens of a lease.
type AckRequest struct {
	Actor
	Seqs   []uint64 `json:"seqs,omitempty"`
	Tokens []Token  `json:"tokens,omitempty"`
}

// AckReply reports an ack.
type AckReply struct {
	Acked   []uint64 `json:"acked"`
	Already []uint64 `json:"already"`
}

// ReleaseRequest returns leased mail for redelivery now.
type ReleaseRequest struct {
	Actor
	Tokens []Token `json:"tokens"`
}

// ReleaseReply counts what was returned.
type ReleaseReply struct {
	Released int `json:"released"`
}

// Task operations.
const (
	TaskClaim    = "claim"
	TaskNext     = "next"
	TaskComplete = "complete"
	TaskFail     = "fail"
	TaskBlock    = "block"
	TaskRelease  = "release"
	TaskReassign = "reassign"
	TaskReopen   = "reopen"
	// TaskAdd adds task ID (the lead's and the operator's): pending until
	// Deps are complete.
	TaskAdd = "add"
)

// TaskRequest is one task operation of the caller.
type TaskRequest struct {
	Actor
	Op     string `json:"op"`
	ID     string `json:"id,omitempty"`
	Commit string `json:"commit,omitempty"`
	Reason string `json:"reason,omitempty"`
	On     string `json:"on,omitempty"`
	To     string `json:"to,omitempty"`
	// The new task of TaskAdd.
	Description string   `json:"description,omitempty"`
	Deps        []string `json:"deps,omitempty"`
	Priority    int      `json:"priority,omitempty"`
	Quantum     string   `json:"quantum,omitempty"`
}

// TaskReply is the task after the operation; Changed is false when it
// was already in the state asked for (complete twice).
type TaskReply struct {
	Task    *teambus.Task `json:"task"`
	Changed bool          `json:"changed"`
}

// CheckpointRequest records progress on the caller's task. Its content
// is capped (teambus.ValidateCheckpoint): LastAction at
// teambus.MaxCheckpointLastAction bytes, each Done, Remaining and Files
// item at teambus.MaxCheckpointItem, Data (a JSON value) at
// teambus.MaxCheckpointData, the whole at teambus.MaxCheckpointSize as
// JSON; past a cap it is refused (exit 2) and nothing is recorded. Big
// content goes in files whose paths the checkpoint names.
type CheckpointRequest struct {
	Actor
	Task       string          `json:"task,omitempty"`
	Done       []string        `json:"done,omitempty"`
	Remaining  []string        `json:"remaining,omitempty"`
	LastAction string          `json:"last_action,omitempty"`
	Files      []string        `json:"files,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"`
	Auto       bool            `json:"auto,omitempty"`
}

// HeartbeatRequest renews the caller's heartbeat. The service fills the
// member, session and epoch in; Rev is the revision of the caller's
// previous beat, 0 for the first.
type HeartbeatRequest struct {
	Actor
	Status     teambus.MemberStatus `json:"status,omitempty"`
	Task       string               `json:"task,omitempty"`
	ContextPct int                  `json:"context_pct,omitempty"`
	PID        int                  `json:"pid,omitempty"`
	Rev        uint64               `json:"rev,omitempty"`
}

// HeartbeatReply is the revision of the beat.
type HeartbeatReply struct {
	Rev uint64 `json:"rev"`
}

// JoinRequest registers a new incarnation of the caller: Session becomes
// the only one accepted.
type JoinRequest struct {
	Actor
}

// BriefRequest asks for the respawn prompt of Member (the caller itself
// unless the caller is the lead or the operator).
type BriefRequest struct {
	Actor
	Of   string `json:"of,omitempty"`
	Mail int    `json:"mail,omitempty"`
}

// ReplayRequest reads the caller's own mail (to it, from it, and
// broadcasts; the lead's: the team's whole mailbox) from the mailbox,
// from SinceSeq on, at most Limit messages (default and cap ReplayMax). A
// page also stops before its messages
// would take more than half of what an answer of the bus carries: follow
// ReplayReply.Next (ReplayOwn does).
type ReplayRequest struct {
	Actor
	SinceSeq uint64 `json:"since_seq,omitempty"`
	Limit    int    `json:"limit,omitempty"`
}

// ShowRequest asks for the caller's team as `team show` prints it (a
// team.View).
type ShowRequest struct {
	Actor
}

// ReplayMax caps the messages of one replay page.
const ReplayMax = 1000

// ReplayReply is one page of the caller's mail; Next is where the next
// page starts (0 when this page reached the end). A page ends at
// ReplayMax messages or at the service's byte budget, whichever comes
// first.
type ReplayReply struct {
	Messages []teambus.Message `json:"messages"`
	Next     uint64            `json:"next,omitempty"`
}

// wait converts a duration to the wire's milliseconds.
func waitMS(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return max(d.Milliseconds(), 1)
}
