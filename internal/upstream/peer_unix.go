//go:build unix && !(solaris || illumos || aix)

package upstream

import (
	"crypto/tls"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/sluicehq/sluice/internal/rawsock"
)

// peerOpen looks at an idle connection's socket without blocking: a
// connection the upstream closed while it sat in the pool reads end of
// file (or has bytes nobody asked for), and must not carry a request.
// One recv(MSG_PEEK|MSG_DONTWAIT) system call (rawsock.Quiet); net/http
// learns the same from a reading goroutine per connection.
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
	err = rc.Read(func(fd uintptr) bool {
		open = rawsock.Quiet(int(fd))
		return true
	})
	return open && err == nil
}

// rawSocket is nc's socket for sendAndRead (nil for TLS).
func rawSocket(nc net.Conn) syscall.RawConn { return rawsock.Of(nc) }

// sendAndRead writes a request without a body and reads the answer's
// first bytes, inside one RawConn.Read call: Go's poller forgets a
// socket's readiness when a read begins, so a write followed by a read
// costs a read that finds nothing (the upstream has not answered yet)
// before the wait; readiness raised inside the call is kept, so here the
// write comes after the call began and the call waits at once. With
// peek, a pooled connection is first looked at as peerOpen does (bytes
// nobody asked for, or the upstream's end) and reported stale, nothing
// sent. A read error is kept for fill.
func (cn *conn) sendAndRead(b []byte, peek bool) (stale bool, err error) {
	if cn.r == cn.w {
		cn.r, cn.w = 0, 0
	}
	if cn.sendRead == nil {
		cn.sendRead = cn.sendReadStep // made once: a method value allocates
	}
	cn.sr = sendRead{b: b, peek: peek}
	err = cn.raw.Read(cn.sendRead)
	sr := cn.sr
	cn.sr = sendRead{}
	switch {
	case sr.stale:
		return true, nil
	case sr.werr != nil:
		return false, sr.werr
	case err == nil:
		err = sr.rerr
	}
	cn.pending = err
	return false, nil
}

// sendReadStep is sendAndRead's function for RawConn.Read: the first
// call looks (with peek) and writes, the later ones read.
func (cn *conn) sendReadStep(fd uintptr) bool {
	sr := &cn.sr
	if !sr.sent {
		sr.sent = true
		if sr.peek && !rawsock.Quiet(int(fd)) {
			sr.stale = true
			return true
		}
		if rest := sr.b[rawsock.WriteNow(int(fd), sr.b):]; len(rest) > 0 {
			_, sr.werr = cn.nc.Write(rest) // waits for room
		}
		return sr.werr != nil // written: wait for the answer
	}
	for {
		n, e := rawsock.Read(int(fd), cn.buf[cn.w:])
		if e == syscall.EINTR {
			continue
		}
		if e == syscall.EAGAIN {
			return false
		}
		if n > 0 {
			cn.w += n
			cn.got = true
			return true
		}
		if e == nil {
			sr.rerr = io.EOF
		} else {
			sr.rerr = &net.OpError{Op: "read", Net: cn.nc.LocalAddr().Network(), Source: cn.nc.LocalAddr(),
				Addr: cn.nc.RemoteAddr(), Err: os.NewSyscallError("read", e)}
		}
		return true
	}
}
