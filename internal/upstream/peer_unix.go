//go:build unix

package upstream

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"

	"github.com/sluicehq/sluice/internal/rawsock"
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
		if sr.peek && !socketQuiet(int(fd)) {
			sr.stale = true
			return true
		}
		if rest := sr.b[sendNow(int(fd), sr.b):]; len(rest) > 0 {
			_, sr.werr = cn.nc.Write(rest) // waits for room
		}
		return sr.werr != nil // written: wait for the answer
	}
	for {
		n, e := rawReadFD(int(fd), cn.buf[cn.w:])
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

// rawReadFD is read(2) on a non-blocking socket as a raw system call
// (see sendNow).
func rawReadFD(fd int, p []byte) (int, error) {
	var ptr unsafe.Pointer
	if len(p) > 0 {
		ptr = unsafe.Pointer(&p[0])
	}
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(ptr), uintptr(len(p)))
	if e != 0 {
		return -1, e
	}
	return int(n), nil
}

// sendNow writes what of b the non-blocking socket takes at once and
// reports how much (0 when it is full or the write failed: the
// connection's Write then waits, or reports the error). The call cannot
// block, so it is a raw system call: without the runtime's bookkeeping
// for a blocking one, which also wakes its monitor thread when the
// process was idle (see the package doc).
func sendNow(fd int, b []byte) int {
	if len(b) == 0 {
		return 0
	}
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return 0
		}
		return int(n)
	}
}

// socketQuiet reports whether an idle connection's socket holds nothing
// and has not ended (see peerOpen). Like sendNow, a raw system call: it
// is the first call of most exchanges, the one that would wake the
// runtime's monitor.
func socketQuiet(fd int) bool {
	var b [1]byte
	for {
		n, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), 1, syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		return int(n) <= 0 && e == syscall.EAGAIN
	}
}
