//go:build unix

package upstream

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

// peerOpen looks at an idle connection's socket without blocking: a
// connection the upstream closed while it sat in the pool reads end of
// file (or has bytes nobody asked for), and must not carry a request.
// One recv(MSG_PEEK|MSG_DONTWAIT) system call; net/http learns the same
// from a reading goroutine per connection.
func peerOpen(nc net.Conn) bool {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := true
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		n, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case n > 0, n == 0 && rerr == nil:
			open = false // unexpected bytes, or end of file
		case rerr != nil && !errors.Is(rerr, syscall.EAGAIN) && !errors.Is(rerr, syscall.EINTR):
			open = false
		}
		return true
	})
	return open && err == nil
}
