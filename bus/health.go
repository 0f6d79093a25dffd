package bus

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// HealthSubject is the subject a node answers health requests on: whether
// its JetStream can store, with the write errors of its streams. The
// server answers a publish it could not store (a full disk) with nothing
// at all, so the client times out; the client asks here why.
const HealthSubject = "teambus.node.health"

// Health is a node's answer on HealthSubject.
type Health struct {
	OK     bool     `json:"ok"`
	Errors []string `json:"errors,omitempty"`
	// NoSpace: the node can not store and the disk of its store is
	// (nearly) full.
	NoSpace bool `json:"no_space,omitempty"`
}

// StorageTrouble asks the node behind nc whether it can store, after a
// publish timed out. It returns what is wrong, or "" when the node is
// healthy, does not answer in time or is not a teambus node; noSpace
// when the node says the disk of its store is full.
func StorageTrouble(nc *nats.Conn) (why string, noSpace bool) {
	if nc == nil || !nc.IsConnected() {
		return "", false
	}
	m, err := nc.Request(HealthSubject, nil, time.Second)
	if err != nil {
		return "", false
	}
	var h Health
	if json.Unmarshal(m.Data, &h) != nil || h.OK {
		return "", false
	}
	return strings.Join(h.Errors, "; "), h.NoSpace
}
