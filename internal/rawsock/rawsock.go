// Package rawsock finds the socket under a plain TCP or Unix connection,
// for the servers' and the upstream client's reads that keep the
// poller's readiness (a syscall.RawConn.Read call, see internal/engine's
// read loop). TLS and other wrappers have none to give: their bytes are
// not the socket's.
package rawsock

import (
	"net"
	"syscall"
)

// Of returns nc's socket when nc is a *net.TCPConn or *net.UnixConn,
// else nil.
func Of(nc net.Conn) syscall.RawConn {
	var sc syscall.Conn
	switch t := nc.(type) {
	case *net.TCPConn:
		sc = t
	case *net.UnixConn:
		sc = t
	default:
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}
