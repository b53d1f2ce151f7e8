//go:build !unix

package engine

import "syscall"

const loopSupported = false

func dupConn(int) (net.Conn, error)  { panic("engine: no read loop on this system") }
func shutdownSocket(syscall.RawConn) {}

func (c *conn) rawRead(p []byte) (int, error) { panic("engine: no read loop on this system") }

func (c *conn) lookForTheEnd() {}
