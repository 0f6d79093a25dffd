//go:build !linux && !teambus_agent

package relay

import "net"

// peerUID is not known here: the socket's private directory is the check.
func peerUID(net.Conn) (int, bool) { return 0, false }
