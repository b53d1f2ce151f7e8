//go:build !unix || solaris || illumos || aix

package engine

import "syscall"

// No read loop here: setupLoop leaves raw nil, so none of these is
// reached.
const loopSupported = false

func shutdownSocket(syscall.RawConn) {}

func (c *conn) rawRead(p []byte) (int, error) { panic("engine: no read loop on this system") }

func (c *conn) lookForTheEnd() {}

func (c *conn) peekClient() int { return peekNothing }

func (c *conn) sendNow([]byte) int { return 0 }
