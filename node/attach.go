package node

import (
	"context"
	"io"
	"time"

	"github.com/nats-io/nats.go"
)

// Attach returns the node.NodeConfig.Attach hook that hosts the team
// service in the node's process, on an in-process connection with the
// node token (the data account).
func Attach(cfg Config) func(*Node) (io.Closer, error) {
	return func(n *Node) (io.Closer, error) {
		if err := importDisconnects(n.Server()); err != nil && cfg.Logger != nil {
			cfg.Logger.Warn("no disconnect events: a lost agent connection is seen by its silence only", "err", err)
		}
		nc, err := nats.Connect("", nats.InProcessServer(n.InProcess()), nats.Token(n.Token()), nats.Name("teambus-service"),
			nats.MaxReconnects(-1))
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := Open(ctx, nc, cfg)
		if err != nil {
			nc.Close()
			return nil, err
		}
		return hosted{s: s, nc: nc}, nil
	}
}

// hosted is a service with the connection it owns.
type hosted struct {
	s  *Service
	nc *nats.Conn
}

func (h hosted) Close() error {
	err := h.s.Close()
	h.nc.Close()
	return err
}
