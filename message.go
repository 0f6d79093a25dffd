package teambus

import (
	"encoding/json"
	"time"
)

// MessageType is the kind of a mailbox message.
type MessageType string

// Message types of the specification, section 6.
const (
	MsgInfo             MessageType = "info"
	MsgQuestion         MessageType = "question"
	MsgChallenge        MessageType = "challenge"
	MsgResolution       MessageType = "resolution"
	MsgStatusCheck      MessageType = "status_check"
	MsgStatus           MessageType = "status"
	MsgReport           MessageType = "report"
	MsgShutdownRequest  MessageType = "shutdown_request"
	MsgShutdownResponse MessageType = "shutdown_response"
	MsgEscalation       MessageType = "escalation"
	MsgSystem           MessageType = "system"
)

// MessageTypes lists every message type.
var MessageTypes = []MessageType{MsgInfo, MsgQuestion, MsgChallenge, MsgResolution, MsgStatusCheck,
	MsgStatus, MsgReport, MsgShutdownRequest, MsgShutdownResponse, MsgEscalation, MsgSystem}

// SidecarTypes are the message types a sidecar answers for its member; the
// agent's inbox does not show them.
var SidecarTypes = []MessageType{MsgStatusCheck, MsgShutdownRequest}

// ParseMessageType checks a message type.
func ParseMessageType(s string) (MessageType, error) {
	for _, t := range MessageTypes {
		if string(t) == s {
			return t, nil
		}
	}
	return "", Invalidf("invalid message type %q: one of info, question, challenge, resolution, status_check, status, report, shutdown_request, shutdown_response, escalation, system", clip(s))
}

// DefaultMaxBody is the default limit on a message body, in bytes.
const DefaultMaxBody = 256 << 10

// MaxMessageID is the longest idempotency key accepted, in bytes.
const MaxMessageID = 128

// Message is one mailbox message. Seq is the stream sequence, assigned by
// the bus: the ordering key. ID is the idempotency key.
type Message struct {
	Seq   uint64          `json:"seq"`
	ID    string          `json:"id"`
	From  string          `json:"from"`
	To    string          `json:"to"`
	Type  MessageType     `json:"type"`
	Body  string          `json:"body"`
	Data  json.RawMessage `json:"data"`
	Epoch int64           `json:"epoch"`
	TS    time.Time       `json:"ts"`
	// Held is set on mail a zombie member sent; it is delivered when a lead
	// re-attaches.
	Held bool `json:"held,omitempty"`
	// HeldSince marks mail that was held while its sender was a zombie and
	// released later: when the bus stored it held. Its Seq is the release's.
	HeldSince *time.Time `json:"held_since,omitempty"`
}

// ValidateMessageID checks an idempotency key: 1 to 128 printable bytes.
// It is carried in a header, never in a subject.
func ValidateMessageID(id string) error {
	if id == "" {
		return Invalidf("invalid message id: empty")
	}
	if len(id) > MaxMessageID {
		return Invalidf("invalid message id: %d bytes, at most %d", len(id), MaxMessageID)
	}
	for _, r := range id {
		if r < 0x21 || r == 0x7f {
			return Invalidf("invalid message id %q: no spaces or control characters", clip(id))
		}
	}
	return nil
}

// ValidateData checks optional JSON data attached to a message.
func ValidateData(data []byte) error {
	if len(data) == 0 {
		return nil
	}
	if !json.Valid(data) {
		return Invalidf("invalid --data: not valid JSON")
	}
	return nil
}
