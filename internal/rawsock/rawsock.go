// Package rawsock finds the socket under a plain TCP or Unix connection,
// for the servers' and the upstream client's reads that keep the
// poller's readiness (a syscall.RawConn.Read call, see internal/engine's
// read loop). TLS and other wrappers have none to give: their bytes are
// not the socket's.
//
// Read, WriteNow and Quiet are the system calls of that hot path, made
// raw on sockets that are non-blocking and so cannot block. A call made
// through package syscall tells the runtime that it may block, and that
// entry also wakes the runtime's monitor thread (sysmon) whenever the
// monitor had found every P idle and gone to sleep; it then polls every
// 20 µs for about a millisecond. A proxy at a modest load goes idle
// hundreds of times a second, so one such call per burst was a context
// switch every few responses on the proxy's own core. A raw call skips
// the runtime's entry and exit, and the monitor stays asleep until its
// next timer or another system call. The cost: while it sleeps, a
// goroutine that computes for more than 10 ms is not preempted by it;
// the goroutines of this path park within microseconds.
//
// Those calls exist on the Unix systems whose package syscall numbers its
// system calls (Linux, the BSDs, macOS); on Solaris, illumos and AIX it
// calls through libc instead, so there the package gives Of alone and the
// engine and the upstream client keep the ordinary path, as on Windows.
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
