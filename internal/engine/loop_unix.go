//go:build unix && !(solaris || illumos || aix)

package engine

import (
	"io"
	"net"
	"os"
	"syscall"

	"github.com/sluicehq/sluice/internal/rawsock"
)

const loopSupported = true

// rawRead reads the socket inside the read loop. A read that finds
// nothing reports errWait (and that the socket is known empty); a short
// read reports that the socket was emptied.
func (c *conn) rawRead(p []byte) (int, error) {
	for {
		n, err := rawsock.Read(c.fd, p)
		c.reads++
		if err == syscall.EINTR {
			continue
		}
		if err == syscall.EAGAIN {
			c.drained, c.sure = true, true
			return 0, errWait
		}
		if n < 0 {
			n = 0
		}
		if err != nil {
			err = &net.OpError{Op: "read", Net: c.rwc.LocalAddr().Network(),
				Source: c.rwc.LocalAddr(), Addr: c.rwc.RemoteAddr(), Err: os.NewSyscallError("read", err)}
		} else if n == 0 {
			err = io.EOF
		}
		c.drained, c.sure = n < len(p), false
		if c.noter != nil {
			c.noter.NoteRead(n, err)
		}
		return n, err
	}
}

// sendNow writes what of b the socket takes at once, inside the read
// loop, and reports how much (0 when the socket is full or the write
// failed: the connection's own Write then waits, or reports the error).
// A raw system call (rawsock.WriteNow; see System calls in the package
// doc).
func (c *conn) sendNow(b []byte) int { return rawsock.WriteNow(c.fd, b) }

// peekClient looks at the client's socket without reading it
// (MSG_PEEK, through Control: the read loop's lock is not needed), for
// the client watch of a request served inside the loop.
func (c *conn) peekClient() int {
	res := peekNothing
	_ = c.raw.Control(func(fd uintptr) {
		var b [1]byte
		for {
			n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			switch {
			case err == syscall.EINTR:
				continue
			case n > 0:
				res = peekData
			case n == 0 && err == nil, err != nil && err != syscall.EAGAIN:
				res = peekEnd
			}
			return
		}
	})
	return res
}

// shutdownSocket ends a connection at once without closing its
// descriptor: every wait on it ends, the peer sees the end, and the
// connection's goroutine closes it (Close would wait for a goroutine
// inside the read loop).
func shutdownSocket(rc syscall.RawConn) {
	_ = rc.Control(func(fd uintptr) { _ = syscall.Shutdown(int(fd), syscall.SHUT_RDWR) })
}

// lookForTheEnd looks at the socket without reading it (MSG_PEEK, from
// the sweeper, outside the loop): if the client's end is there, a
// shutdown for reading raises the readiness the loop waits for.
func (c *conn) lookForTheEnd() {
	_ = c.raw.Control(func(fd uintptr) {
		var b [1]byte
		for {
			n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			if err == syscall.EINTR {
				continue
			}
			if n == 0 && err == nil || err != nil && err != syscall.EAGAIN {
				_ = syscall.Shutdown(int(fd), syscall.SHUT_RD)
			}
			return
		}
	})
}
