// Package proc watches the agent process a sidecar stands beside. On Linux
// it waits on a pidfd, so an exit is seen at once, not on the next poll;
// elsewhere it falls back to probing the pid every 100ms.
package proc
