package bus

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/teambus/teambus"
)

// TeamStatePrefix starts the name of the stream behind a team's state
// bucket (bucket TBS_<team>, stream KV_TBS_<team>); the rest is the team id.
const TeamStatePrefix = "KV_TBS_"

// StatusInfo is what `teambus bus status` reports about a bus.
type StatusInfo struct {
	// URL is the node URL from the discovery file, else the connected URL.
	URL string `json:"url"`
	// Version is the NATS server version.
	Version string `json:"version"`
	// ServerName and ServerID name the server the connection reached.
	ServerName string `json:"server_name"`
	ServerID   string `json:"server_id"`
	// Cluster is the cluster name, empty for a single server.
	Cluster string `json:"cluster,omitempty"`
	// PID, StoreDir and StartedAt come from the discovery file of a local
	// node; they are empty for an external NATS.
	PID       int        `json:"pid,omitempty"`
	StoreDir  string     `json:"store_dir,omitempty"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	// Sync is the sync mode of a local node (SyncModeAlways or
	// SyncModeInterval), empty when unknown (external NATS).
	Sync string `json:"sync,omitempty"`
	// SyncAlways reports a local node that fsyncs before acknowledging.
	SyncAlways bool `json:"sync_always"`
	// JetStream is the usage and limits of the account.
	JetStream JetStreamStatus `json:"jetstream"`
	// Teams are the ids of the teams with a state bucket, sorted.
	Teams []string `json:"teams"`
	// Streams are all streams of the account, sorted by name.
	Streams []StreamStatus `json:"streams"`
}

// JetStreamStatus is the JetStream usage and limits of the account. A limit
// of -1 means the account has none of its own (the server limits apply).
type JetStreamStatus struct {
	// Domain is the JetStream domain, empty by default.
	Domain string `json:"domain,omitempty"`
	// MemoryUsed and StoreUsed are the bytes held by memory and file
	// streams.
	MemoryUsed uint64 `json:"memory_used"`
	StoreUsed  uint64 `json:"store_used"`
	// Streams and Consumers count what the account has defined.
	Streams   int `json:"streams"`
	Consumers int `json:"consumers"`
	// MaxMemory, MaxStore, MaxStreams and MaxConsumers are the account
	// limits.
	MaxMemory    int64 `json:"max_memory"`
	MaxStore     int64 `json:"max_store"`
	MaxStreams   int   `json:"max_streams"`
	MaxConsumers int   `json:"max_consumers"`
	// APIErrors counts the failed JetStream API calls since the start.
	APIErrors uint64 `json:"api_errors"`
}

// StreamStatus summarises one stream: its storage ("File" or "Memory"),
// replicas, message count and bytes, sequence range and consumer count.
type StreamStatus struct {
	Name      string `json:"name"`
	Storage   string `json:"storage"`
	Replicas  int    `json:"replicas"`
	Messages  uint64 `json:"messages"`
	Bytes     uint64 `json:"bytes"`
	FirstSeq  uint64 `json:"first_seq"`
	LastSeq   uint64 `json:"last_seq"`
	Consumers int    `json:"consumers"`
}

// Status reports the server, its JetStream usage, the teams and the
// streams of the bus behind c. d is the discovery file of a local node,
// or nil; it supplies the URL (an in-process connection reports a wrong
// one), the pid and the sync mode.
func Status(ctx context.Context, c *Conn, d *Discovery) (*StatusInfo, error) {
	if c == nil || c.NC == nil || c.JS == nil {
		return nil, teambus.Unavailablef("bus status: not connected")
	}
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	nc := c.NC
	info := &StatusInfo{
		URL:        nc.ConnectedUrlRedacted(),
		Version:    nc.ConnectedServerVersion(),
		ServerName: nc.ConnectedServerName(),
		ServerID:   nc.ConnectedServerId(),
		Cluster:    nc.ConnectedClusterName(),
		Teams:      []string{},
		Streams:    []StreamStatus{},
	}
	if d != nil {
		info.URL = d.URL
		info.PID = d.PID
		info.StoreDir = d.StoreDir
		info.Sync = d.Sync
		info.SyncAlways = d.Sync == SyncModeAlways
		if !d.StartedAt.IsZero() {
			t := d.StartedAt.UTC()
			info.StartedAt = &t
		}
	}

	ai, err := c.JS.AccountInfo(ctx)
	if err != nil {
		return nil, teambus.Unavailablef("bus status: JetStream account info: %w", err)
	}
	info.JetStream = JetStreamStatus{
		Domain:       ai.Domain,
		MemoryUsed:   ai.Memory,
		StoreUsed:    ai.Store,
		Streams:      ai.Streams,
		Consumers:    ai.Consumers,
		MaxMemory:    ai.Limits.MaxMemory,
		MaxStore:     ai.Limits.MaxStore,
		MaxStreams:   ai.Limits.MaxStreams,
		MaxConsumers: ai.Limits.MaxConsumers,
		APIErrors:    ai.API.Errors,
	}

	list := c.JS.ListStreams(ctx)
	for si := range list.Info() {
		info.Streams = append(info.Streams, StreamStatus{
			Name:      si.Config.Name,
			Storage:   si.Config.Storage.String(),
			Replicas:  max(si.Config.Replicas, 1),
			Messages:  si.State.Msgs,
			Bytes:     si.State.Bytes,
			FirstSeq:  si.State.FirstSeq,
			LastSeq:   si.State.LastSeq,
			Consumers: si.State.Consumers,
		})
		if team, ok := strings.CutPrefix(si.Config.Name, TeamStatePrefix); ok && teambus.ValidateID("team", team) == nil {
			info.Teams = append(info.Teams, team)
		}
	}
	if err := list.Err(); err != nil {
		return nil, teambus.Unavailablef("bus status: list streams: %w", err)
	}
	sort.Strings(info.Teams)
	sort.Slice(info.Streams, func(i, j int) bool { return info.Streams[i].Name < info.Streams[j].Name })
	return info, nil
}

// String is a short human summary, one line.
func (s *StatusInfo) String() string {
	mode := s.Sync
	if mode == "" {
		mode = "unknown"
	}
	return fmt.Sprintf("bus %s (nats-server %s, sync %s): %d teams, %d streams, %d consumers, store %d bytes",
		s.URL, s.Version, mode, len(s.Teams), s.JetStream.Streams, s.JetStream.Consumers, s.JetStream.StoreUsed)
}
