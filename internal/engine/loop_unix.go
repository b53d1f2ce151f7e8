//go:build unix

package engine

import (
	"io"
	"net"
	"os"
	"syscall"
)

const loopSupported = true

// rawRead reads the socket inside the read loop. A read that finds
// nothing reports errWait (and that the socket is known empty); a short
// read reports that the socket was emptied.
func (c *conn) rawRead(p []byte) (int, error) {
	for {
		n, err := syscall.Read(c.fd, p)
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
