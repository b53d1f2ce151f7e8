//go:build !unix || solaris || illumos || aix

package upstream

import (
	"net"
	"syscall"
)

// peerOpen cannot look at the socket here: a stale connection is found
// by the request that fails on it (and replayed, when it can be).
func peerOpen(net.Conn) bool { return true }

// rawSocket: no socket-level exchange here (see the unix version).
func rawSocket(net.Conn) syscall.RawConn { return nil }

func (cn *conn) sendAndRead([]byte, bool) (bool, error) {
	panic("upstream: sendAndRead without a socket")
}
